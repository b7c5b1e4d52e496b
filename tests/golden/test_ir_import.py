"""IR datasets from disk to a gated run with no hand conversion (issue 22 §2): a BEIR folder
(tests/data/beir-mini: numeric ids, a title with empty text, graded qrels, a judged document the
corpus lacks) and a TREC qrels file go through `rageval golden import`, `rageval run` and
`rageval gate`; the run's per-case metrics are checked against trec_eval (pytrec_eval) reading
the qrels file itself."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from rageval.errors import DatasetError
from rageval.golden.ir_import import import_beir, import_qrels, read_qrels, read_queries
from rageval.golden.set import load_golden

BEIR = Path(__file__).parents[1] / "data" / "beir-mini"


def beir_qrels(split: str = "test") -> dict[str, dict[str, int]]:
    """The qrels as the csv module reads the TSV: the reference the import is held to."""
    with (BEIR / "qrels" / f"{split}.tsv").open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        out.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return out


def corpus_ids() -> set[str]:
    return {json.loads(line)["_id"] for line in (BEIR / "corpus.jsonl").read_text(encoding="utf-8").splitlines()}


def test_a_beir_split_becomes_a_graded_golden_set(tmp_path):
    found = import_beir(BEIR, "test")
    qrels, ids = beir_qrels(), corpus_ids()
    want = {q: {d: g for d, g in judged.items() if g > 0 and d in ids} for q, judged in qrels.items()}
    assert {c["id"]: c["expected_sections"] for c in found.cases} == {q: g for q, g in want.items() if g}
    assert (found.skipped_documents, found.skipped_judgments, found.graded) == (1, 1, True)  # 9999; 1007 judged 0
    path = tmp_path / "golden.yaml"
    path.write_text(found.yaml(), encoding="utf-8")
    golden = load_golden(path)
    case = golden.by_id()["1"]
    assert case.expected_sections == ("1001", "1004") and case.relevance() == {"1001": 2, "1004": 1}
    assert case.question == "Does vitamin D supplementation improve bone density in the elderly?"
    # the dev split judges only grade 1 (and a 0): a plain list, no grades
    dev = import_beir(BEIR, "dev")
    assert not dev.graded and {c["id"]: c["expected_sections"] for c in dev.cases} == {
        "4": ["1010"], "5": ["1012"], "6": ["1019"]}


def test_a_judged_document_missing_from_the_corpus_is_refused_by_option():
    with pytest.raises(DatasetError, match=r"test.tsv: 1 judged documents are not in the corpus .*\(e.g. 9999\)"):
        import_beir(BEIR, "test", missing="refuse")


def write_trec(tmp_path: Path) -> tuple[Path, Path]:
    """The same judgments as a TREC qrels file (a comment line, tabs and spaces) and the queries as TSV."""
    qrels = tmp_path / "qrels.trec"
    lines = ["# judged by hand"] + [f"{q} 0 {d}\t{g}" for q, judged in beir_qrels().items() for d, g in judged.items()]
    qrels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    queries = tmp_path / "topics.tsv"
    queries.write_text("".join(f"{json.loads(x)['_id']}\t{json.loads(x)['text']}\n"
                               for x in (BEIR / "queries.jsonl").read_text(encoding="utf-8").splitlines()),
                       encoding="utf-8")
    return qrels, queries


def test_trec_qrels_give_the_same_cases_as_the_beir_split(tmp_path):
    qrels, queries = write_trec(tmp_path)
    trec = import_qrels(qrels, queries, str(BEIR / "corpus.jsonl"), tmp_path)
    beir = import_beir(BEIR, "test")
    assert [(c["id"], c["question"], c["expected_sections"]) for c in trec.cases] == \
        [(c["id"], c["question"], c["expected_sections"]) for c in beir.cases]


@pytest.mark.parametrize("text, message", [
    ("1 0 D1\n1 0 D2 1 extra\n", r"q.txt: line 2: a qrels line is"),
    ("1 0 D1 high\n", r"q.txt: line 1: the relevance 'high' is not a whole number"),
    ("1 0 D1 1.5\n", r"q.txt: line 1: the relevance '1.5' is not a whole number"),
    ("1 0 D1 1\n1 0 D1 2\n", r"q.txt: line 2: query 1 judges document D1 twice \(lines 1 and 2\)"),
])
def test_bad_qrels_lines_name_file_and_line(tmp_path, text, message):
    path = tmp_path / "q.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        read_qrels(path)


def test_qrels_comments_headers_and_negative_grades(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("# a comment\n301 0 CR#93E-1860 0\n301 0 A 3\n302\tQ0\tB\t-1\n", encoding="utf-8")
    assert read_qrels(path) == {"301": {"CR#93E-1860": 0, "A": 3}, "302": {"B": -1}}
    bad = tmp_path / "queries.jsonl"
    bad.write_text('{"_id": "1"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"queries.jsonl: line 1: a query line needs an id .* and a 'text'"):
        read_queries(bad)


def test_a_beir_folder_goes_from_disk_to_a_gated_run(tmp_path, run_cli, pytrec_eval):
    folder = tmp_path / "scifacts"
    shutil.copytree(BEIR, folder)
    code, out, _ = run_cli("golden", "import", "--beir", folder, "--split", "test", "--out", tmp_path / "golden.yaml")
    assert code == 0 and "12 cases from scifacts-test (graded relevance)" in out
    assert "skipped 1 judged documents that are not in the corpus" in out
    config = tmp_path / "rageval.yml"
    config.write_text("golden: golden.yaml\ncorpus: scifacts\ngeneration: {provider: none}\n"
                      "retrieval: {mode: dense, k: [1, 3, 5, 10], top_k: 10}\n", encoding="utf-8")
    assert run_cli("validate", config, "--no-git")[0] == 0
    code, _, _ = run_cli("run", config, "--out", tmp_path / "run.json")
    assert code == 0
    result = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    chunks = result["chunks"]
    # trec_eval on the run as a TREC run file, with the qrels read from the BEIR file (missing doc included:
    # trec_eval counts it in the ideal, rageval skips it, so the reference judges the corpus's documents)
    ids = corpus_ids()
    qrels = {q: {d: g for d, g in judged.items() if d in ids} for q, judged in beir_qrels().items()}
    run = {c["id"]: {chunks[r["chunk_id"]]["sections"][0]: 100.0 - i for i, r in enumerate(c["retrieved"])}
           for c in result["cases"]}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.1,3,5,10", "recall.1,3,5,10", "recip_rank"}).evaluate(run)
    for case in result["cases"]:
        for k in (1, 3, 5, 10):
            assert case["metrics"][f"ndcg@{k}"] == pytest.approx(ref[case["id"]][f"ndcg_cut_{k}"], abs=1e-6)
            assert case["metrics"][f"recall@{k}"] == pytest.approx(ref[case["id"]][f"recall_{k}"], abs=1e-6)
        assert case["metrics"]["mrr@10"] == pytest.approx(ref[case["id"]]["recip_rank"], abs=1e-6)
    mean = result["summary"]["metrics"]["ndcg@10"]
    config.write_text(config.read_text() + f"gate: {{floors: {{ndcg@10: {round(mean + 0.01, 2)}}}}}\n")
    assert run_cli("gate", config, "--candidate", tmp_path / "run.json")[0] == 1     # below the floor: blocked
    config.write_text(config.read_text().replace(f"ndcg@10: {round(mean + 0.01, 2)}", f"ndcg@10: {mean - 0.01:.2f}"))
    assert run_cli("gate", config, "--candidate", tmp_path / "run.json")[0] == 0


def test_trec_qrels_go_from_disk_to_a_gated_run(tmp_path, run_cli):
    qrels, queries = write_trec(tmp_path)
    shutil.copy(BEIR / "corpus.jsonl", tmp_path / "docs.jsonl")
    code, out, _ = run_cli("golden", "import", "--qrels", qrels, "--queries", queries, "--corpus",
                           tmp_path / "docs.jsonl", "--out", tmp_path / "golden.yaml")
    assert code == 0 and out.startswith("12 cases from qrels (graded relevance)")
    golden = yaml.safe_load((tmp_path / "golden.yaml").read_text(encoding="utf-8"))
    assert golden["cases"][0]["expected_sections"] == {"1001": 2, "1004": 1}
    config = tmp_path / "rageval.yml"
    config.write_text("golden: golden.yaml\ncorpus: docs.jsonl\ngeneration: {provider: none}\n"
                      "retrieval: {mode: bm25, k: [1, 5], relevance_min: 2}\ngate: {floors: {hit@5: 0.5}}\n",
                      encoding="utf-8")
    assert run_cli("gate", config)[0] == 0
    assert run_cli("golden", "import", "--qrels", qrels, "--out", tmp_path / "g.yaml")[0] == 2   # no --queries


@pytest.fixture(scope="module")
def pytrec_eval():
    return pytest.importorskip("pytrec_eval")

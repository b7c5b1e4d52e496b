"""Issue 22 §4: the builtin app's results do not depend on the order or the names of the corpus
files. Equal scores (dense, BM25) are broken by content — the chunk's section ids, then a hash of
its text — and equal fused scores (hybrid) first by the chunk's best rank in either ranking, never
by where a chunk sits in the corpus. Reversing and renaming the demo's files (same content) gives
the same metrics and the same rankings (by section and text: a chunk id names its file) in every
mode, and a corpus of identical sections ranks them by section id whichever file comes first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rageval.config import load_config
from rageval.pipeline.runner import prepare

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "banhang"
MODES = ("dense", "bm25", "hybrid")


def _run(project: Path, mode: str, chunking: dict | None = None) -> dict:
    """Summary metrics and, per case, metrics and the ranking as (sections, text, score) — the
    chunk ids are left out, they name the file."""
    cfg = project / f"order-{mode}.yml"
    data = yaml.safe_load((project / "rageval.yml").read_text(encoding="utf-8"))
    data["retrieval"] = {**data.get("retrieval", {}), "mode": mode, "top_k": 5, "k": [1, 3, 5]}
    if chunking is not None:
        data["chunking"] = chunking
    cfg.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    result = prepare(load_config(cfg), env={}).run()
    cases = {c.id: {"metrics": dict(c.metrics), "answer": c.answer, "passed": c.passed,
                    "ranking": [[list(r.sections), r.text, r.score] for r in (c.retrieved or ())]}
             for c in result.cases}
    return json.loads(json.dumps({"summary": dict(result.summary.to_dict()["metrics"]), "cases": cases},
                                 ensure_ascii=False, sort_keys=True))


def _demo(tmp_path: Path, name: str, rename) -> Path:
    project = tmp_path / name
    shutil.copytree(DEMO, project)
    docs = sorted((project / "docs").glob("*.md"))
    for i, path in enumerate(docs):
        path.rename(path.with_name(rename(i, len(docs), path.name)))
    return project


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunking", [None, {"size": 200, "overlap": 0}])    # the demo's packing; one section per chunk
def test_reversing_and_renaming_the_demo_files_changes_no_metric_and_no_ranking(tmp_path, mode, chunking):
    as_is = _demo(tmp_path, "as-is", lambda i, n, name: name)
    reversed_ = _demo(tmp_path, "reversed", lambda i, n, name: f"{chr(ord('z') - i)}-{name[-4::-1]}.md")
    assert [p.name for p in sorted((reversed_ / "docs").glob("*.md"))][0].startswith("w-")   # last file first
    first, second = _run(as_is, mode, chunking), _run(reversed_, mode, chunking)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


# --- deliberate exact ties -------------------------------------------------------------------

_SECTION = "## {sid} Phí giao hàng nhanh\n\nPhí giao hàng nhanh nội thành là 30 nghìn đồng cho mỗi đơn.\n\n"
_OTHER = "## {sid} Đổi trả\n\nHàng lỗi được đổi trong {days} ngày kể từ ngày nhận.\n\n"


def _tied_project(root: Path, files: list[str]) -> Path:
    """Four sections with the same title and text (so the same scores in every mode), one per
    file, each beside a distinct section; cases expect each of the four."""
    root.mkdir()
    (root / "docs").mkdir()
    for n, name in enumerate(files):
        sid = ["PG-1", "PG-2", "PG-3", "PG-4"][n]
        text = _SECTION.format(sid=sid) + _OTHER.format(sid=f"DT-{n + 1}", days=3 + n)
        (root / "docs" / name).write_text(f"# Tài liệu\n\n{text}", encoding="utf-8")
    cases = [{"id": f"t{i}", "question": "Phí giao hàng nhanh nội thành là bao nhiêu?",
              "expected_sections": [f"PG-{i}"], "expected_answer": "30 nghìn đồng"} for i in range(1, 5)]
    (root / "golden.json").write_text(json.dumps({"dataset": "ties", "version": 1, "cases": cases}),
                                      encoding="utf-8")
    (root / "rageval.yml").write_text("golden: golden.json\ncorpus: docs/*.md\n"
                                      "generation: {provider: extractive, max_sentences: 1}\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("mode", MODES)
def test_identical_sections_rank_by_section_id_whatever_the_file_order(tmp_path, mode):
    forward = _run(_tied_project(tmp_path / "a", ["a.md", "b.md", "c.md", "d.md"]), mode)
    backward = _run(_tied_project(tmp_path / "b", ["d.md", "c.md", "b.md", "a.md"]), mode)
    assert forward == backward
    ranking = forward["cases"]["t1"]["ranking"]
    assert [r[0] for r in ranking[:4]] == [["PG-1"], ["PG-2"], ["PG-3"], ["PG-4"]]
    if mode != "hybrid":                                  # hybrid fuses two rankings that each tie
        assert len({r[2] for r in ranking[:4]}) == 1      # the four really tie
    hit1 = {cid: case["metrics"]["hit@1"] for cid, case in forward["cases"].items()}
    assert hit1 == {"t1": 1.0, "t2": 0.0, "t3": 0.0, "t4": 0.0}

"""bench/bench_offline.py, bench/offline_child.py and bench/synthetic.py on small projects: the
projects are the same bytes for the same arguments and Zipfian, every kind of measurement the full
bench runs works in a child process (figures on the last stdout line: CPU seconds, peak RSS and, for
pipeline runs, the metrics), and the README's benchmark tables are those of bench/results-offline.json."""

import collections
import hashlib
import json
import math
import re
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import bench_offline  # noqa: E402
import synthetic  # noqa: E402

from rageval.text import folded_words  # noqa: E402


def test_synthetic_projects_are_reproducible(tmp_path):
    a = synthetic.write_project(tmp_path / "a", 30, 12, golden_format="yaml", zipf=True)
    b = synthetic.write_project(tmp_path / "b", 30, 12, golden_format="yaml", zipf=True)
    for name in ("corpus.json", "golden.yaml", "rageval.yml"):
        assert (a.parent / name).read_bytes() == (b.parent / name).read_bytes()
    corpus = json.loads((a.parent / "corpus.json").read_text(encoding="utf-8"))
    assert len(corpus) == 30 and any("ngày" in s["text"] or "đồng" in s["text"] for s in corpus.values())


def test_the_uniform_language_other_benches_published_figures_on_is_unchanged():
    # bench_scale, bench_html and bench_results_io measured on the uniform corpus: its bytes are
    # pinned to those main's bench/synthetic.py wrote at 46e98b2, before the Zipfian one was added.
    corpus = synthetic.make_corpus(200)
    assert hashlib.sha256(json.dumps(corpus, ensure_ascii=False).encode()).hexdigest() == \
        "74915b3991cf40b9fc7d79b9a7528eca5a4c1ffb6ffc4609028cdc127f04088f"
    assert hashlib.sha256(json.dumps(synthetic.make_cases(corpus, 50), ensure_ascii=False).encode()).hexdigest() == \
        "7bcc63a065951fbd0f27d83762a2de5b205c4fcf6dcc61ae80a7eec46110f799"


def test_synthetic_word_frequencies_are_zipfian():
    # Rank × frequency of the folded words is about constant (Zipf, exponent ~1) over two decades
    # of ranks, and the commonest words sit in most sections: a query's postings are long.
    corpus = synthetic.make_corpus(2000, zipf=True)
    counts, sections_with = collections.Counter(), collections.Counter()
    for section in corpus.values():
        words = folded_words(section["text"])
        counts.update(words)
        sections_with.update(set(words))
    freq = [f for _, f in counts.most_common()]
    slope = (math.log(freq[999]) - math.log(freq[9])) / (math.log(1000) - math.log(10))
    assert -1.3 < slope < -0.7
    top = counts.most_common(1)[0][0]
    assert sections_with[top] > 0.8 * len(corpus)
    assert sum(1 for f in counts.values() if f == 1) > 0.3 * len(counts)       # a long tail of rare words


def test_golden_sets_of_several_sizes_share_one_corpus(tmp_path):
    cfg = synthetic.write_project(tmp_path, 40, [5, 9], zipf=True)
    assert cfg.name == "rageval-5.yml" and (tmp_path / "rageval-9.yml").exists()
    assert len(json.loads((tmp_path / "golden-9.json").read_text(encoding="utf-8"))["cases"]) == 9


def _child(*argv: str) -> dict:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "offline_child.py"), *argv],
                         capture_output=True, text=True, timeout=180, cwd=ROOT, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["cpu_s"] > 0 and figures["peak_rss_mb"] > 10
    return figures


@pytest.mark.parametrize("measure", [["e2e", "{dir}", "hybrid"], ["build", "{dir}", "bm25"],
                                     ["cli", "validate", "--config", "{cfg}", "--no-git"]])
def test_each_measurement_reports_its_figures(tmp_path, measure):
    cfg = synthetic.write_project(tmp_path, 60, 15, zipf=True)
    figures = _child(*(part.format(dir=cfg.parent, cfg=cfg) for part in measure))
    if measure[0] == "e2e":
        assert figures["cases"] == 15 and 0 <= figures["hit@1"] <= 1
    if measure[0] == "cli":
        assert figures["exit"] == 0


def test_scale_measures_rageval_and_bm25s_stage_by_stage(tmp_path):
    synthetic.write_project(tmp_path, 80, [20], zipf=True)
    ours = _child("scale", str(tmp_path), "20", "bm25")
    theirs = _child("bm25s", str(tmp_path), "20")
    assert ours["cases"] == theirs["cases"] == 20 and ours["chunks"] == theirs["chunks"] == 80
    assert set(ours["stages_cpu_s"]) == {"load", "index", "search", "cases"}
    assert set(theirs["stages_cpu_s"]) == {"load", "index", "search"}
    assert ours["engine_peak_rss_mb"] <= ours["peak_rss_mb"]
    assert ours["hit@1"] == theirs["hit@1"]                  # the same BM25, the same first hits


def test_a_partial_run_updates_only_what_it_measured():
    old = {"e2e": {"now": {"cpu_s": 1.0}}, "scale": {"10x1": {"bm25s": {"cpu_s": 1.0}, "dense": {"cpu_s": 2.0}}}}
    new = {"scale": {"10x1": {"dense": {"cpu_s": 3.0}}, "20x1": {"bm25": {"cpu_s": 4.0}}}}
    assert bench_offline.merged(old, new) == {
        "e2e": {"now": {"cpu_s": 1.0}},
        "scale": {"10x1": {"bm25s": {"cpu_s": 1.0}, "dense": {"cpu_s": 3.0}}, "20x1": {"bm25": {"cpu_s": 4.0}}}}


def test_the_benchmarks_page_shows_the_tables_of_the_results_file():
    figures = json.loads((ROOT / "bench" / "results-offline.json").read_text(encoding="utf-8"))
    readme = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    start = readme.index(bench_offline.README_START)
    block = readme[readme.index("\n", start) + 1:readme.index(bench_offline.README_END)]
    assert block == bench_offline.tables(figures), "run: python bench/bench_offline.py --render " \
                                                   "bench/results-offline.json --readme docs/benchmarks.md"


def test_quick_is_the_smallest_scale_cell_and_the_demo():
    args = bench_offline.parse(["--quick"])
    assert (args.only, args.chunks, args.cases, args.runs) == ("scale,demo", [10_000], [1_000], 1)
    assert args.modes == ["dense", "bm25", "hybrid"] and not args.without_bm25s


def test_the_readme_cost_table_quotes_the_results_file():
    """Each cell of the README's 'Cost at release size' table is the CPU seconds (and × bm25s's)
    of bench/results-offline.json's scale cell, as measured; 'not run' where the file has none."""
    scale = json.loads((ROOT / "bench" / "results-offline.json").read_text(encoding="utf-8"))["scale"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Cost at release size"):]
    section = section[:section.index("\n## ")]
    rows = [line for line in section.splitlines() if re.match(r"\| \d+[kM] × \d+k \|", line)]
    assert len(rows) >= 4
    sizes = {"k": 1_000, "M": 1_000_000}
    for row in rows:
        label, *cells = [c.strip() for c in row.strip("|").split("|")]
        chunks, cases = (int(n) * sizes[unit] for n, unit in re.findall(r"(\d+)([kM])", label))
        cell = scale[f"{chunks}x{cases}"]
        for side, text in zip(("bm25s", "bm25", "dense", "hybrid"), cells, strict=True):
            if text == "not run":
                assert side not in cell, (label, side)
                continue
            shown = re.match(r"([\d.]+) s", text).group(1)
            decimals = len(shown.split(".")[1]) if "." in shown else 0
            assert float(shown) == round(cell[side]["cpu_s"], decimals), (label, side, text)
            ratio = re.search(r"×([\d.]+)", text)
            if side != "bm25s":
                assert float(ratio.group(1)) == round(cell[side]["cpu_s"] / cell["bm25s"]["cpu_s"], 1), (label, side)

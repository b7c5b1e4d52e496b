"""bench/bench_offline.py and bench/synthetic.py on a small project: the projects are the same bytes
for the same arguments, and every kind of measurement the full bench runs works in a child process
(figures on the last stdout line: CPU seconds, peak RSS and, for pipeline runs, the metrics)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import synthetic  # noqa: E402


def test_synthetic_projects_are_reproducible(tmp_path):
    a = synthetic.write_project(tmp_path / "a", 30, 12, golden_format="yaml")
    b = synthetic.write_project(tmp_path / "b", 30, 12, golden_format="yaml")
    for name in ("corpus.json", "golden.yaml", "rageval.yml"):
        assert (a.parent / name).read_bytes() == (b.parent / name).read_bytes()
    corpus = json.loads((a.parent / "corpus.json").read_text(encoding="utf-8"))
    assert len(corpus) == 30 and any("ngày" in s["text"] or "đồng" in s["text"] for s in corpus.values())


@pytest.mark.parametrize("measure", [["e2e", "{dir}", "hybrid"], ["build", "{dir}", "bm25"],
                                     ["cli", "validate", "--config", "{cfg}", "--no-git"]])
def test_each_measurement_reports_its_figures(tmp_path, measure):
    cfg = synthetic.write_project(tmp_path, 60, 15)
    argv = [part.format(dir=cfg.parent, cfg=cfg) for part in measure]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_offline.py"), "--measure", *argv],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["cpu_s"] > 0 and figures["peak_rss_mb"] > 10
    if measure[0] == "e2e":
        assert figures["cases"] == 15 and 0 <= figures["hit@1"] <= 1
    if measure[0] == "cli":
        assert figures["exit"] == 0

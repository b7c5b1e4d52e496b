"""bench/bench_cases.py and bench/bench_commands.py on small projects: each writes the figures the
README's "Cost per case" section quotes (stages, per-case milliseconds, command / parse ratios)."""

import json
import subprocess
import sys

from conftest import ROOT


def _bench(script: str, *args: str, out) -> dict:
    subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
                   capture_output=True, text=True, timeout=600, cwd=ROOT, check=True)
    return json.loads(out.read_text(encoding="utf-8"))


def test_bench_cases_times_every_stage(tmp_path):
    figures = _bench("bench_cases.py", "--cases", "20", "40", "--chunks", "30", "--runs", "1",
                     out=tmp_path / "cases.json")["figures"]
    assert [f["cases"] for f in figures] == [20, 40] and figures[0]["chunks"] >= 30
    for row in figures:
        assert set(row["stages"]) == {"golden", "corpus", "index", "answer", "search", "result", "write"}
        assert 0 < row["stages"]["search"]["cpu_s"] <= row["stages"]["answer"]["cpu_s"]
        assert 0 < row["per_case_without_search_ms"]["cpu"] < row["per_case_ms"]["cpu"]


def test_bench_commands_gives_ratios_to_a_plain_parse(tmp_path):
    # --before: another tree's gate (here this one's) measured beside it, against the same parse
    figures = _bench("bench_commands.py", "--cases", "30", "--sections", "20", "--runs", "1",
                     "--project", str(tmp_path / "project"), "--before", str(ROOT), out=tmp_path / "commands.json")
    assert set(figures["cpu_s"]) == {"plain-gate", "gate", "plain-validate", "validate", "gate-before"}
    assert figures["ratio"]["gate"] == round(figures["cpu_s"]["gate"] / figures["cpu_s"]["plain-gate"], 2)
    assert figures["ratio"]["gate-before"] == round(figures["cpu_s"]["gate-before"] / figures["cpu_s"]["plain-gate"], 2)
    assert (tmp_path / "project" / "verdict.json").is_file() and (tmp_path / "project" / "report.md").is_file()

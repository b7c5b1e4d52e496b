"""bench/bench_leaks.py on a small synthetic project: the leak check's figures per corpus size,
beside another tree's (here this one's), with the planted questions found on both sides."""

import json
import subprocess
import sys

from conftest import ROOT


def test_bench_leaks_times_the_check_per_size_and_finds_the_planted_questions(tmp_path):
    out = tmp_path / "leaks.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "bench_leaks.py"), "--sections", "40", "120", "--cases", "20",
                    "--plant", "5", "--before", str(ROOT), "--json", str(out)],
                   capture_output=True, text=True, timeout=600, cwd=ROOT, check=True)
    cells = json.loads(out.read_text(encoding="utf-8"))["cells"]
    assert list(cells) == [f"{n} sections x 20 cases, overlap 0.8, 5 planted" for n in (40, 120)]
    for n, cell in zip((40, 120), cells.values()):
        for side in ("now", "before"):
            # each planted question is all of its 3-grams in the section it was pasted into, and
            # the synthetic questions are nowhere else (they pick words of a sentence, not a run)
            assert cell[side]["sections"] == n and cell[side]["cases"] == 20 and cell[side]["leaks"] == 5
            assert cell[side]["cpu_s"] > 0 and cell[side]["peak_mb"] >= cell[side]["rss_before_mb"] > 0
        assert cell["same_findings"] and cell["now"]["leaks_sha256"] == cell["before"]["leaks_sha256"]

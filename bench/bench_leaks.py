"""The golden set's leak check alone, per corpus size (issue 25 §2: cost per chunk).

    python bench/bench_leaks.py                                  # a Zipfian project of 200,000 sections
    python bench/bench_leaks.py --project /tmp/benchprojects/scale200000 --before /tmp/main
    python bench/bench_leaks.py --project P --sections 1000000 --cases 1000 --json bench/results-leaks.json

What every `rageval run` and `rageval validate` pays once: ``leak_places`` + ``find_leaks`` (as
``lifecycle.audit_golden`` calls them) over the first N sections of the project's corpus.json and
the whole golden set (golden-{cases}.json, or golden.json), at ``golden_checks.leak_overlap``'s
default 0.8, with ``--plant`` questions (100) pasted into as many sections so there are leaks to find. Each figure is a fresh child process (corpus and golden set loaded first, not timed):
CPU seconds and wall seconds of the check, the process's RSS before it and its peak during it (the
high-water mark is reset before the check, /proc/self/clear_refs), and the findings (how many, and a
sha256 of their JSON) so the two sides can be seen to agree. ``--before DIR``: the same in a child
importing the rageval in DIR instead (``git archive main | tar -x -C DIR``), alternating run by run.

Without ``--project`` the project is made first by bench/synthetic.py (Zipfian, seeded: the same
bytes every time) in a temporary folder.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rageval.golden.corpus import Corpus, load_corpus  # the child's: from PYTHONPATH (--before DIR)
from rageval.golden.lifecycle import find_leaks, leak_places
from rageval.golden.set import load_golden

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


def _status(key: str) -> float:
    """A /proc/self/status figure in MB (VmRSS, VmHWM)."""
    return int(re.search(key + r":\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def measure(project: Path, sections: int, cases: int, overlap: float, plant: int) -> dict:
    """The leak check over the first ``sections`` sections, in this process (the child's side);
    the first ``plant`` questions pasted at the end of as many sections spread over the corpus."""
    corpus = load_corpus("corpus.json", project)
    name = f"golden-{cases}.json"
    golden = load_golden(project / (name if (project / name).is_file() else "golden.json"))
    chosen = list(corpus.sections[:sections])
    for n, case in enumerate(golden.full.cases[:plant]):
        at = (n * 7919) % len(chosen)
        chosen[at] = replace(chosen[at], text=f"{chosen[at].text}\nKhách hỏi: {case.question}")
    corpus = Corpus(tuple(chosen), corpus.files)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    rss = _status("VmRSS")
    cpu, wall = time.process_time(), time.perf_counter()
    places = leak_places(None, [], corpus, project)
    leaks = find_leaks(golden.full.cases, places, overlap)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    found = json.dumps([x.to_dict() for x in leaks], ensure_ascii=False, sort_keys=True)
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "rss_before_mb": round(rss),
            "peak_mb": round(_status("VmHWM")), "peak_over_before_mb": round(_status("VmHWM") - rss),
            "sections": len(corpus.sections), "cases": len(golden.full.cases), "leaks": len(leaks),
            "leaks_sha256": hashlib.sha256(found.encode()).hexdigest()[:16]}


def child(project: Path, sections: int, cases: int, overlap: float, plant: int, code: str | None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(code).resolve() if code else ROOT)}
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", str(project), str(sections), str(cases),
            str(overlap), str(plant)]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def median(samples: list[dict]) -> dict:
    return {k: (round(statistics.median(s[k] for s in samples), 3) if isinstance(v, float) else v)
            for k, v in samples[0].items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measure", nargs=5, help=argparse.SUPPRESS)
    p.add_argument("--project", default=None, help="a folder with corpus.json and golden-{cases}.json or golden.json "
                   "(default: bench/synthetic.py's Zipfian project of the largest --sections, made in a temporary folder)")
    p.add_argument("--sections", type=int, nargs="+", default=[10_000, 100_000, 200_000])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--overlap", type=float, default=0.8, help="golden_checks.leak_overlap (default 0.8)")
    p.add_argument("--plant", type=int, default=100, help="paste this many questions into sections (leaks to find)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--before", default=None, metavar="DIR", help="also the rageval in DIR (e.g. `git archive main`)")
    p.add_argument("--json", default=None, help="write the figures here (merged into what the file holds)")
    args = p.parse_args(argv)
    if args.measure:
        project, sections, cases, overlap, plant = args.measure
        print(json.dumps(measure(Path(project), int(sections), int(cases), float(overlap), int(plant))))
        return 0
    sides = {"now": None, **({"before": args.before} if args.before else {})}
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(args.project) if args.project else Path(tmp) / "project"
        if not args.project:
            subprocess.run([sys.executable, str(HERE / "synthetic.py"), str(project), str(max(args.sections)),
                            f"{args.cases},", "json", "zipf"], check=True, capture_output=True)
        for sections in args.sections:
            samples: dict[str, list[dict]] = {side: [] for side in sides}
            for _ in range(args.runs):
                for side, code in sides.items():
                    samples[side].append(child(project, sections, args.cases, args.overlap, args.plant, code))
            cell = {side: median(s) for side, s in samples.items()}
            if args.before:
                cell["same_findings"] = cell["now"]["leaks_sha256"] == cell["before"]["leaks_sha256"]
                cell["cpu_ratio"] = round(cell["before"]["cpu_s"] / max(cell["now"]["cpu_s"], 1e-9), 1)
            figures[f"{sections} sections x {args.cases} cases, overlap {args.overlap}, {args.plant} planted"] = cell
            print(json.dumps({f"{sections}": cell}), flush=True)
    if args.json:
        out = Path(args.json)
        old = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        where = {"command": "python bench/bench_leaks.py " + " ".join(sys.argv[1:] if argv is None else argv),
                 "cpus": os.cpu_count(), "python": platform.python_version(), "load_1min": round(os.getloadavg()[0], 2),
                 "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        old.setdefault("cells", {}).update({name: {**cell, "measured": where} for name, cell in figures.items()})
        out.write_text(json.dumps(old, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

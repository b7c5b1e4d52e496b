"""Start-up time of the `rageval` command: whole processes, medians, runs alternating.

    python bench/bench_startup.py                         # 20 runs of each command
    python bench/bench_startup.py --baseline-src DIR      # also the rageval package found in DIR
                                                          # (e.g. `git archive` of an older main)
    python bench/bench_startup.py --json bench/results-startup.json

Each figure is the wall time and the CPU time (user + system, from the child's rusage) of a fresh
interpreter running one command, with its output discarded — on a busy machine the CPU time is
the steadier of the two: `python -c "import sys; from rageval.cli import main;
sys.exit(main())" ARGS` is what pip's `rageval` script runs, `python -m rageval ARGS` the other
way in. The references are the bare interpreter (`python -c pass`) and `python -c "import
numpy"`, the floor any command that touches the pipeline pays. The package comes from the folder
given (PYTHONPATH, ahead of any installed copy; each child checks it imported that one). Runs go
round-robin over the commands and versions, so a busy machine slows them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONSOLE = "import sys; from rageval.cli import main; sys.exit(main())"
COMMANDS = {
    "rageval --help": ["-c", CONSOLE, "--help"],
    "python -m rageval --help": ["-m", "rageval", "--help"],
    "rageval gate --help": ["-c", CONSOLE, "gate", "--help"],
    "rageval --version": ["-c", CONSOLE, "--version"],
}
REFERENCES = {"python -c pass": ["-c", "pass"], "python -c 'import numpy'": ["-c", "import numpy"]}
CHECK = "import rageval, sys; print(rageval.__file__)"


def child_env(src: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(src), "PYTHONWARNINGS": "ignore"}


def which_package(src: Path) -> str:
    out = subprocess.run([sys.executable, "-c", CHECK], env=child_env(src), cwd=src, capture_output=True,
                         text=True, check=True, timeout=60)
    return out.stdout.strip()


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], src: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child."""
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=child_env(src), cwd=src, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=120, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode} with {src}")
    return elapsed, _cpu() - cpu


def measure(versions: dict[str, Path], runs: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    times: dict[str, dict[str, list[tuple[float, float]]]] = {v: {c: [] for c in COMMANDS} for v in versions}
    times["reference"] = {r: [] for r in REFERENCES}
    for _ in range(runs):
        for name, argv in REFERENCES.items():
            times["reference"][name].append(timed(argv, ROOT))
        for command, argv in COMMANDS.items():
            for version, src in versions.items():
                times[version][command].append(timed(argv, src))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--baseline-src", type=Path, default=None, help="a folder holding an older rageval/")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    versions = {"now": ROOT}
    if args.baseline_src:
        versions["before"] = args.baseline_src.resolve()
    for version, src in versions.items():
        found = which_package(src)
        if not found.startswith(str(src)):
            raise SystemExit(f"{version}: imported {found}, not the package in {src}")
    times = measure(versions, args.runs)
    medians = {v: {c: {"wall_s": round(statistics.median(w for w, _ in t), 3),
                       "cpu_s": round(statistics.median(c for _, c in t), 3)} for c, t in per.items()}
               for v, per in times.items()}
    for version, per in medians.items():
        for command, median in per.items():
            print(f"{version:>9}  {command:<28} median wall {median['wall_s']:.3f} s, CPU {median['cpu_s']:.3f} s "
                  f"({args.runs} runs)")
    if args.json:
        args.json.write_text(json.dumps({"python": platform.python_version(), "cpus": os.cpu_count(),
                                         "load_average": os.getloadavg(), "runs": args.runs, "median": medians},
                                        indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

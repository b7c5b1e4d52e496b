"""`rageval gate` and `rageval validate` against a plain parse of their inputs (issue 25 §4).

    python bench/bench_commands.py                       # 5,000 cases over 2,000 sections, 3 runs each
    python bench/bench_commands.py --runs 1 --profile DIR   # also a cProfile of each command (pstats files)
    python bench/bench_commands.py --json bench/results-commands.json
    python bench/bench_commands.py --before DIR      # also main's gate (DIR: `git archive main` unpacked)

The project is bench/synthetic.py's (golden.yaml of 5,000 cases, corpus.json of ~150-token
sections). Two RunResults of it are made first with `rageval run --reproducible`: the baseline
at chunking.size 200 and the candidate at 100 (different rankings and answers for the gate to
compare, case by case and with its bootstrap over every metric). Then, in fresh processes, alternating run by run:

- gate: ``rageval gate --config C --baseline A --candidate B --out verdict.json --report-md
  report.md`` (its code, imports and all, from ``rageval.cli.main``);
- gate's inputs, parsed plainly: both RunResults with ``json.loads``, the golden set and the
  config with PyYAML's C loader — nothing checked, nothing built;
- validate: ``rageval validate --no-git --config C``;
- validate's inputs, parsed plainly: the golden set and the config (PyYAML's C loader) and the
  corpus (``json.loads``).

Each figure is the child's CPU seconds for that work alone (the interpreter's start-up left out
on both sides); the ratio is command / plain parse, medians over the runs. Goal: ≤ 3.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOAL = 3.0


def measure(kind: str, project: Path, profile: str | None) -> dict:
    """The child: one piece of work, timed in CPU seconds (and wall)."""
    import contextlib
    import cProfile
    import io

    import yaml

    cfg, golden = project / "rageval.yml", project / "golden.yaml"
    runs = [project / "baseline.json", project / "candidate.json"]

    def plain_gate() -> None:
        for path in runs:
            json.loads(path.read_bytes())
        for path in (golden, cfg):
            yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)

    def plain_validate() -> None:
        for path in (golden, cfg):
            yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
        json.loads((project / "corpus.json").read_bytes())

    def command(argv: list[str]) -> None:
        from rageval.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(argv)

    work = {"plain-gate": plain_gate, "plain-validate": plain_validate,
            "gate": lambda: command(["gate", "--config", str(cfg), "--baseline", str(runs[0]), "--candidate",
                                     str(runs[1]), "--out", str(project / "verdict.json"),
                                     "--report-md", str(project / "report.md")]),
            "validate": lambda: command(["validate", "--no-git", "--config", str(cfg)])}[kind]
    profiler = cProfile.Profile() if profile else None
    wall, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    work()
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    return {"cpu_s": round(time.process_time() - cpu, 3), "wall_s": round(time.perf_counter() - wall, 3)}


def child(kind: str, project: Path, profile: str | None = None, code: str | None = None) -> dict:
    """One measurement in a fresh process; ``code``: a folder whose ``rageval`` the child imports
    instead (PYTHONPATH), e.g. ``git archive main`` unpacked."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", kind, str(project)]
    if profile:
        argv += ["--profile", profile]
    env = {**os.environ, "PYTHONPATH": str(Path(code).resolve())} if code else None
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def make_runs(project: Path, sections: int, cases: int) -> None:
    sys.path.insert(0, str(HERE))
    import synthetic
    cfg = synthetic.write_project(project, sections, cases, golden_format="yaml")
    variant = project / "rageval-100.yml"
    variant.write_text(cfg.read_text(encoding="utf-8").replace("size: 200", "size: 100"), encoding="utf-8")
    for config, out in ((cfg, "baseline.json"), (variant, "candidate.json")):
        subprocess.run([sys.executable, "-m", "rageval", "run", "--reproducible", "--config", str(config),
                        "--out", str(project / out)], check=True, cwd=ROOT, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measure", nargs=2, metavar=("KIND", "PROJECT"), help=argparse.SUPPRESS)
    p.add_argument("--cases", type=int, default=5000)
    p.add_argument("--sections", type=int, default=2000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--profile", default=None, help="a folder: cProfile of each command's last run (KIND.prof)")
    p.add_argument("--project", default=None, help="make the project and its two runs here, or reuse them "
                   "(default: a temporary folder)")
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--before", default=None, metavar="DIR", help="also measure the gate of the rageval in DIR "
                   "(e.g. `git archive main | tar -x -C DIR`), alternating run by run with this one")
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]), args.profile)))
        return 0
    kinds = ("plain-gate", "gate", "plain-validate", "validate") + (("gate-before",) if args.before else ())
    samples: dict[str, list[dict]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(args.project or Path(tmp) / "project")
        if not (project / "candidate.json").is_file():
            make_runs(project, args.sections, args.cases)
        sizes = {name: round((project / name).stat().st_size / 1e6, 1)
                 for name in ("baseline.json", "candidate.json", "golden.yaml", "corpus.json")}
        for _ in range(args.runs):
            for kind in kinds:
                before = kind.endswith("-before")
                samples[kind].append(child(kind.removesuffix("-before"), project, code=args.before if before else None))
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            for kind in ("gate", "validate"):
                child(kind, project, str(Path(args.profile).resolve() / f"{kind}.prof"))
    cpu = {k: statistics.median(x["cpu_s"] for x in v) for k, v in samples.items()}
    wall = {k: statistics.median(x["wall_s"] for x in v) for k, v in samples.items()}
    figures = {"cases": args.cases, "sections": args.sections, "runs": args.runs, "input_mb": sizes,
               "cpu_s": cpu, "wall_s": wall,
               "ratio": {"gate": round(cpu["gate"] / cpu["plain-gate"], 2),
                         "validate": round(cpu["validate"] / cpu["plain-validate"], 2),
                         **({"gate-before": round(cpu["gate-before"] / cpu["plain-gate"], 2)} if args.before else {})},
               "goal": GOAL}
    print(json.dumps(figures, indent=1))
    if args.json:
        figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()[0]}
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

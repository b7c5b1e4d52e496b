"""Benchmark of the offline engine (issue #14's table), whole processes, medians of paired runs.

    python bench/bench_offline.py                     # every figure, 3 runs each (~15 min on 2 cores)
    python bench/bench_offline.py --runs 1 --only e2e,run,validate
    python bench/bench_offline.py --baseline-src DIR  # also run each figure with the rageval package
                                                      # found in DIR (e.g. `git archive` of an older
                                                      # main), alternating with this one, run by run
    python bench/bench_offline.py --tests             # also time the test suite once
    python bench/bench_offline.py --json bench/results-offline.json

Every figure is one child process (this script with --measure: a pipeline stage, or the `rageval`
command's main()): wall seconds timed by the parent, CPU seconds (user + system) and peak RSS
(ru_maxrss) reported by the child itself, interpreter start-up and imports included. The projects
are synthetic (bench/synthetic.py, made in child processes too): a policy-like corpus of ~150-token
sections, cases asking for one sentence of one section.

- e2e: 1,000 cases over 10,000 chunks, in one process: load, chunk, index, answer, score, the
  golden set's own checks (leaks of 1,000 questions into 10,000 sections, coverage, snapshots)
  and the RunResult (built, not written); also with retrieval.mode bm25 and hybrid, once;
- build: the builtin app's index at 100,000 chunks for each retrieval.mode (dense, bm25, hybrid);
- run / validate / size: `rageval run --out` and `rageval validate --no-git` on a 5,000-case
  golden.yaml over 2,000 sections, and the size of the RunResult written;
- modes: hit@1 and mrr@5 of each retrieval.mode on the 10,000-chunk set and on the demo.
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
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

GOALS = {"e2e": "< 5 s wall, < 300 MB", "build": "< 20 s CPU, < 1 GB", "run": "< 15 s CPU",
         "validate": "< 3 s wall", "size": "< 12 MB", "tests": "< 150 s wall"}
ISSUE = {"e2e": "17–20 s wall, 22.3 s CPU, 335 MB", "build:dense": "83.5 s CPU, 2.5 GB",
         "run": "51 s CPU, 413 MB", "validate": "29.4 s", "size": "44.6 MB (8.9 KB/case)", "tests": "250 s"}
MODES = ("dense", "bm25", "hybrid")


# --- children ----------------------------------------------------------------------------------

def child(kind: str, args: list[str]) -> dict:
    """One measurement inside the child process: its figures, and its own CPU time and peak RSS."""
    if kind == "cli":                      # the `rageval` command itself, its output discarded
        import contextlib
        import io

        from rageval.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(args)
        figures = {"exit": code}
    else:
        figures = _pipeline(kind, Path(args[0]), args[1] if len(args) > 1 else "dense")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {**figures, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def _pipeline(kind: str, project: Path, mode: str) -> dict:
    from dataclasses import replace

    from rageval.config import load_config
    cfg = load_config(project / "rageval.yml")
    if mode != "dense":
        cfg = replace(cfg, retrieval=replace(cfg.retrieval, mode=mode))
    if kind == "build":
        from rageval.golden.corpus import load_corpus
        from rageval.pipeline.apps.builtin import BuiltinApp
        app = BuiltinApp(cfg, load_corpus(cfg.corpus, cfg.root))
        return {"chunks": len(app.chunks)}
    from rageval.pipeline.runner import prepare
    result = prepare(cfg, env={}).run()
    metrics = result.summary.metrics
    return {"cases": result.summary.n_cases, "hit@1": metrics["hit@1"], "mrr@5": metrics["mrr@5"]}


# --- the parent --------------------------------------------------------------------------------

def timed(argv: list[str], env: dict[str, str]) -> dict:
    """Run a child; its wall seconds (timed here) and what it reports on its last stdout line."""
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    lines = proc.stdout.decode().strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return {"wall_s": wall, **json.loads(lines[-1])}


def medians(samples: list[dict]) -> dict:
    keys = samples[0].keys()
    return {k: round(statistics.median(s[k] for s in samples), 3) if isinstance(samples[0][k], float)
            else samples[0][k] for k in keys}


def paired(argv: list[str], envs: dict[str, dict[str, str]], runs: int) -> dict[str, dict]:
    """Each side ``runs`` times, alternating sides run by run; medians per side. ``{side}`` in
    argv is replaced by the side's name (so each side writes its own output file)."""
    samples: dict[str, list[dict]] = {side: [] for side in envs}
    for _ in range(runs):
        for side, env in envs.items():
            try:
                samples[side].append(timed([a.replace("{side}", side) for a in argv], env))
            except RuntimeError as exc:          # e.g. the baseline has no retrieval.mode
                print(f"  ({side}: {str(exc).splitlines()[0][:160]})", file=sys.stderr)
    return {side: medians(s) for side, s in samples.items() if s}


def environments(baseline_src: str | None) -> dict[str, dict[str, str]]:
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
    envs = {"now": env}
    if baseline_src:
        envs["baseline"] = {**env, "PYTHONPATH": str(Path(baseline_src).resolve())}
    return envs


def result_size(path: Path) -> dict:
    """A RunResult's size on disk, and what its top-level keys weigh (as compact JSON, in MB)."""
    size = path.stat().st_size
    data = json.loads(path.read_text(encoding="utf-8"))
    parts = {key: round(len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) / 1e6, 2)
             for key, value in data.items()}
    return {"mb": round(size / 1e6, 2), "kb_per_case": round(size / 5_000 / 1e3, 2),
            "parts_mb": {k: v for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v >= 0.01}}


def project(folder: Path, sections: int, cases: int, golden_format: str = "json") -> Path:
    """A synthetic project, made in a child process: a child's peak RSS starts from its parent's
    at fork (Linux keeps the high-water mark across exec), so the parent must stay small."""
    subprocess.run([sys.executable, str(HERE / "synthetic.py"), str(folder), str(sections), str(cases), golden_format],
                   check=True, capture_output=True)
    return folder / "rageval.yml"


def run_all(args: argparse.Namespace, tmp: Path) -> dict:
    envs = environments(args.baseline_src)
    only = set(args.only.split(",")) if args.only else {"e2e", "build", "run", "validate", "demo"}
    me = [sys.executable, str(Path(__file__).resolve()), "--measure"]
    rageval = [*me, "cli"]
    figures: dict = {}
    print("generating projects …", file=sys.stderr)
    if "e2e" in only:
        e2e = project(tmp / "e2e", 10_000, 1_000)
        print("e2e …", file=sys.stderr)
        figures["e2e"] = paired([*me, "e2e", str(e2e.parent)], envs, args.runs)
        for mode in MODES[1:]:
            figures[f"e2e:{mode}"] = paired([*me, "e2e", str(e2e.parent), mode], {"now": envs["now"]}, 1)
    if "build" in only:
        scale = project(tmp / "build100k", 100_000, 10)
        for mode in MODES:
            print(f"build 100k {mode} …", file=sys.stderr)
            figures[f"build:{mode}"] = paired([*me, "build", str(scale.parent), mode], envs, args.runs)
    if only & {"run", "validate"}:
        big = project(tmp / "run5k", 2_000, 5_000, "yaml")
    if "run" in only:
        print("run 5k …", file=sys.stderr)
        out = tmp / "run5k" / "out-{side}.json"
        figures["run"] = paired([*rageval, "run", "--config", str(big), "--out", str(out)], envs, args.runs)
        figures["size"] = {side: result_size(Path(str(out).replace("{side}", side))) for side in envs}
    if "validate" in only:
        print("validate 5k …", file=sys.stderr)
        figures["validate"] = paired([*rageval, "validate", "--config", str(big), "--no-git"], envs, args.runs)
    if "demo" in only:
        figures["demo"] = demo_modes()
    if args.tests:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT, check=False,
                       capture_output=True)
        figures["tests"] = {"now": {"wall_s": round(time.perf_counter() - started, 1)}}
    return figures


def demo_modes() -> dict:
    """hit@1 and mrr@5 of each retrieval.mode on the demo (in this process: quality, not time)."""
    from dataclasses import replace

    from rageval.config import load_config
    from rageval.pipeline.runner import prepare
    out = {}
    for mode in MODES:
        cfg = load_config(ROOT / "examples" / "banhang" / "rageval.yml")
        cfg = replace(cfg, retrieval=replace(cfg.retrieval, mode=mode))
        metrics = prepare(cfg, env={}).run().summary.metrics
        out[mode] = {"hit@1": metrics["hit@1"], "mrr@5": metrics["mrr@5"]}
    return out


def show(figures: dict) -> None:
    def cell(side: dict | None, *keys: str) -> str:
        if not side:
            return "–"
        units = {"wall_s": "s wall", "cpu_s": "s CPU", "peak_rss_mb": "MB", "mb": "MB", "kb_per_case": "KB/case"}
        return ", ".join(f"{side[k]:.1f} {units[k]}" if isinstance(side[k], float) else f"{side[k]} {units[k]}"
                         for k in keys if k in side)

    rows = [("1,000 cases over 10,000 chunks, end to end", "e2e", "e2e", ("wall_s", "cpu_s", "peak_rss_mb"))]
    rows += [(f"index build at 100,000 chunks, {m}", f"build:{m}", "build", ("cpu_s", "wall_s", "peak_rss_mb"))
             for m in MODES if f"build:{m}" in figures]
    rows += [("`rageval run`, 5,000-case golden.yaml", "run", "run", ("cpu_s", "wall_s", "peak_rss_mb")),
             ("`rageval validate`, same set", "validate", "validate", ("wall_s", "cpu_s")),
             ("RunResult size, 5,000 cases", "size", "size", ("mb", "kb_per_case")),
             ("test suite", "tests", "tests", ("wall_s",))]
    print("| work | issue #14 (old code) | baseline (measured) | now | goal |")
    print("|---|---|---|---|---|")
    for label, key, goal, keys in rows:
        if key not in figures:
            continue
        f = figures[key]
        print(f"| {label} | {ISSUE.get(key, '–')} | {cell(f.get('baseline'), *keys)} | {cell(f.get('now'), *keys)} "
              f"| {GOALS[goal]} |")
    if parts := figures.get("size", {}).get("now", {}).get("parts_mb"):
        print("\nRunResult, MB by top-level key: " + ", ".join(f"{k} {v}" for k, v in parts.items()))
    print("\n| retrieval.mode | synthetic 10k: hit@1 | mrr@5 | e2e wall s | demo: hit@1 | mrr@5 |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode in MODES:
        e = figures.get("e2e" if mode == "dense" else f"e2e:{mode}", {}).get("now", {})
        d = figures.get("demo", {}).get(mode, {})
        print(f"| {mode} | {e.get('hit@1', '–')} | {e.get('mrr@5', '–')} | {e.get('wall_s', '–')} "
              f"| {d.get('hit@1', '–')} | {d.get('mrr@5', '–')} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline-src", default=None, help="a folder holding another rageval package")
    parser.add_argument("--only", default=None, help="comma-separated: e2e,build,run,validate,demo (default: all)")
    parser.add_argument("--tests", action="store_true", help="also time the test suite once")
    parser.add_argument("--json", default=None, help="also write the figures here")
    parser.add_argument("--measure", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(child(args.measure[0], args.measure[1:])))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        figures = run_all(args, Path(tmp))
    figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "runs": args.runs}
    if args.only and args.json and Path(args.json).exists():     # a partial run updates the figures it measured
        figures = {**json.loads(Path(args.json).read_text(encoding="utf-8")), **figures}
    show(figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

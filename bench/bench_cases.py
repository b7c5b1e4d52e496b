"""What a case costs in the offline pipeline (issue 25 §1), stage by stage, in fresh processes.

    python bench/bench_cases.py                                  # 1,000 and 5,000 cases over 10,000 chunks, 3 runs
    python bench/bench_cases.py --cases 5000 --runs 1 --profile prof.out   # cProfile of one run (pstats file)
    python bench/bench_cases.py --json bench/results-cases.json
    python bench/bench_cases.py --cases 5000 --runs 3 --processes 1 2   # one process vs two, run by run

The project is bench/synthetic.py's (a golden.yaml, ~150-token sections, one chunk per section at
chunking.size 200, dense retrieval with the local embedder, the extractive generator, every offline
check). Each figure is one child process running the stages of `rageval run --out` in order and
timing each (wall seconds, and CPU seconds of the process and its threads):

- golden: the golden.yaml read and checked; corpus: the corpus file read;
- index: the builtin app built (chunks, embedder fit, vector index);
- answer: every case retrieved, answered and scored (``Evaluation.answer_all``); of it, search: the
  retriever's batch searches (issue 25 §2's cost, per chunk; shown apart; null when the cases are
  answered in worker processes, where the searches run out of the parent's sight);
- result: the RunResult built (summary, the golden set's leaks and coverage, the snapshots);
- write: the RunResult written as JSON.

"per case" is what grows with the cases — golden + answer + result + write — divided by the cases,
in CPU seconds (every process's) and wall seconds, medians over the runs; "per case without search"
leaves the retriever's searches out (§1's goal: ≤ 0.5 ms).

``--processes``: the answer stage's worker processes (RAGEVAL_PROCESSES; 0: unset, every core the
child may use; 1: none). Several values are measured in alternation, run by run, so a change in the
machine's load falls on each alike. CPU seconds count the workers' (they are reaped when the stage
ends, so RUSAGE_CHILDREN holds them); ``peak_rss_workers_mb`` is the largest worker's peak RSS.
The machine's 1-minute load average is recorded before and after each run: on a shared machine,
wall seconds mean little without it.
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
STAGES = ("golden", "corpus", "index", "answer", "search", "result", "write")
PER_CASE = ("golden", "answer", "result", "write")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(project: Path, out: Path, profile: str | None, processes: int = 0) -> dict:
    """The child: every stage of a run, timed; with ``profile``, under cProfile (written there)."""
    import cProfile

    from rageval.config import load_config
    from rageval.files import write_json
    from rageval.golden.corpus import load_corpus
    from rageval.golden.set import load_golden
    from rageval.pipeline.runner import build_result, prepare

    profiler = cProfile.Profile() if profile else None
    figures: dict[str, dict[str, float]] = {}
    cfg = load_config(project / "rageval.yml")
    state: dict = {}

    def stage(name, fn):
        wall, cpu = time.perf_counter(), _cpu()
        if profiler:
            profiler.enable()
        state[name] = fn()
        if profiler:
            profiler.disable()
        figures[name] = {"wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(_cpu() - cpu, 3)}

    stage("golden", lambda: load_golden(cfg.golden))
    stage("corpus", lambda: load_corpus(cfg.corpus, cfg.root))
    env = {"RAGEVAL_PROCESSES": str(processes)} if processes else {}
    stage("index", lambda: prepare(cfg, env=env, golden=state["golden"], corpus=state["corpus"]))
    ev = state["index"]
    search = _timed_search(ev.app.retriever)
    used = ev.processes_for(len(ev.searches(ev.golden.cases)))
    stage("answer", lambda: ev.answer_all(ev.golden.cases))
    workers_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss     # before `git rev-parse` is one
    figures["search"] = {k: None if used > 1 else round(v, 3) for k, v in search.items()}
    stage("result", lambda: build_result(ev, state["answer"], {}, _no_cost()))
    stage("write", lambda: write_json(out, state["result"]))
    if profiler:
        profiler.dump_stats(profile)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"stages": figures, "cases": len(ev.golden.cases), "chunks": len(ev.app.chunks), "processes": used,
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "peak_rss_workers_mb": round(workers_rss / 1024, 1) if used > 1 else None,
            "bytes": out.stat().st_size}


def _timed_search(retriever) -> dict[str, float]:
    """Time the retriever's batch searches (part of the answer stage; issue 25 §2's, not §1's)."""
    spent = {"wall_s": 0.0, "cpu_s": 0.0}
    search = retriever.search

    def timed(*args, **kwargs):
        wall, cpu = time.perf_counter(), _cpu()
        try:
            return search(*args, **kwargs)
        finally:
            spent["wall_s"] += time.perf_counter() - wall
            spent["cpu_s"] += _cpu() - cpu
    retriever.search = timed
    return spent


def _no_cost():
    from rageval.cost import Cost, Usage
    return Cost.of(Usage(), 0)


def run_child(project: Path, out: Path, profile: str | None = None, processes: int = 0) -> dict:
    argv = [sys.executable, str(Path(__file__).resolve()), "--measure", str(project), str(out),
            "--processes", str(processes)]
    if profile:
        argv += ["--profile", profile]
    load = os.getloadavg()[0]
    # the rageval package beside this bench (a `git archive` of another commit), not the one installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed: {done.stderr[-2000:]}")
    return {**json.loads(done.stdout.splitlines()[-1]), "load": [round(load, 2), round(os.getloadavg()[0], 2)]}


def _median(values) -> float | None:
    values = list(values)
    return None if None in values else statistics.median(values)


def summarise(samples: list[dict]) -> dict:
    stages = {s: {k: _median(x["stages"][s][k] for x in samples) for k in ("wall_s", "cpu_s")} for s in STAGES}
    cases = samples[0]["cases"]
    grows = {k: sum(stages[s][k] for s in PER_CASE) for k in ("wall_s", "cpu_s")}
    besides = {k: None if stages["search"][k] is None else v - stages["search"][k] for k, v in grows.items()}
    return {"cases": cases, "chunks": samples[0]["chunks"], "processes": samples[0]["processes"],
            "runs": len(samples), "stages": stages,
            "per_case_ms": {k.replace("_s", ""): round(1000 * v / cases, 3) for k, v in grows.items()},
            "answer_per_case_ms": {k.replace("_s", ""): round(1000 * stages["answer"][k] / cases, 3)
                                   for k in ("wall_s", "cpu_s")},
            "per_case_without_search_ms": {k.replace("_s", ""): None if v is None else round(1000 * v / cases, 3)
                                           for k, v in besides.items()},
            "peak_rss_mb": statistics.median(x["peak_rss_mb"] for x in samples),
            "peak_rss_workers_mb": _median(x["peak_rss_workers_mb"] for x in samples),
            "result_mb": round(samples[0]["bytes"] / 1e6, 1),
            "load": [x["load"] for x in samples]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--measure", nargs=2, metavar=("PROJECT", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--cases", type=int, nargs="+", default=[1000, 5000])
    p.add_argument("--chunks", type=int, default=10000, help="sections of the corpus, one chunk each (default 10000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--mode", default="dense", choices=("dense", "bm25", "hybrid"), help="retrieval.mode")
    p.add_argument("--processes", type=int, nargs="+", default=[0],
                   help="worker processes of the answer stage (RAGEVAL_PROCESSES; 0: unset, every core; 1: none); "
                   "several values are measured in alternation, run by run")
    p.add_argument("--profile", default=None, help="cProfile the stages of one run (the largest) into this file")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(Path(args.measure[0]), Path(args.measure[1]), args.profile, args.processes[0])))
        return 0
    sys.path.insert(0, str(HERE))
    import synthetic
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.cases:
            project = Path(tmp) / f"p{n}"
            cfg = synthetic.write_project(project, args.chunks, n, golden_format="yaml")
            if args.mode != "dense":
                text = cfg.read_text(encoding="utf-8").replace("retrieval: {", f"retrieval: {{mode: {args.mode}, ")
                cfg.write_text(text, encoding="utf-8")
            if args.profile:
                if n == max(args.cases):
                    run_child(project, Path(tmp) / "out.json", args.profile, args.processes[0])
                continue
            samples: dict[int, list[dict]] = {k: [] for k in args.processes}
            for _ in range(args.runs):
                for k in args.processes:
                    samples[k].append(run_child(project, Path(tmp) / "out.json", processes=k))
            for k in args.processes:
                figures.append(summarise(samples[k]))
                print(json.dumps(figures[-1]), flush=True)
    if len(args.cases) >= 2 and len(args.processes) == 1:
        small, big = figures[0], figures[-1]
        for k in ("wall", "cpu"):
            grown = sum(big["stages"][s][f"{k}_s"] - small["stages"][s][f"{k}_s"] for s in PER_CASE)
            n = big["cases"] - small["cases"]
            print(f"marginal per case ({k}): {1000 * grown / n:.3f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                           "load": os.getloadavg()[0]}, "figures": figures},
                                              indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

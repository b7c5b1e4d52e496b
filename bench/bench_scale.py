"""Benchmark of issue 22's input-model and scale figures, whole `rageval` processes.

    python bench/bench_scale.py                          # both parts (~10 min on 2 cores)
    python bench/bench_scale.py --only store_k --json bench/results-scale.json
    python bench/bench_scale.py --only sections --beir DIR   # also a real BEIR folder, e.g. SciFact

- store_k: `rageval run --out` of 5,545 cases at retrieval.top_k 1000 (BM25, no generation: a
  retrieval-only release run) over 10,000 synthetic sections (bench/synthetic.py), with
  retrieval.store_k 20 (the default) and 1000 (every item kept, as before store_k): peak RSS
  (ru_maxrss of the child), CPU and wall seconds, RunResult size. Goal (issue 22 §5): < 1 GB.
- sections: nDCG@10 and recall@100 of the same corpus chunked at 800 tokens one section per
  chunk (the default) and with chunking.merge_sections (sections of one file packed together):
  5,183 synthetic sections in one corpus file, 1,000 cases; with --beir, the same two runs on a
  BEIR folder's test split imported with `rageval golden import`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import synthetic  # noqa: E402  (bench/synthetic.py, beside this file)


def measure(argv: list[str]) -> dict:
    """`rageval ARGV` in a child process: exit code, wall and CPU seconds, peak RSS (MB)."""
    script = ("import resource, sys, contextlib, io\nfrom rageval.cli import main\n"
              "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
              f"    code = main({argv!r})\n"
              "r = resource.getrusage(resource.RUSAGE_SELF)\n"
              "print(code, r.ru_utime + r.ru_stime, r.ru_maxrss)\n")
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False,
                         env={**os.environ, "PYTHONHASHSEED": "0"})
    wall = time.monotonic() - started
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit(f"rageval {' '.join(argv)} failed:\n{out.stderr[-3000:]}")
    code, cpu, rss_kb = out.stdout.split()[-3:]
    return {"exit": int(code), "wall_s": round(wall, 1), "cpu_s": round(float(cpu), 1),
            "peak_rss_mb": round(int(rss_kb) / 1024)}


def summary_of(result: Path) -> dict:
    """The summary metrics and the chunk count of a RunResult, read in another child: loading a
    252 MB file here would raise this process's RSS, which the next child's ru_maxrss starts from
    (Linux keeps the high-water mark across fork and exec)."""
    script = ("import json, sys\nd = json.load(open(sys.argv[1], encoding='utf-8'))\n"
              "print(json.dumps({'metrics': d['summary']['metrics'], 'chunks': len(d['chunks'])}))\n")
    out = subprocess.run([sys.executable, "-c", script, str(result)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def store_k(folder: Path, cases: int, sections: int) -> dict:
    config = synthetic.write_project(folder, sections, cases)
    out: dict = {"cases": cases, "sections": sections, "top_k": 1000}
    for keep in (20, 1000):
        config.write_text(f"golden: golden.json\ncorpus: corpus.json\ngeneration: {{provider: none}}\n"
                          f"retrieval: {{mode: bm25, top_k: 1000, k: [1, 10, 100, 1000], store_k: {keep}}}\n",
                          encoding="utf-8")
        result = folder / f"run-{keep}.json"
        figures = measure(["run", "--config", str(config), "--out", str(result)])
        figures["runresult_mb"] = round(result.stat().st_size / 2**20, 1)
        summary = summary_of(result)["metrics"]
        figures["metrics"] = {m: summary[m] for m in ("hit@10", "recall@100", "ndcg@10", "mrr@1000")}
        out[f"store_k={keep}"] = figures
        print(f"store_k {keep}: {figures}", flush=True)
    return out


def _two_ways(config: Path, golden: str, corpus: str) -> dict:
    out = {}
    for merge in (False, True):
        config.write_text(f"golden: {golden}\ncorpus: {corpus}\ngeneration: {{provider: none}}\n"
                          f"chunking: {{size: 800, merge_sections: {'true' if merge else 'false'}}}\n"
                          "retrieval: {mode: bm25, top_k: 100, k: [10, 100]}\n", encoding="utf-8")
        result = config.parent / f"run-merge-{merge}.json"
        figures = measure(["run", "--config", str(config), "--out", str(result)])
        data = summary_of(result)
        figures.update({m: data["metrics"][m] for m in ("ndcg@10", "recall@100")})
        figures["chunks_retrieved"] = data["chunks"]          # distinct chunks some case retrieved
        out["merge_sections" if merge else "one_section_per_chunk"] = figures
    return out


def sections(folder: Path, beir: Path | None) -> dict:
    config = synthetic.write_project(folder, 5183, 1000)
    out = {"synthetic (5,183 sections in one file, 1,000 cases)": _two_ways(config, "golden.json", "corpus.json")}
    print(out, flush=True)
    if beir is not None:
        golden = folder / "beir-golden.yaml"
        measure(["golden", "import", "--beir", str(beir), "--split", "test", "--out", str(golden)])
        out[f"BEIR {beir.name} test"] = _two_ways(folder / "rageval.yml", golden.name, str(beir.resolve()))
        print(out, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="store_k,sections")
    parser.add_argument("--cases", type=int, default=5545)
    parser.add_argument("--sections", type=int, default=10000)
    parser.add_argument("--beir", type=Path, default=None, help="a BEIR folder to measure the chunking on too")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    figures: dict = {"python": sys.version.split()[0], "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        if "store_k" in args.only:
            figures["store_k"] = store_k(Path(tmp) / "store_k", args.cases, args.sections)
        if "sections" in args.only:
            figures["sections"] = sections(Path(tmp) / "sections", args.beir)
    if args.json:                  # a part measured alone (--only) replaces its figures, keeps the others
        old = json.loads(args.json.read_text(encoding="utf-8")) if args.json.is_file() else {}
        args.json.write_text(json.dumps({**old, **figures}, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()

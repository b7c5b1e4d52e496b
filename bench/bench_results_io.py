"""Reading a results file: wall time and peak memory of ``load_result`` on a 5,000-case RunResult
(the figures behind ``MAX_RESULT_BYTES`` in rageval/files.py and docs/runresult.md).

    python bench/bench_results_io.py                 # ~30 s on 2 cores
    python bench/bench_results_io.py --cases 20000   # another size

The project is synthetic (bench/synthetic.py: 2,000 sections, the cases asked), run once with
`rageval run --out`; the file is then loaded in a fresh process that reports its own peak RSS
(ru_maxrss) before and after ``load_result`` — imports excluded — and the seconds it took.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

LOAD = """
import json, resource, sys, time
from rageval.results import load_result
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
result = load_result(sys.argv[1])
seconds = time.perf_counter() - started
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"cases": len(result.cases), "seconds": round(seconds, 2), "peak_mb": round((after - before) / 1024)}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=3, help="loads measured (the median is shown)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rageval-bench-io-") as tmp:
        folder = Path(tmp) / "project"
        subprocess.run([sys.executable, str(HERE / "synthetic.py"), str(folder), "2000", str(args.cases)],
                       check=True, capture_output=True)
        out = folder / "run.json"
        subprocess.run([sys.executable, "-m", "rageval", "run", "--config", str(folder / "rageval.yml"),
                        "--out", str(out)], check=True, capture_output=True)
        size_mb = out.stat().st_size / 1e6
        loads = [json.loads(subprocess.run([sys.executable, "-c", LOAD, str(out)], check=True, capture_output=True,
                                           text=True).stdout) for _ in range(args.runs)]
    median = sorted(loads, key=lambda x: x["seconds"])[len(loads) // 2]
    peak = sorted(x["peak_mb"] for x in loads)[len(loads) // 2]
    print(f"{median['cases']:,} cases, {size_mb:.1f} MB: load_result {median['seconds']:.2f} s, "
          f"peak +{peak} MB ({peak / size_mb:.1f}× the file)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

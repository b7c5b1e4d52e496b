"""Benchmark of the offline pipeline: a generated corpus of N sections (one ~150-token chunk each)
and M golden cases, through the real config → golden → corpus → chunk → embed → index → retrieve →
extractive generate → score → aggregate path.

    python bench/bench_offline.py                 # 10,000 chunks, 1,000 cases
    python bench/bench_offline.py --chunks 2000 --cases 200 --json out.json

Reports index build time (chunk + fit + embed + index), eval throughput (cases/s), retrieval
quality on the synthetic set (a sanity check that the numbers mean something), and peak memory
(ru_maxrss of this process). Not a timed test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

# Syllables that make plausible Vietnamese-looking words; each section draws a topic vocabulary.
SYLLABLES = ("doi tra hang hoan tien giao van chuyen bao hanh thanh vien phi don kho ngay thang "
             "dien thoai laptop may tinh bang ao quan giay the qua tang thuc pham do lot ma giam "
             "gia tri noi thanh lien tinh hoa toc dia chi kiem tra phu kien sua chua linh kien "
             "hoa don tem nhan loi nha san xuat khach hang cua hang tai khoan thanh toan").split()


def make_project(folder: Path, n_chunks: int, n_cases: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    words = sorted({a + b for a in SYLLABLES for b in SYLLABLES if a != b})
    rng.shuffle(words)
    sections = {}
    for i in range(n_chunks):
        topic = rng.sample(words, 12)
        body = " ".join(rng.choice(topic if rng.random() < 0.6 else words) for _ in range(130))
        sections[f"S-{i}"] = f"{body} trong {rng.randint(1, 30)} ngày."
    (folder / "corpus.json").write_text(json.dumps(sections, ensure_ascii=False), encoding="utf-8")
    cases = []
    ids = list(sections)
    for j in range(n_cases):
        target = rng.choice(ids)
        tokens = sections[target].split()
        # 4 words of the target section among 4 unrelated ones: retrieval has work to do.
        question = " ".join(rng.sample(tokens[:-3], 4) + rng.sample(words, 4))
        cases.append({"id": f"b{j}", "question": question, "expected_sections": [target],
                      "slice": {"type": "lookup"}})
    (folder / "golden.json").write_text(json.dumps({"dataset": "bench", "version": 1, "cases": cases},
                                                   ensure_ascii=False), encoding="utf-8")
    cfg = folder / "rageval.yml"
    cfg.write_text("golden: golden.json\ncorpus: corpus.json\nchunking: {size: 200}\n"
                   "retrieval: {top_k: 5, k: [1, 3, 5]}\napp: {concurrency: 2}\n", encoding="utf-8")
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=1_000)
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)

    from rageval.config import load_config
    from rageval.pipeline.runner import prepare

    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = make_project(Path(tmp), args.chunks, args.cases)
        cfg = load_config(cfg_path)
        started = time.perf_counter()
        ev = prepare(cfg, env={})
        build_s = time.perf_counter() - started
        started = time.perf_counter()
        result = ev.run().to_dict()
        eval_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    m = result["summary"]["metrics"]
    numbers = {
        "chunks": len(ev.app.chunks), "cases": result["summary"]["n_cases"],
        "index_build_s": round(build_s, 2), "eval_s": round(eval_s, 2),
        "cases_per_s": round(result["summary"]["n_cases"] / eval_s, 1),
        "hit@1": m["hit@1"], "mrr@5": m["mrr@5"], "peak_rss_mb": round(peak_mb, 1),
        "python": sys.version.split()[0],
    }
    width = max(len(k) for k in numbers)
    for key, value in numbers.items():
        print(f"{key:<{width}}  {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

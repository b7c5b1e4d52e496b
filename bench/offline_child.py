"""One measurement of bench/bench_offline.py, in its own process; prints its figures as one JSON line.

    python bench/offline_child.py e2e PROJECT_DIR [MODE]           # a whole `rageval run`, in process
    python bench/offline_child.py build PROJECT_DIR [MODE]         # the builtin app's index only
    python bench/offline_child.py scale PROJECT_DIR CASES MODE     # rageval-CASES.yml, stage by stage
    python bench/offline_child.py bm25s PROJECT_DIR CASES          # the same chunks and questions, bm25s
    python bench/offline_child.py cli ARGS...                      # the `rageval` command's main()

Every child reports its own CPU seconds (user + system, every thread: BLAS's too, and its worker
processes': rageval.pipeline.workers reaps them before a run returns, so RUSAGE_CHILDREN holds them)
and peak RSS (``ru_maxrss``, its own), interpreter start-up and imports included; the pipeline sees
RAGEVAL_PROCESSES of its environment. ``scale`` and ``bm25s`` also report the CPU seconds of each
stage (the same count) and the peak RSS once the index is built and searched
(``engine_peak_rss_mb``), so the engine can be compared apart from the per-case pipeline:

- load: the config, the golden set and the corpus (the same readers on both sides);
- index: rageval's builtin app (chunking, the embedder and/or BM25 index) | the same chunker, the
  chunks' words folded by ``rageval.text.folded_words``, ``bm25s.BM25(method="lucene").index``;
- search: retrieval for every question (``BuiltinApp.prepare``: one batch) | the questions folded
  the same way, ``bm25s.BM25.retrieve`` at the same depth;
- cases (rageval only): answering, scoring and the RunResult (the per-case pipeline).

bm25s and the ``rageval`` command are imported only by their own measurements (``importlib``: the
point is that the other children do not pay for them).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import resource
import sys
from dataclasses import replace
from pathlib import Path

from rageval.config import load_config
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.pipeline.apps.builtin import BuiltinApp
from rageval.pipeline.chunking import chunk_corpus
from rageval.pipeline.runner import prepare
from rageval.settings import Config
from rageval.text import folded_words


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_s() -> float:
    """CPU seconds of this process (every thread) and of its reaped children (the worker processes)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pipeline_env() -> dict[str, str]:
    """What the evaluated pipeline sees of this process's environment: RAGEVAL_PROCESSES only (so a
    bench run can be measured with the workers and without them)."""
    return {k: v for k, v in os.environ.items() if k == "RAGEVAL_PROCESSES"}


class Stages:
    """CPU seconds of consecutive stages."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self._last = cpu_s()

    def done(self, stage: str) -> None:
        now = cpu_s()
        self.cpu[stage] = round(now - self._last, 3)
        self._last = now


def config(path: Path, mode: str) -> Config:
    cfg = load_config(path)
    return cfg if mode == cfg.retrieval.mode else replace(cfg, retrieval=replace(cfg.retrieval, mode=mode))


def e2e(project: Path, mode: str = "dense") -> dict:
    result = prepare(config(project / "rageval.yml", mode), env=pipeline_env()).run()
    metrics = result.summary.metrics
    return {"cases": result.summary.n_cases, "hit@1": metrics["hit@1"], "mrr@5": metrics["mrr@5"]}


def build(project: Path, mode: str = "dense") -> dict:
    cfg = config(project / "rageval.yml", mode)
    return {"chunks": len(BuiltinApp(cfg, load_corpus(cfg.corpus, cfg.root)).chunks)}


def scale(project: Path, cases: str, mode: str) -> dict:
    stages = Stages()
    cfg = config(project / f"rageval-{cases}.yml", mode)
    golden, corpus = load_golden(cfg.golden), load_corpus(cfg.corpus, cfg.root)
    stages.done("load")
    evaluation = prepare(cfg, env=pipeline_env(), golden=golden, corpus=corpus)
    stages.done("index")
    evaluation.app.prepare(list(evaluation.golden.cases))
    stages.done("search")
    engine_rss = peak_rss_mb()
    result = evaluation.run()
    stages.done("cases")
    metrics = result.summary.metrics
    return {"chunks": len(evaluation.app.chunks), "cases": result.summary.n_cases, "hit@1": metrics["hit@1"],
            "mrr@5": metrics["mrr@5"], "stages_cpu_s": stages.cpu, "engine_peak_rss_mb": engine_rss}


def bm25s_side(project: Path, cases: str) -> dict:
    """bm25s over the chunks rageval makes, on the same folded words, at the same depth."""
    bm25s = importlib.import_module("bm25s")
    stages = Stages()
    cfg = load_config(project / f"rageval-{cases}.yml")
    golden, corpus = load_golden(cfg.golden), load_corpus(cfg.corpus, cfg.root)
    stages.done("load")
    chunks = chunk_corpus(corpus, cfg.chunking.size, cfg.chunking.overlap, merge_sections=cfg.chunking.merge_sections)
    model = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    model.index([folded_words(c.indexed) for c in chunks], show_progress=False)   # title and body, as rageval
    stages.done("index")
    depth = min(len(chunks), cfg.retrieval.top_k)
    rows, _ = model.retrieve([folded_words(c.question) for c in golden.cases], k=depth, show_progress=False)
    stages.done("search")
    engine_rss = peak_rss_mb()
    hits = sum(bool(set(case.expected_sections) & set(chunks[int(top[0])].sections))
               for case, top in zip(golden.cases, rows, strict=True))
    return {"chunks": len(chunks), "cases": len(golden.cases), "hit@1": round(hits / len(golden.cases), 4),
            "stages_cpu_s": stages.cpu, "engine_peak_rss_mb": engine_rss}


def cli(args: list[str]) -> dict:
    """The `rageval` command itself, its output discarded (imported here only: the other
    measurements do not load the commands)."""
    main = importlib.import_module("rageval.cli").main
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(args)
    return {"exit": code}


def measure(kind: str, args: list[str]) -> dict:
    if kind == "cli":
        figures = cli(args)
    elif kind == "bm25s":
        figures = bm25s_side(Path(args[0]), args[1])
    elif kind == "scale":
        figures = scale(Path(args[0]), args[1], args[2])
    else:
        figures = {"e2e": e2e, "build": build}[kind](Path(args[0]), *args[1:])
    return {**figures, "cpu_s": round(cpu_s(), 3), "peak_rss_mb": peak_rss_mb()}


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1], sys.argv[2:])))

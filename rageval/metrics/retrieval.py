"""Retrieval metrics on section labels. Pure functions; nothing here does I/O. They are declared
(one family each) in ``rageval.metrics.registry``.

E is the set of expected sections of a case; a retrieved chunk is *relevant* if it contains at
least one section of E. ``ranking`` is the retrieved list, best first, each item the set of
sections that chunk contains.

- hit@k    = 1 if a relevant chunk is in the top k, else 0
- recall@k = |E ∩ sections(top k)| / |E|
- RR@k     = 1 / rank of the first relevant chunk in the top k (0 if none); MRR@k is its mean
- nDCG@k   = DCG@k / IDCG@k with binary gain, DCG = Σ_i (2^rel_i − 1) / log2(i + 1), where chunk i
             has rel_i = 1 when it holds an expected section not already credited to a chunk
             ranked higher; the ideal ranking holds every expected section once, IDCG@k =
             Σ_{i ≤ min(k, |E|)} 1 / log2(i + 1) — trec_eval with qrels = the expected sections
             (Manning et al., IIR 8.4), so an expected section never retrieved lowers nDCG.
- @Ntok    = the same metrics over the longest prefix of the ranking whose chunks add up to at
             most N tokens, so configurations with different chunk sizes compare at an equal
             context budget (top-12 of 200-token chunks vs top-3 of 800-token chunks).

A case with no expected sections has no retrieval metrics (out-of-scope); a case with an empty
ranking scores 0 on every metric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Ranking = Sequence[frozenset[str] | set[str] | Sequence[str]]


def first_relevant_rank(ranking: Ranking, expected: set[str] | frozenset[str]) -> int | None:
    """1-based rank of the first chunk sharing a section with ``expected``; None if none does."""
    for rank, sections in enumerate(ranking, 1):
        if expected & set(sections):
            return rank
    return None


def hit_at(ranking: Ranking, expected: set[str], k: int) -> float:
    rank = first_relevant_rank(ranking[:k], expected)
    return 1.0 if rank is not None else 0.0


def recall_at(ranking: Ranking, expected: set[str], k: int) -> float:
    if not expected:
        raise ValueError("recall needs at least one expected section")
    found: set[str] = set()
    for sections in ranking[:k]:
        found |= set(sections)
    return len(found & expected) / len(expected)


def rr_at(ranking: Ranking, expected: set[str], k: int) -> float:
    rank = first_relevant_rank(ranking[:k], expected)
    return 1.0 / rank if rank else 0.0


def ndcg_at(ranking: Ranking, expected: set[str], k: int) -> float:
    """nDCG@k as trec_eval computes it with qrels = the expected sections: a chunk earns the
    (binary) gain when it holds an expected section no higher chunk was credited for, and the
    ideal ranking holds every expected section once, retrieved or not."""
    credited: set[str] = set()
    dcg = 0.0
    for i, sections in enumerate(ranking[:k], 1):
        new = (expected & set(sections)) - credited
        if new:
            dcg += 1 / math.log2(i + 1)
            credited |= new
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(k, len(expected)) + 1))
    return dcg / idcg if idcg else 0.0


def budget_prefix(ranking: Ranking, tokens: Sequence[int], budget: int) -> Ranking:
    """The longest prefix of ``ranking`` whose chunk token counts sum to at most ``budget``."""
    total, n = 0, 0
    for t in tokens:
        if total + t > budget:
            break
        total += t
        n += 1
    return ranking[:n]

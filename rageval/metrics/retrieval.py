"""Retrieval metrics on section labels. Pure functions; nothing here does I/O.

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
from dataclasses import dataclass

from rageval.metrics.base import (
    GENERATION_METRICS,
    OTHER_METRICS,
    RETRIEVAL_FAMILIES,
    parse_metric,
)

Ranking = Sequence[frozenset[str] | set[str] | Sequence[str]]


@dataclass(frozen=True)
class RetrievalMetric:
    family: str
    description: str
    formula: str


REGISTRY: dict[str, RetrievalMetric] = {}


def _register(m: RetrievalMetric) -> None:
    if m.family in REGISTRY:
        raise ValueError(f"retrieval metric {m.family!r} registered twice")
    REGISTRY[m.family] = m


_register(RetrievalMetric("hit", "a relevant chunk is in the top k", "1 if any relevant in top k else 0"))
_register(RetrievalMetric("recall", "share of expected sections found in the top k", "|E ∩ sections(top k)| / |E|"))
_register(RetrievalMetric("mrr", "reciprocal rank of the first relevant chunk", "1 / rank of first relevant (0 if none)"))
_register(RetrievalMetric("ndcg", "rank-discounted gain, binary relevance, each expected section credited once",
                          "Σ (2^rel−1)/log2(i+1) / IDCG, IDCG over min(k, |E|) ranks"))
assert tuple(REGISTRY) == RETRIEVAL_FAMILIES  # noqa: S101 - a module invariant, not input validation


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


_FUNCS = {"hit": hit_at, "recall": recall_at, "mrr": rr_at, "ndcg": ndcg_at}


def budget_prefix(ranking: Ranking, tokens: Sequence[int], budget: int) -> Ranking:
    """The longest prefix of ``ranking`` whose chunk token counts sum to at most ``budget``."""
    total, n = 0, 0
    for t in tokens:
        if total + t > budget:
            break
        total += t
        n += 1
    return ranking[:n]


def case_metrics(names: Sequence[str], ranking: Ranking, tokens: Sequence[int],
                 expected: set[str] | frozenset[str]) -> dict[str, float]:
    """Every retrieval metric in ``names`` for one case. ``tokens[i]`` is the size of chunk i."""
    expected = set(expected)
    out: dict[str, float] = {}
    for name in names:
        m = parse_metric(name)
        if not m.is_retrieval:
            raise ValueError(f"{name!r} is not a retrieval metric")
        if m.budget:
            cut = budget_prefix(ranking, tokens, m.k)
            out[name] = _FUNCS[m.family](cut, expected, len(cut))
        else:
            out[name] = _FUNCS[m.family](ranking, expected, m.k)
    return out


def metrics_table_markdown() -> str:
    """The README's metric table, generated from the registries so the two cannot drift."""
    rows = ["| Metric | What it measures | Definition |", "|---|---|---|"]
    for family, m in REGISTRY.items():
        rows.append(f"| `{family}@K` | {m.description} | {m.formula.replace('|', chr(92) + '|')} |")
    for family, m in REGISTRY.items():
        rows.append(f"| `{family}@Ntok` | {family}@K over the longest prefix of ≤ N context tokens | equal-budget comparison |")
    for name, description in {**GENERATION_METRICS, **OTHER_METRICS}.items():
        rows.append(f"| `{name}` | {description} | |")
    return "\n".join(rows) + "\n"

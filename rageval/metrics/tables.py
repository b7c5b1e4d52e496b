"""A case's retrieval metric table, computed once per *shape* of case.

The built-in families (hit, recall, MRR, nDCG) read of a case only which of its graded sections
each retrieved chunk holds, the grades, which sections count as relevant, the sections the index's
chunks hold together (nDCG's ideal) and, for a token budget, how many chunks fit in it. Two cases
that differ only in their sections' names have the same table. :func:`metric_table` names the
sections by where they first appear (in the ranking, then by grade and name), and computes each
shape's table once: the 20,000 cases of bench/synthetic.py's golden set over 10,000 chunks have 6
shapes, and their metrics had been about 6 % of the run's CPU. Equal shapes give equal tables, bit
for bit: grades are whole numbers, so every sum is exact in any order. A metric family registered by
a project may read anything of a case; a table holding one is computed case by case.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rageval.metrics import retrieval
from rageval.metrics.registry import REGISTRY, case_metrics, parse_metric

__all__ = ["metric_table"]

#: the families whose reading of a case the shape holds (above)
_BUILT_IN = (retrieval.hit_at, retrieval.recall_at, retrieval.rr_at, retrieval.ndcg_at)
#: distinct shapes kept before the memo starts again (bounded memory; the bench's 20,000 cases have 6)
LIMIT = 65_536

_tables: dict[tuple[tuple[Any, ...], Any], Mapping[str, float]] = {}
_plans: dict[tuple[str, ...], tuple[tuple[Any, ...], tuple[int, ...], tuple[str, ...]] | None] = {}


def metric_table(names: Sequence[str], ranking: retrieval.Ranking, tokens: Sequence[int],
                 relevance: retrieval.Relevance, *,
                 share: Callable[[dict[str, float]], Mapping[str, float]] = dict) -> Mapping[str, float]:
    """:func:`rageval.metrics.registry.case_metrics` of the case, each value rounded to 6 decimals,
    as ``share`` makes it one object (the runner's :class:`rageval.records.Shared`): the same
    object for every case of the same shape."""
    shape = _shape(tuple(names), ranking, tokens, relevance)
    table = None if shape is None else _tables.get((shape, share))
    if table is None:
        table = share({k: round(v, 6) for k, v in case_metrics(names, ranking, tokens, relevance).items()})
        if shape is not None:
            if len(_tables) >= LIMIT:
                _tables.clear()
            _tables[(shape, share)] = table
    return table


def _plan(names: tuple[str, ...]) -> tuple[tuple[Any, ...], tuple[int, ...], tuple[str, ...]] | None:
    """(the families the names use, the token budgets among them, the families' names), or None
    when a family is not built in (or a name is not a retrieval metric: case_metrics says so)."""
    if names not in _plans:
        _plans[names] = None
        try:
            metrics = [parse_metric(name) for name in names]
        except ValueError:
            metrics = []
        families = tuple(REGISTRY.families.get(m.family) for m in metrics if m.is_retrieval)
        if len(families) == len(names) and all(f is not None and f.at in _BUILT_IN for f in families):
            _plans[names] = (families, tuple(sorted({m.k for m in metrics if m.budget})),
                             tuple(f.family for f in families))
    plan = _plans[names]
    if plan is not None and not all(map(operator.is_, map(REGISTRY.families.get, plan[2]), plan[0])):
        _plans.pop(names, None)                           # a family was registered again since (threads: pop)
        return _plan(names)
    return plan


def _shape(names: tuple[str, ...], ranking: retrieval.Ranking, tokens: Sequence[int],
           relevance: retrieval.Relevance) -> tuple[Any, ...] | None:
    plan = _plan(names)
    gains, relevant = relevance.gains, relevance.relevant
    if plan is None or not all(type(g) is int for g in gains.values()):
        return None
    keep = gains.keys() | relevant
    grades = relevance.grades
    label: dict[str, int] = {}                  # a section's name in the shape: where it first appears
    ranks = []
    for chunk in ranking:
        held = keep.intersection(chunk)
        if not held:
            ranks.append(())
            continue
        new = held.difference(label)
        for s in sorted(new, key=lambda s: (grades[s], s)) if len(new) > 1 else new:
            label[s] = len(label)
        ranks.append(tuple(sorted(label[s] for s in held)) if len(held) > 1 else (label[min(held)],))
    for s in sorted(keep.difference(label), key=lambda s: (grades[s], s)):   # never retrieved
        label[s] = len(label)
    holders = relevance.holders
    held_by = None if holders is None else tuple(sorted(
        {tuple(sorted(label[s] for s in h if s in gains)) for h in holders}))
    return (names, tuple(ranks), tuple(sorted((label[s], g) for s, g in gains.items())),
            tuple(sorted(label[s] for s in relevant)), held_by, _fitting(plan[1], tokens))


def _fitting(budgets: tuple[int, ...], tokens: Sequence[int]) -> tuple[int, ...]:
    """How many chunks each token budget holds (:func:`rageval.metrics.retrieval.budget_prefix`)."""
    return tuple(len(retrieval.budget_prefix(tokens, tokens, budget)) for budget in budgets)

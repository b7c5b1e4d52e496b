"""Retrieval metrics on section labels. Pure functions; nothing here does I/O. They are declared
(one family each) in ``rageval.metrics.registry``.

A case's judgments (:class:`Relevance`) grade its expected sections: ``{DT-1: 2, DT-3: 1}``, or
grade 1 each for a plain list ``[DT-1, DT-3]``. ``ranking`` is the retrieved list, best first, each
item the set of sections that chunk holds.

- R = the sections graded ≥ ``retrieval.relevance_min`` (default 1; trec_eval's ``-l``); a chunk
  is *relevant* when it holds a section of R.
- hit@k    = 1 if a relevant chunk is in the top k, else 0
- recall@k = |R ∩ sections(top k)| / |R|
- RR@k     = 1 / rank of the first relevant chunk in the top k (0 if none); MRR@k is its mean
- nDCG@k   = DCG@k / IDCG@k, the gain of a section its grade (linear, as trec_eval's ndcg_cut;
             grades ≤ 0 gain nothing; ``relevance_min`` does not apply, as in trec_eval). A section
             is credited once, at the first chunk holding it: chunk i earns the sum of the grades of
             the expected sections it is the first to hold, DCG@k = Σ_{i ≤ k} gain_i / log2(i + 1).
             IDCG@k is the best DCG@k any ranking of the index's chunks could reach: with one
             section per chunk, the grades sorted best first (exactly trec_eval with qrels = the
             graded sections, cross-checked against pytrec_eval and trec_eval's own test outputs);
             when chunks hold several sections, the fewest, fullest chunks first — an ordered set
             cover, so one chunk holding every expected section, ranked first, scores 1.0. The
             chunks the ideal may use are the index's (when the app says which sections its chunks
             hold: the builtin one), the case's retrieved chunks, and — when the app does not say —
             one chunk per expected section (trec_eval's ideal). A ranking never scores above 1.0.
             For binary grades this is the chunk-level nDCG of ../DESIGN.md with the gain of a
             chunk counted per section it newly holds: a chunk holding two expected sections first
             earns 2, so ranking it ahead of a chunk holding one is better, and a ranking of
             several one-section chunks can never beat the ideal.
- @Ntok    = the same metrics over the longest prefix of the ranking whose chunks add up to at
             most N tokens, so configurations with different chunk sizes compare at an equal
             context budget (top-12 of 200-token chunks vs top-3 of 800-token chunks).

A case with no expected sections has no retrieval metrics (out of scope: a RAG refusal case); a
case with expected sections but none graded ≥ relevance_min has no hit, recall or MRR (trec_eval
would count it as 0 in the means: docs/metrics.md says where the two differ), and nDCG only when some
grade is positive. A case with an empty ranking scores 0 on every metric it has.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

Ranking = Sequence[frozenset[str] | set[str] | Sequence[str]]

#: exact ideal search: at most this many partial covers per rank before the upper bound is used
MAX_COVER_STATES = 4096


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


@dataclass(frozen=True)
class Relevance:
    """The graded expected sections of one case. ``minimum``: the least grade that counts as
    relevant for hit, recall and MRR. ``holders``: the sets of sections the index's chunks hold
    (only those holding an expected section matter), or None when the app does not say. As a set
    (``in``, ``&``, iteration, ``len``) it is its relevant sections."""

    grades: Mapping[str, int]
    minimum: int = 1
    holders: tuple[frozenset[str], ...] | None = None
    _ideal: dict[int, float] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, expected: Relevance | Mapping[str, int] | Iterable[str], minimum: int = 1,
           holders: Iterable[Iterable[str]] | None = None) -> Relevance:
        """Judgments from a Relevance, a {section: grade} mapping or a set of sections (grade 1)."""
        if isinstance(expected, Relevance):
            return expected
        grades = dict(expected) if isinstance(expected, Mapping) else dict.fromkeys(expected, 1)
        return cls(grades, minimum, None if holders is None else tuple(frozenset(h) for h in holders))

    @cached_property
    def relevant(self) -> frozenset[str]:
        return frozenset(s for s, g in self.grades.items() if g >= self.minimum)

    # A retrieval family written for a set of expected sections reads the relevant ones as a set.
    def __iter__(self) -> Iterator[str]:
        return iter(self.relevant)

    def __len__(self) -> int:
        return len(self.relevant)

    def __contains__(self, section: object) -> bool:
        return section in self.relevant

    def __and__(self, other: Iterable[str]) -> frozenset[str]:
        return self.relevant.intersection(other)

    __rand__ = __and__

    @cached_property
    def gains(self) -> Mapping[str, int]:
        return {s: g for s, g in self.grades.items() if g > 0}

    def seen_in(self, ranking: Ranking) -> Relevance:
        """These judgments with the ranking's chunks offered to the ideal too (see the module
        docstring): the ideal of a case is computed once, whatever cut-off asks for it."""
        gains = self.gains
        seen = {frozenset(s for s in chunk if s in gains) for chunk in ranking}
        known = set(self.holders) if self.holders is not None else {frozenset([s]) for s in gains}
        return Relevance(self.grades, self.minimum, tuple(sorted(known | (seen - {frozenset()}), key=sorted)))

    def ideal_dcg(self, k: int) -> float:
        """IDCG@k: the best DCG@k over rankings of the chunks the ideal may use."""
        if k not in self._ideal:
            prefix = self._disjoint_prefix
            self._ideal[k] = (_ideal_at(prefix, k) if prefix is not None
                              else _covering_ideal(self.gains, self.covers, k))
        return self._ideal[k]

    @cached_property
    def _disjoint_prefix(self) -> list[float] | None:
        """When no two of the ideal's chunks share a section (one section per chunk, the usual case),
        IDCG@k for every k at once: the discounted worths, best first, summed left to right (the
        floats a sum at each k gave before); None otherwise."""
        worth = _disjoint_worth(self.gains, self.covers)
        return None if worth is None else _disjoint_ideals(worth)

    @cached_property
    def covers(self) -> list[frozenset[str]]:
        """The chunk contents an ideal ranking may use (:func:`_covers`), read once per case."""
        return _covers(self.gains, self.holders)


def _covers(gains: Mapping[str, int], holders: tuple[frozenset[str], ...] | None) -> list[frozenset[str]]:
    """The distinct chunk contents (cut to the gaining sections) an ideal ranking may use, none
    contained in another (a chunk holding less is never better)."""
    if holders is None:
        holders = tuple(frozenset([s]) for s in gains)
    cut = {frozenset(s for s in h if s in gains) for h in holders} - {frozenset()}
    return [c for c in cut if not any(c < other for other in cut)]


def _covering_ideal(gains: Mapping[str, int], covers: list[frozenset[str]], k: int) -> float:
    """IDCG@k of chunks that share sections: the best partial covers rank by rank (beyond
    :data:`MAX_COVER_STATES` of them, an upper bound)."""
    worth = sorted((sum(gains[s] for s in c) for c in covers), reverse=True)
    states: dict[frozenset[str], float] = {frozenset(): 0.0}
    best = 0.0
    for rank in range(1, k + 1):
        grown: dict[frozenset[str], float] = {}
        for covered, dcg in states.items():
            for c in covers:
                new = c - covered
                if new:
                    key, value = covered | c, dcg + sum(gains[s] for s in new) * _discount(rank)
                    if value > grown.get(key, -1.0):
                        grown[key] = value
        if not grown:
            break
        if len(grown) > MAX_COVER_STATES:
            return max(best, _upper_bound(worth, sum(gains.values()), k))
        states, best = grown, max(best, max(grown.values()))
    return best


def _disjoint_worth(gains: Mapping[str, int], covers: list[frozenset[str]]) -> list[int] | None:
    """When no two of ``covers`` share a section, what each is worth, best first; None otherwise."""
    if sum(len(c) for c in covers) != len(set().union(*covers)):
        return None
    return sorted((sum(gains[s] for s in c) for c in covers), reverse=True)


def _disjoint_ideals(worth: Sequence[float]) -> list[float]:
    """IDCG@0, @1, … of disjoint chunks worth ``worth`` (best first): running sums, left to right."""
    return [0.0, *itertools.accumulate(w * _discount(i) for i, w in enumerate(worth, 1))]


def _ideal_at(ideals: list[float], k: int) -> float:
    """IDCG@k from :func:`_disjoint_ideals` (past the last chunk, the sum of them all)."""
    return ideals[min(k, len(ideals) - 1)]


def _upper_bound(worth: Sequence[float], total: float, k: int) -> float:
    """A bound no ranking's DCG@k exceeds: by Abel summation DCG@k = Σ_{i<k} C_i (w_i − w_{i+1})
    + C_k w_k, with C_i the gain held by the top i chunks ≤ min(total, the i largest chunk gains)."""
    bound, held = 0.0, 0.0
    for i in range(1, k + 1):
        held = min(total, held + (worth[i - 1] if i <= len(worth) else 0.0))
        bound += held * ((_discount(i) - _discount(i + 1)) if i < k else _discount(i))
    return bound


def first_relevant_rank(ranking: Ranking, expected: Relevance | Mapping[str, int] | Iterable[str]) -> int | None:
    """1-based rank of the first relevant chunk (holding a section graded ≥ the minimum); None if none does."""
    relevant = Relevance.of(expected).relevant
    for rank, sections in enumerate(ranking, 1):
        if relevant.intersection(sections):
            return rank
    return None


def hit_at(ranking: Ranking, expected: Relevance | Mapping[str, int] | Iterable[str], k: int) -> float:
    return 1.0 if first_relevant_rank(ranking[:k], expected) is not None else 0.0


def recall_at(ranking: Ranking, expected: Relevance | Mapping[str, int] | Iterable[str], k: int) -> float:
    relevant = Relevance.of(expected).relevant
    if not relevant:
        raise ValueError("recall needs at least one relevant expected section")
    found: set[str] = set()
    for sections in ranking[:k]:
        found.update(sections)
    return len(found & relevant) / len(relevant)


def rr_at(ranking: Ranking, expected: Relevance | Mapping[str, int] | Iterable[str], k: int) -> float:
    rank = first_relevant_rank(ranking[:k], expected)
    return 1.0 / rank if rank else 0.0


def dcg_at(ranking: Ranking, gains: Mapping[str, int], k: int) -> float:
    """Σ over the top k of the grades of the expected sections each chunk is the first to hold,
    discounted by log2(rank + 1)."""
    credited: set[str] = set()
    dcg = 0.0
    for i, sections in enumerate(ranking[:k], 1):
        new = {s for s in sections if s in gains} - credited
        if new:
            dcg += sum(gains[s] for s in new) * _discount(i)
            credited |= new
    return dcg


def ndcg_at(ranking: Ranking, expected: Relevance | Mapping[str, int] | Iterable[str], k: int) -> float:
    """nDCG@k with graded gains and the set-cover ideal (see the module docstring)."""
    rel = Relevance.of(expected)
    if rel.holders is None:
        rel = rel.seen_in(ranking)
    idcg = rel.ideal_dcg(k)
    return min(1.0, dcg_at(ranking, rel.gains, k) / idcg) if idcg else 0.0


def budget_prefix(ranking: Ranking, tokens: Sequence[int], budget: int) -> Ranking:
    """The longest prefix of ``ranking`` whose chunk token counts sum to at most ``budget``."""
    total, n = 0, 0
    for t in tokens:
        if total + t > budget:
            break
        total += t
        n += 1
    return ranking[:n]

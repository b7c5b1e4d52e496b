"""Exact top-k of cosine scores, found with the float32 matrix product and scored without it.

A score is defined, whatever the machine, as the float64 sum of the products of the query's and
the row's float32 unit vectors, taken over the query's non-zero columns in ascending order
(float32 × float32 is exact in float64, and the sum runs in that one order), rounded to 6
decimals. The top k are the k best scores, equal scores by row ascending.

The float32 matrix product (BLAS) finds them: its error on a dot product of t non-zero terms is at
most γ(t) = t·u / (1 − t·u), u = 2⁻²⁴, whatever the kernel's summation order (unit vectors). If S is
the k-th best float32 score of a query, k rows score at least S − γ exactly, so a row of the top k
scores at least S − γ − 5e-7 exactly (rounding) and S − 2γ − 5e-7 in float32. :class:`Shortlist`
keeps, part after part of the rows, those above a floor that only rises towards that bound (each
query's k-th best so far, less the margin); :func:`exact_top` then scores only the shortlisted rows
exactly and ranks them. The margin used is twice that bound plus 1e-6.
"""

from __future__ import annotations

import numpy as np

from rageval.pipeline.hits import SCORE_DECIMALS, Hits, cells, lexsort_unique

__all__ = ["QueryTerms", "Shortlist", "exact_top", "ranked_top"]

_UNIT_ROUNDOFF = 2.0 ** -24       # float32
_PRODUCTS = 1 << 18               # exact products gathered at once (~4 MB an array)
_KEPT_PER_QUERY = 4               # a shortlist is cut back once it holds this many times k per query


class QueryTerms:
    """Unit query rows as their non-zero columns (ascending) and float64 values, row after row, and
    per row the margin of the float32 product: 4γ(t + 1) + 1e-6, t the row's non-zeros."""

    def __init__(self, unit: np.ndarray) -> None:
        which, columns, flat = cells(unit)
        self.columns = columns.astype(np.int32)
        self.values = unit.ravel()[flat].astype(np.float64)
        self.count = np.bincount(which, minlength=len(unit)).astype(np.int64)
        terms = (self.count + 1) * _UNIT_ROUNDOFF
        self.margin = 4.0 * terms / (1.0 - terms) + 1e-6

    @classmethod
    def joined(cls, blocks: list[QueryTerms]) -> QueryTerms:
        out = cls.__new__(cls)
        out.columns = np.concatenate([b.columns for b in blocks])
        out.values = np.concatenate([b.values for b in blocks])
        out.count = np.concatenate([b.count for b in blocks])
        out.margin = np.concatenate([b.margin for b in blocks])
        return out

    @property
    def first(self) -> np.ndarray:
        return np.cumsum(self.count) - self.count

    def exact(self, part: np.ndarray, queries: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """The scores, as defined above, of (query, row of the dense ``part``) pairs."""
        out = np.empty(len(queries), dtype=np.float64)
        first, cost = self.first, np.cumsum(self.count[queries])
        start = 0
        while start < len(queries):
            done = int(cost[start] - self.count[queries[start]])
            stop = max(start + 1, int(np.searchsorted(cost, done + _PRODUCTS, "right")))
            count = self.count[queries[start:stop]]
            pos = np.arange(int(count.sum())) + np.repeat(first[queries[start:stop]] - (np.cumsum(count) - count),
                                                          count)
            products = part[np.repeat(rows[start:stop], count), self.columns[pos]].astype(np.float64)
            products *= self.values[pos]
            out[start:stop] = np.bincount(np.repeat(np.arange(stop - start), count), weights=products,
                                          minlength=stop - start)
            start = stop
        return np.round(out, SCORE_DECIMALS) + 0.0


class Shortlist:
    """For a block of queries, the rows whose float32 score may still reach the query's top k, as
    (query, row) pairs offered part by part of the rows."""

    def __init__(self, margin: np.ndarray, k: int) -> None:
        self.k, self.margin = k, margin
        self.floor = np.full(len(margin), -np.inf)     # per query: a row below cannot reach the top k
        self._kept: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (query, row, float32 score)
        self._size = 0

    def offer(self, approx: np.ndarray, first: int) -> None:
        """``approx``: the block's float32 scores against rows first.. of one part."""
        width = approx.shape[1]
        open_ = np.flatnonzero(np.isneginf(self.floor))
        if len(open_) and self.k < width:               # the part's own k-th best bounds the query's
            kth = np.partition(approx[open_], width - self.k, axis=1)[:, width - self.k]
            self.floor[open_] = kth - self.margin[open_]
        floor = np.nextafter(self.floor.astype(np.float32), np.float32(-np.inf))   # rounded down
        queries, rows, flat = cells(approx >= floor[:, None])
        self._kept.append((queries.astype(np.int32), (rows + first).astype(np.int64), approx.ravel()[flat]))
        self._size += len(queries)
        if self._size > _KEPT_PER_QUERY * self.k * len(self.floor) + (1 << 16):
            self._cut()

    def _cut(self) -> None:
        """Raise each floor to the k-th best float32 score kept (less the margin); drop what is below."""
        if not self._kept:
            self._kept = [(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.float32))]
        queries, rows, scores = (np.concatenate(x) for x in zip(*self._kept))
        ordered = np.sort((queries.astype(np.uint64) << np.uint64(32)) | _descending(scores))
        starts = np.searchsorted(ordered >> np.uint64(32), np.arange(len(self.floor), dtype=np.uint64), "left")
        full = np.flatnonzero(np.diff(np.append(starts, len(ordered))) >= self.k)
        kth = _score((ordered[starts[full] + self.k - 1] & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        self.floor[full] = np.maximum(self.floor[full], kth - self.margin[full])
        keep = scores >= self.floor[queries]
        self._kept, self._size = [(queries[keep], rows[keep], scores[keep])], int(keep.sum())

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The shortlisted (query, row) pairs and their float32 scores."""
        self._cut()
        return self._kept[0]


def _descending(scores: np.ndarray) -> np.ndarray:
    """uint64 keys of float32 scores that sort best first (the float order, reversed, on the bits)."""
    bits = scores.astype(np.float32).view(np.uint32)
    ascending = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
    return (np.uint32(0xFFFFFFFF) - ascending).astype(np.uint64)


def _score(keys: np.ndarray) -> np.ndarray:
    """The float32 scores (as float64) of keys made by :func:`_descending`."""
    ascending = np.uint32(0xFFFFFFFF) - keys
    bits = np.where(ascending >> np.uint32(31), ascending & np.uint32(0x7FFFFFFF), ~ascending)
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def exact_top(terms: QueryTerms, queries: np.ndarray, rows: np.ndarray, parts, k: int, m: int) -> Hits:
    """The top ``k`` of each of ``m`` queries among the shortlisted (query, row) pairs, scored
    exactly on the dense ``parts`` ((first row, rows) in ascending order) that hold them."""
    return Hits.best(queries, rows, _exact_scores(terms, queries, rows, parts), m, k)


def _exact_scores(terms: QueryTerms, queries: np.ndarray, rows: np.ndarray, parts) -> np.ndarray:
    """The exact scores of (query, row) pairs, in their order, from the ``parts`` that hold them."""
    order = np.argsort(rows, kind="stable")
    queries, rows = queries[order], rows[order]
    scores = np.empty(len(rows), dtype=np.float64)
    for first, part in parts:
        lo, hi = np.searchsorted(rows, [first, first + len(part)])
        if hi > lo:
            scores[lo:hi] = terms.exact(part, queries[lo:hi], rows[lo:hi] - first)
        if hi == len(rows):
            break
    out = np.empty_like(scores)
    out[order] = scores
    return out


def ranked_top(terms: QueryTerms, queries: np.ndarray, rows: np.ndarray, approx: np.ndarray, parts_of,
               k: int, m: int) -> Hits:
    """The rows :func:`exact_top` ranks, in its order, with their float32 scores (a ranking, for
    fusion). Two shortlisted rows of a query whose float32 scores differ by more than 2γ(t + 1) +
    1e-6 (each is within γ(t + 1) of the exact sum) are in the order of those scores: their exact
    scores differ by more than 1e-6, so rounding keeps them apart. Only runs of rows closer than
    that, from the query's top k, are scored exactly (``parts_of(rows)``: the parts holding those
    rows) and ordered by exact score, then row."""
    order = lexsort_unique((rows, -approx, queries))
    queries, rows, approx = queries[order], rows[order], approx[order]
    apart = terms.margin / 2.0 + 5e-7                                       # 2γ(t + 1) + 1e-6
    close = (queries[1:] == queries[:-1]) & (approx[:-1].astype(np.float64) - approx[1:] <= apart[queries[1:]])
    run = np.concatenate([[0], np.cumsum(~close)])                         # runs of close rows, in order
    run_start = np.flatnonzero(np.concatenate([[True], ~close]))[run]
    rank = np.arange(len(queries)) - np.searchsorted(queries, queries, "left")
    tied = np.zeros(len(rows), dtype=bool)
    tied[:-1] |= close
    tied[1:] |= close
    tied &= rank[run_start] < k                                             # the run starts in the top k
    tied = np.flatnonzero(tied)
    if len(tied):           # a run is tied whole or not at all: the tied runs, each in place, by exact score then row
        exact = _exact_scores(terms, queries[tied], rows[tied], parts_of(np.unique(rows[tied])))
        final = tied[np.lexsort((rows[tied], -exact, run[tied]))]
        queries[tied], rows[tied], approx[tied] = queries[final], rows[final], approx[final]
    top = rank < k                                       # the ranks within a query are those of any order of it
    out = Hits(np.full((m, k), -1, dtype=np.int64), np.zeros((m, k), dtype=np.float64))
    out.rows[queries[top], rank[top]] = rows[top]
    out.scores[queries[top], rank[top]] = approx[top]
    return out

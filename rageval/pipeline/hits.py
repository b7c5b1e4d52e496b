"""The best k rows of each query as arrays, and the one ranking rule every index follows: score
descending (scores rounded to 6 decimals), equal scores by row ascending (reciprocal-rank fusion puts
a row's best single rank first). The builtin app numbers its chunks in content order (section ids,
then a hash of the text: issue 22 §4), so "by row" there means by content, never by file order."""

from __future__ import annotations

import numpy as np

__all__ = ["SCORE_DECIMALS", "Hits", "top_of"]

SCORE_DECIMALS = 6


class Hits:
    """Per query, its best rows and their scores, best first: ``rows`` (m, k) int64, ``-1`` past a
    query's last hit, and ``scores`` (m, k) float64."""

    def __init__(self, rows: np.ndarray, scores: np.ndarray) -> None:
        self.rows, self.scores = rows, scores

    @classmethod
    def best(cls, queries: np.ndarray, rows: np.ndarray, scores: np.ndarray, m: int, k: int,
             tie: np.ndarray | None = None) -> Hits:
        """The ``k`` best of (query, row, score) triples (in any order, a row once per query) for
        each of ``m`` queries; equal scores by ``tie`` ascending (one value per triple), then row."""
        order = np.lexsort((rows, -scores, queries) if tie is None else (rows, tie, -scores, queries))
        queries, rows, scores = queries[order], rows[order], scores[order]
        rank = np.arange(len(queries)) - np.searchsorted(queries, queries, "left")
        top = rank < k
        out = cls(np.full((m, k), -1, dtype=np.int64), np.zeros((m, k), dtype=np.float64))
        out.rows[queries[top], rank[top]] = rows[top]
        out.scores[queries[top], rank[top]] = scores[top]
        return out

    @classmethod
    def empty(cls, m: int) -> Hits:
        return cls(np.zeros((m, 0), dtype=np.int64), np.zeros((m, 0), dtype=np.float64))

    def __len__(self) -> int:
        return len(self.rows)

    def lists(self) -> list[list[tuple[int, float]]]:
        """Per query, its ``(row, score)`` pairs, best first."""
        counts = (self.rows >= 0).sum(axis=1).tolist()
        return [list(zip(rows[:c], scores[:c], strict=True))
                for rows, scores, c in zip(self.rows.tolist(), self.scores.tolist(), counts, strict=True)]


def top_of(scores: np.ndarray, k: int) -> Hits:
    """Per row of ``scores`` (m, n), the ``k`` best columns. Scores are rounded to 6 decimals first
    (as float64; ``-0.0`` becomes ``0.0``), so float noise cannot reorder equal documents.

    Only candidates are rounded: rounding moves a score by at most 5e-7, so every column whose
    rounded score can reach the k-th best rounded score is within 1e-6 of the k-th best raw score,
    and so within 1e-6 of any floor under it (:func:`_kth_floor`). A candidate further below the
    k-th best rounds below it and is never among the k best."""
    scores = np.asarray(scores)
    m, n = scores.shape
    k = min(int(k), n)
    if k <= 0:
        return Hits.empty(m)
    if k < n:
        queries, columns = _at_least(scores, _kth_floor(scores, k))
        # a floor far under the k-th best (the row's best scores in fewer than k blocks, the rest
        # tied low) gives a row many candidates: those rows select their k-th best exactly
        crowded = np.flatnonzero(np.bincount(queries, minlength=m) > CROWDED * k)
        if len(crowded):
            rows = scores[crowded]
            exact_q, exact_c = _at_least(rows, _kth_best(rows, k))
            keep = ~np.isin(queries, crowded)
            queries = np.concatenate([queries[keep], crowded[exact_q]])
            columns = np.concatenate([columns[keep], exact_c])
    else:
        queries, columns = np.divmod(np.arange(m * n, dtype=np.int64), n)
    value = np.round(scores[queries, columns].astype(np.float64), SCORE_DECIMALS) + 0.0
    return Hits.best(queries, columns, value, m, k)


#: :func:`_kth_floor` takes the maxima of blocks of this many neighbouring columns
FLOOR_BLOCK = 64
#: a row with more than this many candidates per hit asked for selects its k-th best exactly
CROWDED = 64


def cells(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, flat index) of each True of a 2-d ``mask``, in ``np.nonzero``'s order: a flat
    index divided (``np.nonzero`` of a 2-d mask costs ten times more)."""
    flat = np.flatnonzero(mask)
    rows, columns = np.divmod(flat, mask.shape[1])
    return rows, columns, flat


def _at_least(scores: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of every score within 1e-6 of its row's ``floor`` or above, row by row."""
    rows, columns, _ = cells(scores >= (floor - 1e-6)[:, None])
    return rows, columns


def _kth_floor(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``scores`` (m, n, k < n), a float64 value no greater than its k-th best score: the
    k-th best of the maxima of its blocks of :data:`FLOOR_BLOCK` columns (k blocks each hold a score
    at least that high). A pass over the scores that costs a third of a selection in each row."""
    n = scores.shape[1]
    if n < k * FLOOR_BLOCK:                       # too few blocks to say much: select exactly
        return _kth_best(scores, k)
    return _kth_best(np.maximum.reduceat(scores, np.arange(0, n, FLOOR_BLOCK), axis=1), k)


def _kth_best(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row of ``scores`` (k ≤ its width), its k-th best value, as float64."""
    n = scores.shape[1]
    return np.partition(scores, n - k, axis=1)[:, n - k].astype(np.float64)

"""The best k rows of each query as arrays, and the one ranking rule every index follows: score
descending (scores rounded to 6 decimals), equal scores by row ascending (reciprocal-rank fusion puts
a row's best single rank first). The builtin app numbers its chunks in content order (section ids,
then a hash of the text: issue 22 §4), so "by row" there means by content, never by file order."""

from __future__ import annotations

import numpy as np

__all__ = ["SCORE_DECIMALS", "Hits", "lexsort_unique", "top_of"]

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
        order = lexsort_unique((rows, -scores, queries) if tie is None else (rows, tie, -scores, queries))
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


def lexsort_unique(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key sorts first) of keys that no two entries share all of, by
    one sort of the keys packed into 64 bits when their ranges fit: an integer key as its offset from
    its least value, a float key as its rank among its distinct values (a float32 key: its bits in
    their order), one after another. Unique packed keys have one order, whichever sort finds it; at
    20,000 questions a search sorts millions of (query, score, row) triples, and ``np.lexsort``, one
    stable pass per key, took five to eight times longer. Keys too wide to pack go to ``np.lexsort``."""
    if not len(keys[0]):
        return np.lexsort(keys)
    packed, width = np.zeros(len(keys[0]), dtype=np.uint64), 0
    for key in reversed(keys):                         # the first sorting key goes to the highest bits
        ordinal, top = _ordinal(key)
        bits = top.bit_length()
        width += bits
        if width > 64:
            return np.lexsort(keys)
        packed = (packed << np.uint64(bits)) | ordinal
    return np.argsort(packed)


def _ordinal(key: np.ndarray) -> tuple[np.ndarray, int]:
    """(key mapped to unsigned integers in its order, equal values to equal ones; the largest)."""
    if key.dtype == np.float32:
        bits = (key + np.float32(0.0)).view(np.uint32)          # + 0.0: -0.0 is 0.0, as np.lexsort sees it
        negative = bits >= np.uint32(1 << 31)
        ordered = np.where(negative, ~bits, bits | np.uint32(1 << 31)).astype(np.uint64)
    elif key.dtype.kind == "f":
        distinct, ordered = np.unique(key, return_inverse=True)
        return ordered.astype(np.uint64).ravel(), len(distinct) - 1
    else:
        low, high = int(key.min()), int(key.max())
        if high - low >= 1 << 63:
            return key, 1 << 64                                       # too wide: the caller lexsorts
        ordered = (key - np.uint64(low)) if key.dtype.kind == "u" else key.astype(np.int64) - np.int64(low)
        return ordered.astype(np.uint64), high - low
    low = ordered.min()
    return ordered - low, int(ordered.max() - low)


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

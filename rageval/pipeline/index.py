"""An in-memory vector index: cosine top-k over a dense float32 numpy matrix.

Exact search (no approximation), one matrix product per batch of queries. Results are
deterministic: sorted by score descending, equal scores by row index ascending. Scores are
rounded to 6 decimals before ranking so that float noise in the matrix product (which can differ
in the last bits between two identical documents) cannot reorder documents that are equal.

Memory: the index holds one float32 copy of the embeddings, or none with ``copy=False`` (it then
normalises the caller's float32 array in place: 100,000 rows × 2,048 dimensions is 819 MB, so a
second copy is what decides whether a large corpus fits). Query batches are sized so that a batch's
score matrix stays near 16 million entries.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["VectorIndex", "ranked"]

_SCORE_DECIMALS = 6
_QUERY_BATCH = 256          # queries per matrix product at most …
_SCORES_PER_BATCH = 1 << 24  # … and about this many (query, row) scores per batch
_NORM_ROWS = 4096           # rows normalised per step (bounds the temporary of the norms)


def _normalise_in_place(m: np.ndarray) -> np.ndarray:
    """Unit rows in float32, block by block; all-zero rows stay zero."""
    for start in range(0, m.shape[0], _NORM_ROWS):
        block = m[start:start + _NORM_ROWS]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        np.divide(block, norms, out=block, where=norms > 0)
    return m


def ranked(scores: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Per row of ``scores`` (m, n), the ``k`` best ``(column, score)`` pairs: score descending,
    equal scores by column ascending. Scores are rounded to 6 decimals first (``-0.0`` becomes
    ``0.0``), so float noise cannot reorder equal documents."""
    scores = np.round(np.asarray(scores, dtype=np.float64), _SCORE_DECIMALS) + 0.0
    n = scores.shape[1]
    k = min(int(k), n)
    if k <= 0:
        return [[] for _ in range(scores.shape[0])]
    if k < n:
        # k-th best score per query; every column scoring at least that is a candidate, so a tie at
        # the cut-off is resolved by column index, not by argpartition's internal order.
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(scores, part, axis=1).min(axis=1)
    results: list[list[tuple[int, float]]] = []
    for r, row in enumerate(scores):
        cand = np.flatnonzero(row >= kth[r]) if k < n else np.arange(n)
        order = cand[np.lexsort((cand, -row[cand]))][:k]
        results.append([(int(i), float(row[i])) for i in order])
    return results


class VectorIndex:
    """``embeddings`` (n, d) with one id per row. Rows are L2-normalised on the way in, so
    :meth:`search` returns cosine similarities whatever the embedder produced (a zero row scores
    0 against everything).

    ``copy=True`` (the default) never modifies the caller's array. ``copy=False`` is for an array
    the caller hands over (the builtin app's fresh embeddings): a C-contiguous float32 array is then
    normalised in place and kept, not copied; any other array is converted once, as with
    ``copy=True``.
    """

    def __init__(self, embeddings: np.ndarray, ids: Sequence[str], *, copy: bool = True) -> None:
        ids = list(ids)
        matrix = np.asarray(embeddings)
        if matrix.ndim != 2:
            if matrix.size == 0 and not ids:
                matrix = matrix.reshape(0, 0)
            else:
                raise ValueError(f"VectorIndex: embeddings must be a 2-d (n, d) array, got shape {matrix.shape}")
        if matrix.shape[0] != len(ids):
            raise ValueError(f"VectorIndex: {matrix.shape[0]} embedding rows but {len(ids)} ids")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            duplicate = next(i for i in ids if i in seen or seen.add(i))
            raise ValueError(f"VectorIndex: duplicate id {duplicate!r}")
        if not all(np.isfinite(matrix[s:s + _NORM_ROWS]).all() for s in range(0, matrix.shape[0], _NORM_ROWS)):
            raise ValueError("VectorIndex: embeddings contain NaN or infinite values")
        owned = (not copy and matrix.dtype == np.float32 and matrix.flags.c_contiguous
                 and matrix.flags.writeable)
        self._matrix = _normalise_in_place(matrix if owned else np.array(matrix, dtype=np.float32))
        self.ids: tuple[str, ...] = tuple(ids)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self._matrix.shape[1])

    def search(self, query_vectors: np.ndarray, top_k: int) -> list[list[tuple[int, float]]]:
        """For each query row, up to ``top_k`` ``(row index, cosine)`` pairs, best first.

        A 1-d ``query_vectors`` is one query. ``top_k`` beyond the index size returns every row;
        an empty index returns an empty list per query.
        """
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
            raise ValueError(f"VectorIndex.search: top_k must be a non-negative integer, got {top_k!r}")
        queries = np.asarray(query_vectors)
        if queries.ndim == 1:
            queries = queries.reshape(1, -1)
        if queries.ndim != 2:
            raise ValueError(f"VectorIndex.search: query_vectors must be (m, d) or (d,), got shape {queries.shape}")
        n = len(self.ids)
        if n == 0 or top_k == 0:
            return [[] for _ in range(queries.shape[0])]
        if queries.shape[1] != self.dim:
            raise ValueError(
                f"VectorIndex.search: queries have dimension {queries.shape[1]}, the index has {self.dim}; "
                "embed queries with the same embedder as the documents"
            )
        if not np.isfinite(queries).all():
            raise ValueError("VectorIndex.search: query vectors contain NaN or infinite values")
        batch = max(1, min(_QUERY_BATCH, _SCORES_PER_BATCH // n))
        results: list[list[tuple[int, float]]] = []
        for start in range(0, queries.shape[0], batch):
            block = _normalise_in_place(np.array(queries[start:start + batch], dtype=np.float32))
            results.extend(ranked(block @ self._matrix.T, top_k))
        return results

    def __repr__(self) -> str:
        return f"VectorIndex(n={len(self.ids)}, dim={self.dim})"

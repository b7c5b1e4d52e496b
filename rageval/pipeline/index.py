"""An in-memory vector index: cosine top-k over a dense numpy matrix.

Exact search (no approximation), one matrix product per batch of queries. Results are
deterministic: sorted by score descending, equal scores by row index ascending. Scores are
rounded to 6 decimals before ranking so that float noise in the matrix product (which can differ
in the last bits between two identical documents) cannot reorder documents that are equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["VectorIndex"]

_SCORE_DECIMALS = 6
_QUERY_BATCH = 256      # queries per matrix product; bounds the (batch, n) score matrix


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    m = np.array(matrix, dtype=np.float32)  # copy: the caller's array is never modified
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    np.divide(m, norms, out=m, where=norms > 0)
    return m


class VectorIndex:
    """``embeddings`` (n, d) with one id per row. Rows are L2-normalised on the way in, so
    :meth:`search` returns cosine similarities whatever the embedder produced (a zero row scores
    0 against everything)."""

    def __init__(self, embeddings: np.ndarray, ids: Sequence[str]) -> None:
        ids = list(ids)
        matrix = np.asarray(embeddings)
        if matrix.ndim != 2:
            if matrix.size == 0 and not ids:
                matrix = matrix.reshape(0, 0)
            else:
                raise ValueError(f"VectorIndex: embeddings must be a 2-d (n, d) array, got shape {matrix.shape}")
        if matrix.shape[0] != len(ids):
            raise ValueError(f"VectorIndex: {matrix.shape[0]} embedding rows but {len(ids)} ids")
        seen: set[str] = set()
        for chunk_id in ids:
            if chunk_id in seen:
                raise ValueError(f"VectorIndex: duplicate id {chunk_id!r}")
            seen.add(chunk_id)
        if not np.isfinite(matrix).all():
            raise ValueError("VectorIndex: embeddings contain NaN or infinite values")
        self._matrix = _unit_rows(matrix)
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
        k = min(int(top_k), n)
        results: list[list[tuple[int, float]]] = []
        for start in range(0, queries.shape[0], _QUERY_BATCH):
            block = _unit_rows(queries[start:start + _QUERY_BATCH])
            # "+ 0.0" turns a rounded -0.0 into 0.0
            scores = np.round((block @ self._matrix.T).astype(np.float64), _SCORE_DECIMALS) + 0.0
            if k < n:
                # k-th best score per query; every row scoring at least that is a candidate, so a
                # tie at the cut-off is resolved by row index, not by argpartition's internal order.
                part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
                kth = np.take_along_axis(scores, part, axis=1).min(axis=1)
            for r, row in enumerate(scores):
                cand = np.flatnonzero(row >= kth[r]) if k < n else np.arange(n)
                order = cand[np.lexsort((cand, -row[cand]))][:k]
                results.append([(int(i), float(row[i])) for i in order])
        return results

    def __repr__(self) -> str:
        return f"VectorIndex(n={len(self.ids)}, dim={self.dim})"

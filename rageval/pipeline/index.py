"""An in-memory vector index: cosine top-k over float32 rows, dense or sparse.

Exact search (no approximation), one matrix product per batch of queries. Results are
deterministic: sorted by score descending, equal scores by row index ascending. Scores are
rounded to 6 decimals before ranking so that float noise in the matrix product (which can differ
in the last bits between two identical documents) cannot reorder documents that are equal.

Memory: the index holds one float32 copy of the embeddings, or none with ``copy=False`` (it then
normalises the caller's array in place). Embeddings that are mostly zeros (the local embedder's:
30–40 % of 2,048 hashed buckets are used by a chunk) may be given as :class:`SparseRows`, non-zero
entries only, about half the bytes of the dense float32 matrix (100,000 chunks: ~470 MB instead of
819 MB); the index multiplies them 1,024 rows at a time, made dense for the product, so the scores
are bit for bit those of the dense matrix. Queries are scored in runs whose score matrix stays near
2 million entries, at most 256 queries per matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["SparseRows", "VectorIndex", "ranked"]

_SCORE_DECIMALS = 6
_QUERY_BATCH = 256          # queries per matrix product at most …
_SCORES_PER_BATCH = 1 << 21  # … and about this many (query, row) scores per run of queries
_NORM_ROWS = 1024           # rows normalised, or made dense for a product, per step


class SparseRows:
    """A (n, dim) matrix of mostly-zero rows: the non-zero entries of consecutive row blocks, as
    appended. A block keeps, per row, how many entries it has, then their columns (ascending)
    and values, row after row (CSR without the offsets)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (entries per row, columns, values)
        self._starts = [0]                                                    # first row of each block, then n

    @property
    def shape(self) -> tuple[int, int]:
        return self._starts[-1], self.dim

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for block in self._blocks for a in block)

    def append(self, rows: np.ndarray, dtype: type | None = None) -> None:
        """Add ``rows`` (a dense (b, dim) block); only their non-zero entries are kept, as ``dtype``
        (default: the block's own)."""
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise ValueError(f"SparseRows.append: expected a (b, {self.dim}) block, got shape {rows.shape}")
        flat = np.flatnonzero(rows)            # row-major: row by row, columns ascending
        column_type = np.int16 if self.dim <= np.iinfo(np.int16).max + 1 else np.int32
        per_row = np.bincount(flat // self.dim, minlength=len(rows)).astype(np.int32)
        self.append_entries(per_row, (flat % self.dim).astype(column_type),
                            rows.reshape(-1)[flat].astype(dtype or rows.dtype))

    def append_entries(self, per_row: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
        """Add a block given as entries per row, columns and values (row after row)."""
        self._blocks.append((per_row, columns, values))
        self._starts.append(self._starts[-1] + len(per_row))

    def take_blocks(self):
        """(entries per row, columns, values) of each block, first to last, each removed from these
        rows as it is handed out (the rows are empty afterwards)."""
        blocks, self._blocks, self._starts = self._blocks, [], [0]
        blocks.reverse()
        while blocks:
            yield blocks.pop()

    def blocks(self):
        """(first row, entries per row, columns, values) of each block."""
        for i, (per_row, columns, values) in enumerate(self._blocks):
            yield self._starts[i], per_row, columns, values

    def _overlaps(self, start: int, stop: int):
        """(rows in the block, row index in [start, stop), columns, values) of the entries of rows
        start..stop-1, block by block."""
        for first, per_row, columns, values in self.blocks():
            lo, hi = max(start, first) - first, min(stop, first + len(per_row)) - first
            if lo >= hi:
                continue
            offsets = np.concatenate([[0], np.cumsum(per_row, dtype=np.int64)])
            span = slice(int(offsets[lo]), int(offsets[hi]))
            rows = np.repeat(np.arange(lo + first - start, hi + first - start), per_row[lo:hi])
            yield rows, columns[span], values, span

    def dense(self, start: int = 0, stop: int | None = None, dtype: type = np.float32) -> np.ndarray:
        """Rows start..stop-1 as a dense array."""
        stop = self.shape[0] if stop is None else stop
        out = np.zeros((stop - start, self.dim), dtype=dtype)
        for rows, columns, values, span in self._overlaps(start, stop):
            out[rows, columns] = values[span]
        return out

    def assign(self, start: int, dense: np.ndarray) -> None:
        """Overwrite the stored entries of rows start.. with those of ``dense`` (same zero pattern)."""
        for rows, columns, values, span in self._overlaps(start, start + len(dense)):
            values[span] = dense[rows, columns]

    def all_finite(self) -> bool:
        return all(np.isfinite(values).all() for _, _, values in self._blocks)

    def normalise(self) -> None:
        """Unit rows, in place: each 1,024 rows made dense in float32, scaled as a dense matrix would
        be, and stored back."""
        for start, part in self.parts():
            self.assign(start, _unit(part))

    def parts(self):
        """(first row, float32 dense rows) of consecutive groups of 1,024 rows."""
        n = self.shape[0]
        for start in range(0, n, _NORM_ROWS):
            yield start, self.dense(start, min(n, start + _NORM_ROWS))


def _unit(block: np.ndarray) -> np.ndarray:
    """``block``'s rows scaled to unit length in place (float32); all-zero rows stay zero."""
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    np.divide(block, norms, out=block, where=norms > 0)
    return block


class _DenseRows:
    """A dense float32 (n, dim) array behind the interface of :class:`SparseRows`."""

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix
        self.dim = matrix.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    def all_finite(self) -> bool:
        return all(np.isfinite(self.matrix[s:s + _NORM_ROWS]).all() for s in range(0, self.shape[0], _NORM_ROWS))

    def normalise(self) -> None:
        for start in range(0, self.shape[0], _NORM_ROWS):
            _unit(self.matrix[start:start + _NORM_ROWS])

    def parts(self):
        yield 0, self.matrix


def ranked(scores: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    """Per row of ``scores`` (m, n), the ``k`` best ``(column, score)`` pairs: score descending,
    equal scores by column ascending. Scores are rounded to 6 decimals first (as float64; ``-0.0``
    becomes ``0.0``), so float noise cannot reorder equal documents.

    Only candidates are rounded: rounding moves a score by at most 5e-7, so every column whose
    rounded score can reach the k-th best rounded score is within 1e-6 of the k-th best raw score."""
    scores = np.asarray(scores)
    n = scores.shape[1]
    k = min(int(k), n)
    if k <= 0:
        return [[] for _ in range(scores.shape[0])]
    if k < n:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        floor = np.take_along_axis(scores, part, axis=1).min(axis=1).astype(np.float64) - 1e-6
    results: list[list[tuple[int, float]]] = []
    for r, raw in enumerate(scores):
        cand = np.flatnonzero(raw >= floor[r]) if k < n else np.arange(n)
        value = np.round(raw[cand].astype(np.float64), _SCORE_DECIMALS) + 0.0
        order = np.lexsort((cand, -value))[:k]
        results.append([(int(cand[i]), float(value[i])) for i in order])
    return results


class VectorIndex:
    """``embeddings`` (n, d) with one id per row. Rows are L2-normalised on the way in, so
    :meth:`search` returns cosine similarities whatever the embedder produced (a zero row scores
    0 against everything).

    ``copy=True`` (the default) never modifies the caller's embeddings. ``copy=False`` is for
    embeddings the caller hands over (the builtin app's fresh ones): :class:`SparseRows` and a
    C-contiguous float32 array are then normalised in place and kept, not copied; any other
    array is converted once, as with ``copy=True``.
    """

    def __init__(self, embeddings: np.ndarray | SparseRows, ids: Sequence[str], *, copy: bool = True) -> None:
        ids = list(ids)
        rows = _rows(embeddings, ids, copy)
        if rows.shape[0] != len(ids):
            raise ValueError(f"VectorIndex: {rows.shape[0]} embedding rows but {len(ids)} ids")
        if len(set(ids)) != len(ids):
            seen: set[str] = set()
            duplicate = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
            raise ValueError(f"VectorIndex: duplicate id {duplicate!r}")
        if not rows.all_finite():
            raise ValueError("VectorIndex: embeddings contain NaN or infinite values")
        rows.normalise()
        self._rows = rows
        self.ids: tuple[str, ...] = tuple(ids)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self._rows.dim)

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
        # Queries in runs whose score matrix stays near 16M entries; the rows are made dense (when
        # sparse) once per run; the products take at most 256 queries, as they always have.
        run = max(1, _SCORES_PER_BATCH // n)
        results: list[list[tuple[int, float]]] = []
        for start in range(0, queries.shape[0], run):
            block = _unit(np.array(queries[start:start + run], dtype=np.float32))
            scores = np.empty((len(block), n), dtype=np.float32)
            for first, part in self._rows.parts():
                for q in range(0, len(block), _QUERY_BATCH):
                    scores[q:q + _QUERY_BATCH, first:first + len(part)] = block[q:q + _QUERY_BATCH] @ part.T
            results.extend(ranked(scores, top_k))
        return results

    def __repr__(self) -> str:
        return f"VectorIndex(n={len(self.ids)}, dim={self.dim})"


def _rows(embeddings: np.ndarray | SparseRows, ids: list[str], copy: bool) -> SparseRows | _DenseRows:
    if isinstance(embeddings, SparseRows):
        if copy or any(values.dtype != np.float32 for _, _, _, values in embeddings.blocks()):
            rows = SparseRows(embeddings.dim)
            for _, per_row, columns, values in embeddings.blocks():
                rows.append_entries(per_row, columns, values.astype(np.float32))   # astype copies
            return rows
        return embeddings
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2:
        if matrix.size == 0 and not ids:
            matrix = matrix.reshape(0, 0)
        else:
            raise ValueError(f"VectorIndex: embeddings must be a 2-d (n, d) array, got shape {matrix.shape}")
    owned = not copy and matrix.dtype == np.float32 and matrix.flags.c_contiguous and matrix.flags.writeable
    return _DenseRows(matrix if owned else np.array(matrix, dtype=np.float32))

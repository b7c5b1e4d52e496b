"""An in-memory vector index: cosine top-k over float32 rows, dense or sparse.

Exact search (no approximation), with scores that do not depend on the machine: a score is the
float64 sum, in one fixed order, of the products of the query's and the row's float32 unit vectors,
rounded to 6 decimals (:mod:`rageval.pipeline.shortlist` defines it); results are sorted by score
descending, equal scores by row index ascending. Neither the batch of queries, the BLAS kernel nor
the CPU can move a score's sixth decimal or reorder two rows.

How it is fast: the rows are searched in parts of 1,024. Each part is scored against up to 2,048
queries at once by one float32 matrix product (BLAS), which shortlists, per query, the rows that
can still reach its top k (the product's error is bounded); only those are then scored exactly.
Work is linear in the number of rows: one pass over the rows per 2,048 queries, plus one over the
parts holding a shortlisted row; memory, a part's scores per query block and the shortlists.

Memory: the index holds one float32 copy of the embeddings, or none with ``copy=False`` (it then
normalises the caller's array in place). Embeddings that are mostly zeros (the local embedder's:
30–40 % of 2,048 hashed buckets are used by a chunk) may be given as :class:`SparseRows`, non-zero
entries only, about half the bytes of the dense float32 matrix (100,000 chunks: ~430 MB instead
of 819 MB); each part of those is made dense (8 MB) when it is scored. Dense rows would be the form
the product wants, but at 1M chunks they take 8.2 GB; made dense part by part, they cost a few per
cent of the product's time.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from rageval.pipeline.hits import Hits
from rageval.pipeline.shortlist import QueryTerms, Shortlist, exact_top, ranked_top

__all__ = ["SparseRows", "VectorIndex"]

_PART_ROWS = 1024            # rows made dense, normalised or scored at once
_QUERY_BLOCK = 2048          # queries scored against each part at once


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

    def _slices(self, start: int = 0, stop: int | None = None):
        """(row in [start, stop), rows of the slice in its block, columns, values, entries) of the
        entries of rows start..stop-1, in slices of at most 1,024 rows of one block each."""
        stop = self.shape[0] if stop is None else stop
        for i in range(max(0, bisect.bisect_right(self._starts, start) - 1), len(self._blocks)):
            first, (per_row, columns, values) = self._starts[i], self._blocks[i]
            if first >= stop:
                break
            lo, hi = max(start, first) - first, min(stop, first + len(per_row)) - first
            if lo >= hi:
                continue
            offsets = np.concatenate([[0], np.cumsum(per_row, dtype=np.int64)])
            for a in range(lo, hi, _PART_ROWS):
                b = min(hi, a + _PART_ROWS)
                rows = np.repeat(np.arange(a + first - start, b + first - start), per_row[a:b])
                yield rows, columns, values, slice(int(offsets[a]), int(offsets[b]))

    def dense(self, start: int = 0, stop: int | None = None, dtype: type = np.float32) -> np.ndarray:
        """Rows start..stop-1 as a dense array."""
        stop = self.shape[0] if stop is None else stop
        out = np.zeros((stop - start, self.dim), dtype=dtype)
        for rows, columns, values, span in self._slices(start, stop):
            out[rows, columns[span]] = values[span]
        return out

    def all_finite(self) -> bool:
        return all(np.isfinite(values).all() for _, _, values in self._blocks)

    def normalise(self) -> None:
        """Unit rows, in place: at most 1,024 rows at a time made dense in float32, scaled as a dense
        matrix's rows would be (the same bits), and stored back."""
        for rows, columns, values, span in self._slices():
            top = int(rows[-1]) + 1 if len(rows) else 0
            first = int(rows[0]) if len(rows) else 0
            part = np.zeros((top - first, self.dim), dtype=np.float32)
            local = rows - first
            part[local, columns[span]] = values[span]
            values[span] = _unit(part)[local, columns[span]]

    def parts(self, wanted: np.ndarray | None = None):
        """(first row, float32 dense rows) of consecutive parts of 1,024 rows (the last may be
        shorter). With ``wanted`` (row numbers, ascending, distinct): only the parts holding one of
        them, and in those only the wanted rows are made dense (the others hold stale values: read
        the wanted rows only), so scoring a few rows costs those rows, not their parts. The array
        is one buffer, overwritten by the next part."""
        n, buffer = self.shape[0], np.zeros((min(_PART_ROWS, self.shape[0]), self.dim), dtype=np.float32)
        if wanted is not None:
            wanted = np.asarray(wanted, dtype=np.int64)
        for start in _starts(n, wanted):
            part = buffer[:min(_PART_ROWS, n - start)]
            if wanted is None:
                part.fill(0.0)
                for rows, columns, values, span in self._slices(start, start + len(part)):
                    flat = rows * self.dim                   # one flat index: half the time of (row, column)
                    flat += columns[span]
                    part.reshape(-1)[flat] = values[span]
            else:
                lo, hi = np.searchsorted(wanted, [start, start + len(part)])
                self._fill(part, start, wanted[lo:hi])
            yield start, part

    def _fill(self, part: np.ndarray, start: int, rows: np.ndarray) -> None:
        """Make ``rows`` (ascending, in start..start + len(part) - 1) dense in ``part``."""
        part[rows - start] = 0.0
        for i in range(bisect.bisect_right(self._starts, int(rows[0])) - 1, len(self._blocks)):
            first, (per_row, columns, values) = self._starts[i], self._blocks[i]
            if first > rows[-1]:
                break
            lo, hi = np.searchsorted(rows, [first, first + len(per_row)])
            local = rows[lo:hi] - first
            count = per_row[local].astype(np.int64)
            begin = (np.cumsum(per_row, dtype=np.int64) - per_row)[local]
            pos = np.arange(int(count.sum()), dtype=np.int64) + np.repeat(begin - (np.cumsum(count) - count), count)
            flat = np.repeat((rows[lo:hi] - start) * self.dim, count)
            flat += columns[pos]
            part.reshape(-1)[flat] = values[pos]


def _starts(n: int, wanted: np.ndarray | None) -> list[int]:
    """First rows of the parts of n rows (those holding one of the ``wanted`` rows, if given)."""
    if wanted is None:
        return list(range(0, n, _PART_ROWS))
    return (np.unique(np.asarray(wanted) // _PART_ROWS) * _PART_ROWS).tolist()


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
        return all(np.isfinite(self.matrix[s:s + _PART_ROWS]).all() for s in range(0, self.shape[0], _PART_ROWS))

    def normalise(self) -> None:
        for start in range(0, self.shape[0], _PART_ROWS):
            _unit(self.matrix[start:start + _PART_ROWS])

    def parts(self, wanted: np.ndarray | None = None):
        for start in _starts(self.shape[0], wanted):
            yield start, self.matrix[start:start + _PART_ROWS]

    def dense(self, start: int, stop: int) -> np.ndarray:
        """A float32 copy of rows start..stop-1."""
        return np.array(self.matrix[start:stop], dtype=np.float32)


def _query_rows(queries: np.ndarray | SparseRows) -> SparseRows | _DenseRows:
    """Query vectors as rows: a 1-d array is one query."""
    if isinstance(queries, SparseRows):
        return queries
    matrix = np.asarray(queries)
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.ndim != 2:
        raise ValueError(f"VectorIndex.search: query_vectors must be (m, d) or (d,), got shape {matrix.shape}")
    return _DenseRows(matrix)


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
        return self.search_hits(query_vectors, top_k).lists()

    def search_hits(self, query_vectors: np.ndarray | SparseRows, top_k: int, *, scores: bool = True) -> Hits:
        """:meth:`search`, as arrays; the queries may also be :class:`SparseRows`. ``scores=False``
        gives the same rows in the same order with float32 approximations of their scores (within
        the margin of :mod:`rageval.pipeline.shortlist`): a ranking, as reciprocal-rank fusion uses
        it, for which only rows closer than that margin need scoring exactly."""
        if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 0:
            raise ValueError(f"VectorIndex.search: top_k must be a non-negative integer, got {top_k!r}")
        queries = _query_rows(query_vectors)
        m, n = queries.shape[0], len(self.ids)
        if n == 0 or top_k == 0 or m == 0:
            return Hits.empty(m)
        if queries.shape[1] != self.dim:
            raise ValueError(
                f"VectorIndex.search: queries have dimension {queries.shape[1]}, the index has {self.dim}; "
                "embed queries with the same embedder as the documents"
            )
        if not queries.all_finite():
            raise ValueError("VectorIndex.search: query vectors contain NaN or infinite values")
        k, pairs, blocks = min(int(top_k), n), [], []
        for start in range(0, m, _QUERY_BLOCK):
            block = _unit(queries.dense(start, min(m, start + _QUERY_BLOCK)))
            blocks.append(QueryTerms(block))
            shortlist = Shortlist(blocks[-1].margin, k)
            for first, part in self._rows.parts():
                shortlist.offer(block @ part.T, first)
            which, rows, approx = shortlist.pairs()
            pairs.append((which + start, rows, approx))
        which, rows, approx = (np.concatenate(x) for x in zip(*pairs))
        terms = QueryTerms.joined(blocks)
        if not scores:
            return ranked_top(terms, which, rows, approx, self._rows.parts, k, m)
        return exact_top(terms, which, rows, self._rows.parts(np.unique(rows)), k, m)

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

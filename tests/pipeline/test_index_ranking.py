"""VectorIndex.search_hits(..., scores=False): the ranking hybrid fusion reads, found without scoring
every shortlisted row exactly. Its rows must be those of the exact search, in the same order, and
both must be the ranking of an independent reference: cosines computed here in float64 by numpy
from the float32 unit vectors (the vectors a score is defined on: rageval.pipeline.shortlist),
rounded to 6 decimals, equal scores by row ascending (the rule of rageval.pipeline.hits)."""

from __future__ import annotations

import numpy as np
import pytest

from rageval.pipeline.index import SparseRows, VectorIndex


def _reference(docs: np.ndarray, queries: np.ndarray, k: int) -> list[list[int]]:
    """Per query, the rows of the k best cosines (float64 products of the float32 unit vectors, 6
    decimals), equal ones by row."""
    def unit(x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(x).astype(np.float32)
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(np.float64)

    cos = np.round(unit(queries) @ unit(docs).T, 6) + 0.0
    order = np.lexsort((np.broadcast_to(np.arange(cos.shape[1]), cos.shape), -cos), axis=1)
    return order[:, :k].tolist()


def _rows(hits) -> list[list[int]]:
    return [[r for r in row if r >= 0] for row in hits.rows.tolist()]


def _sparse(rng: np.random.Generator, n: int, dim: int, density: float, levels: int = 0) -> np.ndarray:
    """Non-negative float32 rows, mostly zeros; ``levels``: values drawn from 1..levels only, so many
    rows score the same or almost the same (ties and near-ties across the float32 margin)."""
    mask = rng.random((n, dim)) < density
    values = rng.integers(1, levels + 1, (n, dim)) if levels else rng.random((n, dim))
    return (values * mask).astype(np.float32)


def _index(docs: np.ndarray, sparse: bool) -> VectorIndex:
    ids = [f"c{i}" for i in range(len(docs))]
    if not sparse:
        return VectorIndex(docs, ids)
    rows = SparseRows(docs.shape[1])
    for start in range(0, len(docs), 700):
        rows.append(docs[start:start + 700])
    return VectorIndex(rows, ids, copy=False)


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(("levels", "k"), [(0, 7), (2, 25), (3, 100), (1, 60)])
def test_ranking_is_the_exact_search_and_the_float64_reference(sparse, levels, k):
    # 2,600 rows (three parts), 2,100 queries (two query blocks) or 500; empty rows and zero queries
    # among them; levels 1..3 make most scores tie or lie within the float32 margin of each other.
    rng = np.random.default_rng(100 + 10 * levels + k)
    docs = _sparse(rng, 2600, 48, 0.3, levels)
    docs[rng.choice(2600, 40, replace=False)] = 0.0                       # empty rows: cosine 0
    docs[2000:2100] = docs[100:200]                                      # duplicates: the same cosines
    docs[2100:2200] = docs[200:300] * 3.0                                # almost: other float32 unit vectors
    m = 2100 if levels == 2 else 500
    queries = _sparse(rng, m, 48, 0.1, levels)
    queries[rng.choice(m, 30, replace=False)] = 0.0                      # zero queries: every row ties at 0
    index = _index(docs, sparse)
    ranked = index.search_hits(queries, k, scores=False)
    exact = index.search_hits(queries, k)
    assert np.array_equal(ranked.rows, exact.rows)
    assert _rows(ranked) == _reference(docs, queries, k)
    assert np.abs(ranked.scores - exact.scores).max() < 1e-4                # float32 approximations


def test_zero_query_ranks_rows_in_order_and_top_k_beyond_the_index_returns_all():
    rng = np.random.default_rng(5)
    docs = _sparse(rng, 30, 16, 0.4)
    docs[3] = 0.0
    queries = np.vstack([np.zeros(16), _sparse(rng, 1, 16, 0.5)])
    hits = _index(docs, True).search_hits(queries, 500, scores=False)
    assert hits.rows.shape == (2, 30)
    assert hits.rows[0].tolist() == list(range(30))                     # all score 0: by row
    assert _rows(hits) == _reference(docs, queries, 500)


def test_sparse_queries_give_the_same_ranking_as_dense_ones():
    rng = np.random.default_rng(6)
    docs = _sparse(rng, 1500, 32, 0.3, 2)
    queries = _sparse(rng, 300, 32, 0.15, 2)
    sparse_queries = SparseRows(32)
    sparse_queries.append(queries)
    index = _index(docs, True)
    ranked = index.search_hits(sparse_queries, 40, scores=False)
    assert np.array_equal(ranked.rows, index.search_hits(queries, 40, scores=False).rows)
    assert _rows(ranked) == _reference(docs, queries, 40)


def test_equal_rows_deeper_than_a_part_keep_row_order():
    row = np.zeros(8, dtype=np.float32)
    row[:2] = [3.0, 4.0]
    index = _index(np.tile(row, (3000, 1)), False)
    hits = index.search_hits(np.array([1.0, 0, 0, 0, 0, 0, 0, 0]), 1500, scores=False)
    assert hits.rows[0].tolist() == list(range(1500))


@pytest.mark.parametrize("k", [0, 3])
def test_empty_cases(k):
    empty = VectorIndex(np.zeros((0, 4), dtype=np.float32), [])
    assert empty.search_hits(np.ones((2, 4)), k, scores=False).rows.shape == (2, 0)
    three = _index(np.eye(3, 4, dtype=np.float32), True)
    assert three.search_hits(np.zeros((0, 4)), k, scores=False).rows.shape[0] == 0


def test_parts_of_wanted_rows_hold_those_rows_exactly():
    # Scoring a shortlist makes dense only its rows, in the parts that hold them, from several
    # appended blocks (a part of 1,024 rows spans blocks of 700 here); the rows must be exact.
    rng = np.random.default_rng(8)
    docs = _sparse(rng, 3000, 24, 0.3)
    rows = SparseRows(24)
    for start in range(0, 3000, 700):
        rows.append(docs[start:start + 700])
    wanted = np.array([0, 5, 699, 700, 1023, 1024, 1400, 2047, 2999])
    seen = []
    for first, part in rows.parts(wanted):
        mine = wanted[(wanted >= first) & (wanted < first + len(part))]
        assert np.array_equal(part[mine - first], docs[mine])
        seen += mine.tolist()
    assert seen == wanted.tolist()

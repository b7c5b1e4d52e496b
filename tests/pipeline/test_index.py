"""VectorIndex: exact cosine top-k, deterministic order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rageval.pipeline.index import SparseRows, VectorIndex

S = 1 / math.sqrt(2)  # 0.7071067…


@pytest.fixture
def three() -> VectorIndex:
    # Deliberately not unit length: the index normalises, so scores are cosines.
    return VectorIndex(np.array([[1, 0, 0], [2, 2, 0], [0, 0, 3]], dtype=np.float32), ["x", "y", "z"])


def test_hand_computed_cosines(three):
    res = three.search(np.array([[1, 0, 0], [0, 1, 1]], dtype=np.float32), top_k=3)
    # q1 = e1: cos = 1, 1/√2, 0.   q2 = (0,1,1)/√2: cos = 0, 1/2, 1/√2.
    assert [i for i, _ in res[0]] == [0, 1, 2]
    assert [s for _, s in res[0]] == pytest.approx([1.0, S, 0.0], abs=1e-6)
    assert [i for i, _ in res[1]] == [2, 1, 0]
    assert [s for _, s in res[1]] == pytest.approx([S, 0.5, 0.0], abs=1e-6)
    assert all(isinstance(i, int) and isinstance(s, float) for i, s in res[0] + res[1])


def test_top_k_cuts_and_keeps_best_first(three):
    assert [i for i, _ in three.search(np.array([0, 1, 1]), top_k=1)[0]] == [2]
    assert [i for i, _ in three.search(np.array([[0, 1, 1]]), top_k=2)[0]] == [2, 1]


def test_one_dimensional_query_is_one_query(three):
    assert three.search(np.array([1.0, 0.0, 0.0]), 2) == three.search(np.array([[1.0, 0.0, 0.0]]), 2)


def test_ties_are_broken_by_row_index():
    v, w = [1.0, 2.0, 3.0], [3.0, 2.0, 1.0]
    index = VectorIndex(np.array([w, v, w, v, v]), list("abcde"))
    res = index.search(np.array([v]), top_k=5)[0]
    assert [i for i, _ in res] == [1, 3, 4, 0, 2]
    assert [s for _, s in res] == pytest.approx([1, 1, 1, 10 / 14, 10 / 14], abs=1e-6)


def test_tie_at_the_cut_off_takes_the_lowest_rows():
    # 40 different rows, then 60 identical best rows: argpartition may pick any of the 60;
    # the result must be the first five of them, in row order, every time.
    rng = np.random.default_rng(7)
    others = rng.normal(size=(40, 16))
    others[:, 0] = -np.abs(others[:, 0]) - 1  # all point away from the query
    best = np.zeros((60, 16))
    best[:, 0] = 2.0
    index = VectorIndex(np.vstack([others, best]), [f"c{i}" for i in range(100)])
    query = np.zeros(16)
    query[0] = 1.0
    for _ in range(3):
        assert index.search(query, top_k=5)[0] == [(i, 1.0) for i in range(40, 45)]


def test_top_k_larger_than_index_returns_all(three):
    res = three.search(np.array([[0, 1, 1]]), top_k=50)[0]
    assert [i for i, _ in res] == [2, 1, 0]


def test_top_k_zero_returns_nothing(three):
    assert three.search(np.array([[1, 0, 0], [0, 1, 0]]), top_k=0) == [[], []]


@pytest.mark.parametrize("embeddings", [np.zeros((0, 3), dtype=np.float32), np.zeros((0,))])
def test_empty_index_returns_empty_results(embeddings):
    index = VectorIndex(embeddings, [])
    assert len(index) == 0
    assert index.search(np.ones((2, 3)), top_k=5) == [[], []]


def test_zero_vector_scores_zero_not_nan():
    index = VectorIndex(np.array([[0.0, 0.0], [1.0, 0.0]]), ["empty", "x"])
    assert index.search(np.array([[1.0, 0.0]]), 2) == [[(1, 1.0), (0, 0.0)]]
    assert index.search(np.array([[0.0, 0.0]]), 2) == [[(0, 0.0), (1, 0.0)]]


def test_matches_brute_force_across_query_batches():
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(200, 24)).astype(np.float32)
    queries = rng.normal(size=(600, 24)).astype(np.float32)  # more than one internal batch
    index = VectorIndex(docs, [str(i) for i in range(200)])
    res = index.search(queries, top_k=7)
    unit_d = docs / np.linalg.norm(docs, axis=1, keepdims=True)
    unit_q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    ref = unit_q.astype(np.float64) @ unit_d.T.astype(np.float64)
    for qi in (0, 255, 256, 599):
        want = np.argsort(-ref[qi], kind="stable")[:7]
        assert [i for i, _ in res[qi]] == list(want)
        assert [s for _, s in res[qi]] == pytest.approx(ref[qi][want], abs=1e-5)
    assert len(res) == 600


def test_caller_arrays_are_not_modified():
    docs = np.array([[3.0, 4.0]], dtype=np.float32)
    query = np.array([[0.0, 2.0]], dtype=np.float32)
    index = VectorIndex(docs, ["a"])
    assert index.search(query, 1) == [[(0, 0.8)]]
    assert docs.tolist() == [[3.0, 4.0]] and query.tolist() == [[0.0, 2.0]]


@pytest.mark.parametrize(
    ("embeddings", "ids", "message"),
    [
        (np.ones((2, 3)), ["a"], "2 embedding rows but 1 ids"),
        (np.ones((2, 3)), ["a", "a"], "duplicate id 'a'"),
        (np.ones(3), ["a"], "2-d"),
        (np.array([[1.0, np.nan]]), ["a"], "NaN"),
    ],
)
def test_bad_index_input(embeddings, ids, message):
    with pytest.raises(ValueError, match=message):
        VectorIndex(embeddings, ids)


@pytest.mark.parametrize(
    ("query", "top_k", "message"),
    [
        (np.ones((1, 4)), 3, "dimension 4, the index has 3"),
        (np.ones((1, 3)), -1, "non-negative"),
        (np.ones((1, 3)), 2.5, "non-negative integer"),
        (np.ones((1, 1, 3)), 3, r"\(m, d\)"),
        (np.array([[np.inf, 0, 0]]), 3, "NaN or infinite"),
    ],
)
def test_bad_search_input(three, query, top_k, message):
    with pytest.raises(ValueError, match=message):
        three.search(query, top_k)


# --- memory: no copy, sparse rows ------------------------------------------------------------

def test_copy_false_keeps_the_callers_float32_array_and_scores_the_same():
    rng = np.random.default_rng(1)
    docs = rng.normal(size=(50, 8)).astype(np.float32)
    queries = rng.normal(size=(9, 8)).astype(np.float32)
    copied = VectorIndex(docs, [str(i) for i in range(50)]).search(queries, 6)
    handed_over = docs.copy()
    index = VectorIndex(handed_over, [str(i) for i in range(50)], copy=False)
    assert index.search(queries, 6) == copied
    assert np.shares_memory(index._rows.matrix, handed_over)                  # no second matrix
    assert np.allclose(np.linalg.norm(handed_over, axis=1), 1.0, atol=1e-6)   # normalised in place


def test_copy_false_with_another_dtype_still_converts():
    docs = np.array([[3.0, 4.0]])                     # float64: cannot be kept as it is
    VectorIndex(docs, ["a"], copy=False)
    assert docs.tolist() == [[3.0, 4.0]]


def test_sparse_rows_round_trip_and_give_bit_identical_scores():
    rng = np.random.default_rng(2)
    dense = rng.normal(size=(9000, 64)).astype(np.float32)
    dense[rng.random(dense.shape) < 0.7] = 0.0
    dense[5] = 0.0                                    # an empty row stays empty
    rows = SparseRows(64)
    for start in range(0, 9000, 700):                 # blocks that do not line up with 1,024
        rows.append(dense[start:start + 700])
        if start == 2800:
            rows.append(dense[:0])                    # and an empty one
    assert rows.shape == (9000, 64)
    assert np.array_equal(rows.dense(), dense) and np.array_equal(rows.dense(650, 1450), dense[650:1450])
    assert rows.nbytes < dense.nbytes * 0.6
    queries = rng.normal(size=(300, 64)).astype(np.float32)
    ids = [str(i) for i in range(9000)]
    one_block = SparseRows(64)
    one_block.append(dense)                           # normalised 1,024 rows at a time
    sparse_index, dense_index = VectorIndex(rows, ids, copy=False), VectorIndex(dense, ids)
    assert np.array_equal(sparse_index._rows.dense(), dense_index._rows.matrix)     # normalised to the same bits
    assert np.array_equal(VectorIndex(one_block, ids)._rows.dense(), dense_index._rows.matrix)
    assert sparse_index.search(queries, 8) == dense_index.search(queries, 8)


def test_sparse_rows_with_copy_leave_the_callers_values_alone():
    rows = SparseRows(2)
    rows.append(np.array([[3.0, 4.0]], dtype=np.float32))
    assert VectorIndex(rows, ["a"]).search(np.array([0.0, 1.0]), 1) == [[(0, 0.8)]]
    assert rows.dense().tolist() == [[3.0, 4.0]]


# --- scores that do not depend on the machine ------------------------------------------------

def _sparse_unit_rows(rng: np.random.Generator, n: int, dim: int, density: float) -> np.ndarray:
    """Non-negative float32 rows, mostly zeros, of unit length (as the local embedder's)."""
    rows = rng.random((n, dim)).astype(np.float32) * (rng.random((n, dim)) < density)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-30).astype(np.float32)


def _stored(index: VectorIndex, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The unit rows the index holds and the unit queries it scores (what a score is made of)."""
    rows = index._rows.dense() if isinstance(index._rows, SparseRows) else index._rows.matrix
    unit = np.array(queries, dtype=np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    return rows, unit


def test_scores_are_the_dot_products_rounded_to_six_decimals_exactly():
    # The float32 matrix product is off by ~1e-7, which moves one score in ten or so across a
    # sixth-decimal boundary (which one depends on the BLAS kernel and the batch's shape). Scores
    # must be those of exact arithmetic (math.fsum of the exact float32 products), rounded.
    rng = np.random.default_rng(11)
    docs = _sparse_unit_rows(rng, 3000, 256, 0.35)
    queries = _sparse_unit_rows(rng, 400, 256, 0.05)
    index = VectorIndex(docs, [str(i) for i in range(3000)])
    rows, unit = _stored(index, queries)
    rough = unit.astype(np.float64) @ rows.T.astype(np.float64)        # to find the best, not to score them
    for qi, hits in enumerate(index.search(queries, 8)):
        exact = [round(math.fsum(float(a) * float(b) for a, b in zip(unit[qi], rows[r], strict=True)), 6) + 0.0
                 for r, _ in hits]
        assert [s for _, s in hits] == exact, qi
        want = sorted(range(3000), key=lambda r: (-round(float(rough[qi, r]), 6), r))[:8]
        assert [r for r, _ in hits] == want, qi


def test_results_do_not_depend_on_the_batch_the_order_or_the_storage():
    rng = np.random.default_rng(12)
    docs = _sparse_unit_rows(rng, 2500, 128, 0.35)
    queries = _sparse_unit_rows(rng, 300, 128, 0.1)
    ids = [str(i) for i in range(2500)]
    together = VectorIndex(docs, ids).search(queries, 10)
    one_by_one = [VectorIndex(docs, ids).search(q, 10)[0] for q in queries[:40]]
    backwards = VectorIndex(docs, ids).search(queries[::-1], 10)[::-1]
    sparse = SparseRows(128)
    for start in range(0, 2500, 333):
        sparse.append(docs[start:start + 333])
    assert one_by_one == together[:40]
    assert backwards == together
    assert VectorIndex(sparse, ids, copy=False).search(queries, 10) == together


def test_equal_rows_across_parts_keep_the_lowest_rows():
    # 3,000 identical rows (three parts of the search): the first k, whatever part they are in
    row = np.zeros(8, dtype=np.float32)
    row[:2] = [3.0, 4.0]
    index = VectorIndex(np.tile(row, (3000, 1)), [str(i) for i in range(3000)])
    query = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    assert index.search(query, 5)[0] == [(i, 0.6) for i in range(5)]
    deep = index.search(query, 1500)[0]                       # deeper than a part
    assert [r for r, _ in deep] == list(range(1500)) and {s for _, s in deep} == {0.6}


def test_a_late_better_row_displaces_the_kept_ones():
    rng = np.random.default_rng(13)
    docs = _sparse_unit_rows(rng, 5000, 64, 0.3)
    docs[4321] = 0.0
    docs[4321, :3] = 1.0
    query = np.zeros(64)
    query[:3] = 1.0
    assert VectorIndex(docs, [str(i) for i in range(5000)]).search(query, 3)[0][0] == (4321, 1.0)


class _CountingRows(SparseRows):
    """SparseRows that count the rows they make dense for a search."""

    made_dense = 0

    def parts(self, wanted=None):
        for first, part in super().parts(wanted):
            self.made_dense += len(part)
            yield first, part


def test_search_makes_each_row_dense_once_per_two_thousand_queries():
    # It made every row dense again for each run of ~2M / n queries: quadratic in n.
    rng = np.random.default_rng(14)
    rows = _CountingRows(64)
    rows.append(_sparse_unit_rows(rng, 9000, 64, 0.3))
    index = VectorIndex(rows, [str(i) for i in range(9000)], copy=False)
    index.search(_sparse_unit_rows(rng, 2000, 64, 0.2), 5)
    assert rows.made_dense <= 2 * 9000          # one pass to shortlist, one over the shortlisted parts

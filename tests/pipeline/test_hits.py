"""The best k columns of each row of a score matrix (rageval.pipeline.hits.top_of), against the rule
written out plainly: scores rounded to 6 decimals, best first, equal scores by column ascending."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.pipeline import hits
from rageval.pipeline.hits import top_of


def plain_top(scores: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    out = []
    for row in scores.tolist():
        ranked = sorted(((round(v, 6) + 0.0, c) for c, v in enumerate(row)), key=lambda x: (-x[0], x[1]))
        out.append([(c, v) for v, c in ranked[:k]])
    return out


@st.composite
def score_rows(draw):
    """Rows like BM25's: mostly one low value (no shared word: 0.0), a few clusters of positive
    scores in neighbouring columns (the chunks of one section), ties and values 1e-7 apart."""
    m, n = draw(st.integers(1, 6)), draw(st.integers(1, 900))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    base = draw(st.sampled_from([0.0, 0.5]))
    scores = np.full((m, n), base)
    for i in range(m):
        for _ in range(draw(st.integers(0, 4))):
            start, width = int(rng.integers(0, n)), draw(st.integers(1, 40))
            values = rng.choice([1.0, 2.0, 2.0000001, 3.25, 3.2500004], size=min(width, n - start))
            scores[i, start:start + len(values)] = values
        scattered = rng.random(n) < draw(st.sampled_from([0.0, 0.01, 0.5]))
        scores[i, scattered] = rng.random(int(scattered.sum())) * 4
    return scores


@settings(max_examples=300, deadline=None)
@given(scores=score_rows(), k=st.integers(1, 12))
def test_the_best_columns_are_the_plain_rules(scores, k):
    assert top_of(scores, k).lists() == plain_top(scores, k)


def test_a_row_whose_best_scores_sit_in_one_block_still_gets_its_own_k_best(monkeypatch):
    """A 10,000-column row whose ten positive scores are neighbours (one of the floor's blocks) and
    every other score 0: the floor from the blocks' maxima is 0, every column a candidate, so that
    row alone selects its k-th best exactly; a row whose positives are far apart needs no selection."""
    scores = np.zeros((2, 10_000))
    scores[0, 100:110] = np.arange(10, 0, -1)
    scores[1, ::2000] = [5, 4, 3, 2, 1]
    calls = []
    partition = np.partition
    monkeypatch.setattr(hits.np, "partition", lambda a, *args, **kw: calls.append(a.shape) or partition(a, *args, **kw))
    got = top_of(scores, 5).lists()
    assert got == [[(100, 10.0), (101, 9.0), (102, 8.0), (103, 7.0), (104, 6.0)],
                   [(0, 5.0), (2000, 4.0), (4000, 3.0), (6000, 2.0), (8000, 1.0)]]
    assert calls == [(2, -(-10_000 // hits.FLOOR_BLOCK)), (1, 10_000)]


@st.composite
def unique_keys(draw):
    """Key tuples as the searches sort them — (row, score, query), some with a tie key — whose
    entries differ in some key: negative and huge integers, float32 and float64 scores with ties,
    -0.0 beside 0.0, infinities."""
    n = draw(st.integers(1, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    queries = rng.integers(0, draw(st.integers(1, 40)), n)
    pool = rng.choice([0.0, -0.0, 1.0, 2.0000001, 2.0, -3.5, np.inf, -np.inf, 1e-30, -1e30], size=8)
    scores = np.where(rng.random(n) < 0.5, rng.choice(pool, n), rng.normal(size=n))
    scores = scores.astype(draw(st.sampled_from([np.float32, np.float64])))
    low, high = draw(st.sampled_from([(0, 10), (-(2**40), 2**40), (-(2**62), 2**62), (0, 2**20)]))
    tie = rng.integers(low, high, n, dtype=np.int64)
    keys = (tie, -scores, queries) if draw(st.booleans()) else (tie, rng.integers(0, 3, n), -scores, queries)
    keep = np.unique(np.stack([k.astype(np.float64) for k in keys] + [tie.view(np.float64)]), axis=1,
                     return_index=True)[1]            # drop entries equal in every key (the float view: exact ints)
    return tuple(k[np.sort(keep)] for k in keys)


@settings(max_examples=400, deadline=None)
@given(keys=unique_keys())
def test_the_packed_sort_gives_lexsorts_order(keys):
    """lexsort_unique's order is np.lexsort's, whether the keys pack into 64 bits or not."""
    assert hits.lexsort_unique(keys).tolist() == np.lexsort(keys).tolist()


def test_keys_too_wide_to_pack_are_still_sorted(monkeypatch):
    """Two 40-bit keys do not fit in 64 bits: the order comes from np.lexsort itself."""
    keys = (np.array([2**40, 0, 5]), np.array([1, 1, 0]), np.array([0, 2**40, 2**40]))
    calls = []
    lexsort = np.lexsort
    monkeypatch.setattr(hits.np, "lexsort", lambda k: calls.append(len(k)) or lexsort(k))
    assert hits.lexsort_unique(keys).tolist() == [0, 2, 1]
    assert calls == [3]
    assert hits.lexsort_unique(keys[1:]).tolist() == [0, 2, 1] and calls == [3]     # 1 + 41 bits: packed

"""Retrieval metrics: hand-worked examples, edge cases, and a cross-check against trec_eval
(pytrec_eval), an independent implementation."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics.base import parse_metric
from rageval.metrics.retrieval import (
    budget_prefix,
    case_metrics,
    first_relevant_rank,
    ndcg_at,
    recall_at,
)


def test_hand_worked_example():
    ranking = [{"A"}, {"B", "C"}, {"D"}, {"C"}]
    expected = {"C", "D"}
    m = case_metrics(["hit@1", "hit@2", "recall@1", "recall@2", "recall@3", "mrr@4", "ndcg@3"], ranking, [1] * 4, expected)
    assert m["hit@1"] == 0 and m["hit@2"] == 1
    assert m["recall@1"] == 0 and m["recall@2"] == 0.5 and m["recall@3"] == 1.0
    assert m["mrr@4"] == 0.5
    # relevant at ranks 2, 3 (and 4); ideal for k=3 puts 3 relevant first
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert m["ndcg@3"] == pytest.approx(dcg / idcg)


@pytest.mark.parametrize("ranking", [[], [{"X"}, {"Y"}]])
def test_no_results_or_no_relevant_scores_zero(ranking):
    m = case_metrics(["hit@3", "recall@3", "mrr@3", "ndcg@3"], ranking, [1] * len(ranking), {"A"})
    assert m == {"hit@3": 0.0, "recall@3": 0.0, "mrr@3": 0.0, "ndcg@3": 0.0}
    assert first_relevant_rank(ranking, {"A"}) is None


def test_k_beyond_the_list():
    assert case_metrics(["hit@10", "mrr@10"], [{"B"}, {"A"}], [1, 1], {"A"}) == {"hit@10": 1.0, "mrr@10": 0.5}


def test_token_budget_prefix():
    # top-12 of 200-token chunks vs top-3 of 800-token chunks fill the same 2400-token budget
    assert len(budget_prefix([{"x"}] * 20, [200] * 20, 2400)) == 12
    assert len(budget_prefix([{"x"}] * 5, [800] * 5, 2400)) == 3
    assert budget_prefix([{"x"}], [900], 600) == []
    m = case_metrics(["recall@600tok"], [{"A"}, {"B"}, {"C"}], [300, 300, 300], {"A", "C"})
    assert m["recall@600tok"] == 0.5


def test_recall_needs_expected_sections():
    with pytest.raises(ValueError):
        recall_at([{"A"}], set(), 1)


@pytest.mark.parametrize("name", ["hit@0", "mrr", "foo@3", "recall@3x"])
def test_bad_metric_names_list_the_valid_ones(name):
    with pytest.raises(ValueError, match="valid metrics are|at least 1"):
        parse_metric(name)


pytrec_eval = pytest.importorskip("pytrec_eval")

SECTIONS = ["S1", "S2", "S3", "S4", "S5"]


@settings(max_examples=150, deadline=None)
@given(
    chunks=st.lists(st.sets(st.sampled_from(SECTIONS), min_size=1, max_size=2), min_size=1, max_size=8),
    expected=st.sets(st.sampled_from(SECTIONS), min_size=1, max_size=3),
    k=st.integers(min_value=1, max_value=8),
)
def test_agrees_with_trec_eval(chunks, expected, k):
    """trec_eval on the same ranking, with qrels = the relevant chunks of the retrieved list (our
    labels are sections, so relevance is judged on what was retrieved)."""
    ids = [f"c{i}" for i in range(len(chunks))]
    qrels = {"q": {cid: 1 for cid, secs in zip(ids, chunks) if secs & expected} or {"none": 1}}
    run = {"q": {cid: float(len(ids) - i) for i, cid in enumerate(ids)}}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut", "success"})
    ref = evaluator.evaluate(run)["q"]
    ours = case_metrics([f"mrr@{len(ids)}", f"ndcg@{k}", f"hit@{k}"], chunks, [1] * len(chunks), expected)
    assert ours[f"mrr@{len(ids)}"] == pytest.approx(ref["recip_rank"], abs=1e-9)
    # trec_eval's default cut-offs: ndcg_cut_5, 10, …; success_1, 5, 10
    if f"ndcg_cut_{k}" in ref:
        assert ours[f"ndcg@{k}"] == pytest.approx(ref[f"ndcg_cut_{k}"], abs=1e-4)
    if f"success_{k}" in ref:
        assert ours[f"hit@{k}"] == ref[f"success_{k}"]


def test_ndcg_of_the_seed_q05():
    # chunk-800: relevant chunks at ranks 1 and 3 → DCG 1.5, IDCG 1 + 1/log2(3) → ≈ 0.92
    assert ndcg_at([{"DT-3"}, {"BH-1"}, {"DT-2"}, {"DT-5"}, {"VC-1"}], {"DT-2", "DT-3"}, 5) == pytest.approx(0.9197, abs=1e-4)

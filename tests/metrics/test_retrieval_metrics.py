"""Retrieval metrics: hand-worked examples, edge cases, and a cross-check against trec_eval
(pytrec_eval), an independent implementation."""

import math
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics.registry import case_metrics, parse_metric
from rageval.metrics.retrieval import budget_prefix, first_relevant_rank, ndcg_at, recall_at


def test_hand_worked_example():
    ranking = [{"A"}, {"B", "C"}, {"D"}, {"C"}]
    expected = {"C", "D"}
    m = case_metrics(["hit@1", "hit@2", "recall@1", "recall@2", "recall@3", "mrr@4", "ndcg@3"], ranking, [1] * 4, expected)
    assert m["hit@1"] == 0 and m["hit@2"] == 1
    assert m["recall@1"] == 0 and m["recall@2"] == 0.5 and m["recall@3"] == 1.0
    assert m["mrr@4"] == 0.5
    # C is credited at rank 2, D at rank 3 (C at rank 4 earns nothing again); the ideal ranking
    # holds the two expected sections once: IDCG@3 = 1 + 1/log2(3)
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    idcg = 1 + 1 / math.log2(3)
    assert m["ndcg@3"] == pytest.approx(dcg / idcg)
    assert m["ndcg@3"] == pytest.approx(0.69343, abs=1e-5)


def test_ndcg_counts_an_expected_section_never_retrieved():
    # the example: the second expected section is never retrieved; trec_eval gives 0.61
    assert ndcg_at([{"A"}, {"X"}, {"Y"}], {"A", "B"}, 3) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at([{"A"}, {"X"}, {"Y"}], {"A", "B"}, 3) == pytest.approx(0.6131, abs=1e-4)
    # a chunk holding two new expected sections earns one (binary) gain and credits both
    assert ndcg_at([{"A", "B"}, {"B"}], {"A", "B"}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))


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


@pytest.fixture(scope="module")
def pytrec_eval():
    """The independent implementation, for the cross-checks only (a test extra that may not install)."""
    return pytest.importorskip("pytrec_eval")

SECTIONS = ["S1", "S2", "S3", "S4", "S5"]


def _trec_run(chunks: list[str], expected: set[str]) -> dict[str, float]:
    """Our ranking as a trec_eval run over sections: a chunk is its section the first time it
    appears and a distinct non-relevant document after that (a section is credited once)."""
    seen: set[str] = set()
    docs = []
    for i, section in enumerate(chunks):
        docs.append(section if section not in seen else f"dup{i}")
        seen.add(section)
    return {doc: float(len(docs) - i) for i, doc in enumerate(docs)}


CUTS = (1, 2, 3, 4, 5, 8)
MEASURES = {"recip_rank", "ndcg_cut." + ",".join(map(str, CUTS)), "success." + ",".join(map(str, CUTS))}


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.sampled_from(SECTIONS), min_size=1, max_size=8),
    expected=st.sets(st.sampled_from(SECTIONS), min_size=1, max_size=3),
)
def test_agrees_with_trec_eval(pytrec_eval, chunks, expected):
    """trec_eval with qrels = the expected sections (some never retrieved), on one case."""
    ref = pytrec_eval.RelevanceEvaluator({"q": dict.fromkeys(expected, 1)}, MEASURES).evaluate(
        {"q": _trec_run(chunks, expected)})["q"]
    ranking = [{s} for s in chunks]
    ours = case_metrics([f"mrr@{len(chunks)}", *(f"ndcg@{k}" for k in CUTS), *(f"hit@{k}" for k in CUTS)],
                        ranking, [1] * len(chunks), expected)
    assert ours[f"mrr@{len(chunks)}"] == pytest.approx(ref["recip_rank"], abs=1e-9)
    for k in CUTS:
        assert ours[f"ndcg@{k}"] == pytest.approx(ref[f"ndcg_cut_{k}"], abs=1e-4), k
        assert ours[f"hit@{k}"] == ref[f"success_{k}"]


def test_agrees_with_trec_eval_on_a_random_collection(pytrec_eval):
    """1,200 per-case values (200 cases × 6 cut-offs) of a seeded random collection, with 1–3
    expected sections per case and many never retrieved: every nDCG value matches trec_eval."""
    import random
    rng = random.Random(7)
    sections = [f"S{i}" for i in range(12)]
    qrels, runs, rankings = {}, {}, {}
    for q in range(200):
        expected = set(rng.sample(sections, rng.randint(1, 3)))
        chunks = [rng.choice(sections) for _ in range(rng.randint(1, 8))]
        qrels[f"q{q}"] = dict.fromkeys(expected, 1)
        runs[f"q{q}"] = _trec_run(chunks, expected)
        rankings[f"q{q}"] = (chunks, expected)
    ref = pytrec_eval.RelevanceEvaluator(qrels, MEASURES).evaluate(runs)
    unretrieved = sum(1 for chunks, expected in rankings.values() if expected - set(chunks))
    assert unretrieved > 100                       # the collection exercises the case that went wrong
    disagree = [(q, k) for q, (chunks, expected) in rankings.items() for k in CUTS
                if abs(ndcg_at([{s} for s in chunks], expected, k) - ref[q][f"ndcg_cut_{k}"]) > 1e-4]
    assert disagree == []


def test_ndcg_of_the_seed_q05():
    # chunk-800: relevant chunks at ranks 1 and 3 → DCG 1.5, IDCG 1 + 1/log2(3) → ≈ 0.92
    assert ndcg_at([{"DT-3"}, {"BH-1"}, {"DT-2"}, {"DT-5"}, {"VC-1"}], {"DT-2", "DT-3"}, 5) == pytest.approx(0.9197, abs=1e-4)


def test_without_pytrec_eval_only_the_cross_checks_skip():
    """pytrec_eval is a test extra: where it does not install, the hand-worked values still run."""
    script = ("import sys; sys.modules['pytrec_eval'] = None; import pytest; "
              f"sys.exit(pytest.main([{__file__!r}, '-v', '-o', 'addopts=', '-p', 'no:cacheprovider', "
              "'-k', 'not without_pytrec_eval']))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False)
    skipped = sorted(re.findall(r"::(\w+) SKIPPED", proc.stdout))
    assert skipped == ["test_agrees_with_trec_eval", "test_agrees_with_trec_eval_on_a_random_collection"], \
        proc.stdout[-3000:]
    assert proc.returncode == 0 and "::test_ndcg_of_the_seed_q05 PASSED" in proc.stdout

"""A case's metric table, computed once per shape (rageval.metrics.tables): the table of every case
is case_metrics' own, rounded, whether it was computed for the case or for another of its shape; a
case whose sections are only named differently gets the same table; a family a project registers is
computed case by case."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics import tables
from rageval.metrics.registry import REGISTRY, RetrievalFamily, case_metrics, registered
from rageval.metrics.retrieval import Relevance

NAMES = ["hit@1", "hit@3", "recall@1", "recall@5", "mrr@5", "ndcg@1", "ndcg@3", "ndcg@10", "recall@300tok",
         "ndcg@500tok", "mrr@200tok"]
POOL = ["A", "B", "C", "D", "E", "x1", "x2"]


@st.composite
def cases(draw):
    """A ranking of up to 8 chunks (each up to three sections, noise among them), grades over some
    sections (0 to 3: a grade 0 is neither gain nor relevant), a relevance minimum, the index's
    holders or none, and chunk sizes."""
    ranking = draw(st.lists(st.sets(st.sampled_from(POOL), max_size=3), max_size=8))
    grades = draw(st.dictionaries(st.sampled_from(POOL[:5]), st.integers(0, 3), min_size=1, max_size=4))
    holders = draw(st.none() | st.lists(st.frozensets(st.sampled_from(POOL), min_size=1, max_size=3), max_size=5))
    tokens = draw(st.lists(st.integers(1, 250), min_size=len(ranking), max_size=len(ranking)))
    return ranking, tokens, Relevance.of(grades, draw(st.integers(1, 2)), holders)


def direct(ranking, tokens, relevance):
    return {k: round(v, 6) for k, v in case_metrics(NAMES, ranking, tokens, relevance).items()}


def renamed(ranking, relevance, names):
    """The same case with every section renamed (``names``: old -> new, one to one)."""
    holders = None if relevance.holders is None else [{names[s] for s in h} for h in relevance.holders]
    return ([{names[s] for s in chunk} for chunk in ranking],
            Relevance.of({names[s]: g for s, g in relevance.grades.items()}, relevance.minimum, holders))


@settings(max_examples=400, deadline=None)
@given(case=cases(), order=st.permutations(range(len(POOL))))
def test_a_table_is_case_metrics_own_and_shared_by_renamed_cases(case, order):
    ranking, tokens, relevance = case
    table = tables.metric_table(NAMES, ranking, tokens, relevance)
    assert table == direct(ranking, tokens, relevance)
    names = {s: f"S-{n}" for s, n in zip(POOL, order, strict=True)}
    other_ranking, other = renamed(ranking, relevance, names)
    again = tables.metric_table(NAMES, other_ranking, tokens, other)
    assert again == direct(other_ranking, tokens, other) == table
    if not ties(ranking, relevance):
        assert again is table                                        # computed once for both


def ties(ranking, relevance):
    """Whether two of the case's graded sections first appear together (in one chunk, or in none)
    with one grade: the shape then tells them apart by name, and a renamed case may get another."""
    first = {}
    for rank, chunk in enumerate(ranking):
        for s in chunk:
            first.setdefault(s, rank)
    seen = [(first.get(s), g) for s, g in relevance.grades.items() if g > 0 or g >= relevance.minimum]
    return len(seen) != len(set(seen))


def test_a_hand_worked_table_reached_through_another_case():
    """[{A}, {X}, {B}] for A and B, grade 1 each: hit@1 1, recall@1 0.5, nDCG@3 (1 + 1/2) / (1 + 1/log2 3);
    the same table for [{P}, {Y}, {Q}] expecting P and Q, after the first case made it."""
    first = tables.metric_table(["hit@1", "recall@1", "ndcg@3"], [{"A"}, {"X"}, {"B"}], [1, 1, 1],
                                Relevance.of({"A": 1, "B": 1}))
    second = tables.metric_table(["hit@1", "recall@1", "ndcg@3"], [{"P"}, {"Y"}, {"Q"}], [1, 1, 1],
                                 Relevance.of({"P": 1, "Q": 1}))
    assert second is first
    assert first == {"hit@1": 1.0, "recall@1": 0.5, "ndcg@3": round(1.5 / (1 + 1 / math.log2(3)), 6)}


def test_a_family_a_project_registers_is_computed_case_by_case():
    """A family may read the sections' names (here: whether section "A" is in the top k); its
    tables are computed for each case, never taken from another case of the same shape."""
    family = RetrievalFamily("has_a", "A in the top k", "1 if A in top k",
                             lambda ranking, rel, k: float(any("A" in chunk for chunk in ranking[:k])))
    with registered(family):
        got = [tables.metric_table(["has_a@2", "hit@2"], [{s}], [1], Relevance.of({s: 1})) for s in "AB"]
    assert got == [{"has_a@2": 1.0, "hit@2": 1.0}, {"has_a@2": 0.0, "hit@2": 1.0}]


def test_a_built_in_family_registered_again_is_not_taken_for_the_built_in():
    """A project replacing "hit" by its own reading (any chunk at all in the top k) gets its own
    values, and the built-in's again once it is gone."""
    families = dict(REGISTRY.families)
    case = ([{"X"}], [1], Relevance.of({"A": 1}))
    assert tables.metric_table(["hit@1"], *case) == {"hit@1": 0.0}
    REGISTRY.remove("hit")
    try:
        with registered(RetrievalFamily("hit", "any chunk", "1 if any", lambda ranking, rel, k: float(bool(ranking)))):
            assert tables.metric_table(["hit@1"], *case) == {"hit@1": 1.0}
    finally:
        REGISTRY.families.clear()
        REGISTRY.families.update(families)          # the built-in, in its place
    assert tables.metric_table(["hit@1"], *case) == {"hit@1": 0.0}

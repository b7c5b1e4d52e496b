"""rageval's retrieval metrics against trec_eval's own published outputs for its graded test files
(usnistgov/trec_eval, test/): ``qrels.rel_level`` + ``results.test`` → ``out.test.aql``
(``trec_eval -m all_trec -q -l2``: grades -1..4, relevance level 2) and ``qrels.comment.test`` +
``results.comment.test`` → ``out.comment.test`` (grades 0..3, a query with no relevant document).

The files are trec_eval's, not this repository's: the tests read them from the folder named by
``RAGEVAL_TREC_EVAL_TESTS`` or from ``../shared/trec_eval/test`` beside the repository, and skip
(saying so) when neither has them. The qrels go through rageval's own reader
(``rageval.golden.ir_import.read_qrels``), each query's ranking is trec_eval's (score descending,
then document id descending), one document per chunk.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import ROOT

from rageval.golden.ir_import import read_qrels
from rageval.metrics.registry import case_metrics

PLACES = [os.environ.get("RAGEVAL_TREC_EVAL_TESTS", ""), ROOT.parent / "shared" / "trec_eval" / "test",
          ROOT.parent / "shared" / "trec_eval"]


def trec_file(name: str) -> Path:
    for place in PLACES:
        if place and (Path(place) / name).is_file():
            return Path(place) / name
    pytest.skip(f"trec_eval's test file {name} not found (set RAGEVAL_TREC_EVAL_TESTS to trec_eval's test/ folder)")


def rankings(path: Path, judged: set[str]) -> dict[str, list[str]]:
    """Query → document ids best first, as trec_eval orders a run: score descending, then docno descending."""
    rows = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        qid, _, doc, _, score, *_ = line.split()
        if qid in judged:
            rows[qid].append((float(score), doc))
    return {q: [doc for _, doc in sorted(docs, key=lambda x: (x[0], x[1]), reverse=True)] for q, docs in rows.items()}


def published(path: Path) -> dict[tuple[str, str], float]:
    """(measure, query) → value, from trec_eval's -q output."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        measure, qid, value = line.split()
        try:
            out[measure, qid] = float(value)
        except ValueError:
            continue                                            # runid
    return out


CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)


def test_graded_values_equal_trec_eval_on_qrels_rel_level():
    qrels = read_qrels(trec_file("qrels.rel_level"))
    runs = rankings(trec_file("results.test"), set(qrels))
    ref = published(trec_file("out.test.aql"))
    names = [*(f"ndcg@{k}" for k in CUTS), *(f"recall@{k}" for k in CUTS), "hit@1", "hit@5", "hit@10", "mrr@1000"]
    compared, undefined = 0, 0
    ndcg_all = []
    for qid, docs in runs.items():
        ours = case_metrics(names, [{d} for d in docs], [1] * len(docs), qrels[qid], minimum=2)
        for k in CUTS:
            assert ours.get(f"ndcg@{k}", 0.0) == pytest.approx(ref[f"ndcg_cut_{k}", qid], abs=5e-5), (qid, k)
            compared += 1
        ndcg_all.append(ours.get("ndcg@10", 0.0))
        if "hit@1" not in ours:                 # no document graded ≥ 2: trec_eval counts 0, rageval leaves it out
            undefined += 1
            assert ref["recip_rank", qid] == 0 and ref["success_10", qid] == 0
            continue
        for k in CUTS:
            assert ours[f"recall@{k}"] == pytest.approx(ref[f"recall_{k}", qid], abs=5e-5), (qid, k)
        for k in (1, 5, 10):
            assert ours[f"hit@{k}"] == ref[f"success_{k}", qid], (qid, k)
        assert ours["mrr@1000"] == pytest.approx(ref["recip_rank", qid], abs=5e-5), qid
        compared += len(CUTS) + 4
    assert len(runs) == int(ref["num_q", "all"]) == 3
    assert compared == 3 * (2 * len(CUTS) + 4) - undefined * (len(CUTS) + 4)      # every per-query value compared
    assert sum(ndcg_all) / len(ndcg_all) == pytest.approx(ref["ndcg_cut_10", "all"], abs=5e-5)


def test_mrr_on_qrels_comment_test_and_the_query_with_no_relevant_document():
    qrels = read_qrels(trec_file("qrels.comment.test"))
    runs = rankings(trec_file("results.comment.test"), set(qrels))
    ref = published(trec_file("out.comment.test"))
    rr, rel_ret = {}, 0
    for qid, docs in runs.items():
        ours = case_metrics(["mrr@100", "recall@100"], [{d} for d in docs], [1] * len(docs), qrels[qid])
        if ours:
            rr[qid] = ours["mrr@100"]
            rel_ret += round(ours["recall@100"] * sum(1 for g in qrels[qid].values() if g >= 1))
    n_q = int(ref["num_q", "all"])
    assert (len(runs), len(rr)) == (n_q, n_q - 1)                 # 31 queries, one with no relevant document
    assert rel_ret == int(ref["num_rel_ret", "all"])
    # trec_eval's mean counts that query as 0 (MRR over 31); rageval's leaves it out (over 30): × 31/30
    assert sum(rr.values()) / n_q == pytest.approx(ref["recip_rank", "all"], abs=5e-5)
    assert sum(rr.values()) / len(rr) == pytest.approx(ref["recip_rank", "all"] * n_q / (n_q - 1), abs=1e-4)

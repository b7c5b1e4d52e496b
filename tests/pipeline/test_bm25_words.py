"""retrieval.bm25_words: BM25 over folded words (the default), exact words, or both as two fields.

Vietnamese diacritics carry meaning ("trả" return, "trà" tea, "tra" look up) that folding erases,
while customers often type without them. The forms are checked by hand, against bm25s given the same
terms, on the demo by how its questions were typed (the figures bench/bench_words.py prints), and as
a config key."""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rageval.config import load_config
from rageval.errors import ConfigError
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.metrics.retrieval import first_relevant_rank
from rageval.pipeline.apps.builtin import BuiltinApp, Retriever
from rageval.pipeline.chunking import chunk_corpus
from rageval.pipeline.lexical import WORD_FORMS, BM25Index

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "banhang"
TEXTS = ["Chính sách đổi trả hàng trong 7 ngày", "Quà tặng trà xanh cho đơn trên 500.000 đồng",
         "Tra cứu đơn hàng bằng mã đơn"]


def rows(index: BM25Index, query: str) -> list[int]:
    return [row for row, score in index.search([query], 3)[0] if score > 0]


def test_folded_words_meet_unaccented_queries_and_lose_the_meaning_diacritics_carry():
    folded = BM25Index(TEXTS, ["a", "b", "c"])
    assert set(rows(folded, "doi tra")) == {0, 1, 2}  # "doi" in the first, "tra" in all three
    assert set(rows(folded, "trà")) == {0, 1, 2}      # return, tea and look-up are one word "tra"


def test_exact_words_keep_the_diacritics_and_miss_unaccented_queries():
    exact = BM25Index(TEXTS, ["a", "b", "c"], form="exact")
    assert rows(exact, "trà") == [1]                   # only the tea
    assert rows(exact, "Trả") == [0]                   # case folded, diacritics kept
    assert rows(exact, "doi tra") == [2]               # unaccented: only "Tra cứu" (look up); the returns policy is missed
    nfd = unicodedata.normalize("NFD", "đổi trả")      # the same letters, decomposed (macOS files, some IMEs)
    assert rows(exact, nfd) == [0]


def test_both_fields_find_unaccented_queries_and_rank_the_exact_match_first():
    both = BM25Index(TEXTS, ["a", "b", "c"], form="both")
    assert set(rows(both, "tra")) == {0, 1, 2}         # the folded field meets every "tra"
    assert rows(both, "trà")[0] == 1                   # the exact field puts the tea first
    assert rows(both, "trả")[0] == 0
    folded = BM25Index(TEXTS, ["a", "b", "c"])
    assert len(folded.vocabulary) < len(both.vocabulary)


@pytest.mark.parametrize("form", ["exact", "both"])
def test_each_form_scores_as_bm25s_does_given_the_same_terms(form):
    bm25s = pytest.importorskip("bm25s")
    cfg = load_config(DEMO / "rageval.yml")
    chunks = chunk_corpus(load_corpus(cfg.corpus, cfg.root), cfg.chunking.size)
    texts = [c.indexed for c in chunks]
    questions = [c.question for c in load_golden(cfg.golden).cases][:40]
    ours = BM25Index(texts, [c.id for c in chunks], form=form)
    terms = WORD_FORMS[form]                 # the form's own term function, also what bm25s is given
    theirs = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    theirs.index([[w for token in t.split() for w in terms(token)] for t in texts], show_progress=False)
    for question, hits in zip(questions, ours.search(questions, 5), strict=True):
        scores = np.asarray(theirs.get_scores([w for token in question.split() for w in terms(token)]))
        assert [s for _, s in hits] == pytest.approx(sorted(scores, reverse=True)[:5], abs=1e-4)


def demo_hit1(form: str, style: str) -> float:
    """hit@1 of the demo's BM25 mode over the questions typed ``style`` (slice lang_style)."""
    cfg = load_config(DEMO / "rageval.yml")
    chunks = chunk_corpus(load_corpus(cfg.corpus, cfg.root), cfg.chunking.size)
    cases = [c for c in load_golden(cfg.golden).cases
             if c.expected_sections and c.slice.get("lang_style") == style]
    run = replace(cfg, retrieval=replace(cfg.retrieval, mode="bm25", bm25_words=form))
    hits = Retriever(run, chunks).search([c.question for c in cases], 1)
    ranks = [first_relevant_rank([set(chunks[r].sections) for r, _ in h], set(c.expected_sections))
             for h, c in zip(hits, cases, strict=True)]
    return round(sum(r == 1 for r in ranks) / len(ranks), 3)


def test_on_the_demo_folding_is_what_unaccented_questions_need():
    # bench/bench_words.py's figures (98 questions typed without diacritics, 13 with): exact words
    # lose most unaccented questions; both fields keep nearly all of folding's.
    assert demo_hit1("folded", "no_diacritics") == 0.786
    assert demo_hit1("exact", "no_diacritics") == 0.327
    assert demo_hit1("both", "no_diacritics") == 0.776
    assert demo_hit1("folded", "diacritics") == demo_hit1("both", "diacritics") == 0.846


def test_the_form_names_the_app_so_a_baseline_under_another_form_is_another_run():
    cfg = load_config(DEMO / "rageval.yml")
    corpus = load_corpus(cfg.corpus, cfg.root)
    names = {form: BuiltinApp(replace(cfg, retrieval=replace(cfg.retrieval, mode="bm25", bm25_words=form)), corpus).name
             for form in ("folded", "exact")}
    assert names == {"folded": "builtin:bm25+extractive:2", "exact": "builtin:bm25(exact)+extractive:2"}
    hybrid = replace(cfg, retrieval=replace(cfg.retrieval, mode="hybrid", bm25_words="both"))
    app = BuiltinApp(hybrid, corpus)
    assert app.name == "builtin:rrf(local:hashed-ngrams-v1,bm25(both))+extractive:2"
    assert app.retriever.lexical.vocabulary is not app.retriever.embedder.vocabulary  # the embedder stays folded


def test_an_unknown_form_is_a_config_error_naming_the_choices(tmp_path):
    cfg = tmp_path / "rageval.yml"
    cfg.write_text("golden: g.yaml\ncorpus: docs\nretrieval: {mode: bm25, bm25_words: stemmed}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"retrieval\.bm25_words.*folded, exact, both"):
        load_config(cfg)

"""The builtin retriever searches its questions a batch at a time (apps.builtin.SEARCH_BATCH): a
search's working memory is one batch's (20,000 hybrid questions over 10,000 chunks at once peaked at
559 MB, by batches of 2,048 at 309 MB). The batch is invisible: every question gets the same
chunks with the same scores, in every retrieval mode, however the questions are cut."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rageval.config import load_config
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.pipeline.apps import builtin
from rageval.pipeline.apps.builtin import Retriever
from rageval.pipeline.chunking import chunk_corpus

DEMO = Path(__file__).resolve().parents[2] / "examples" / "banhang"


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_questions_cut_into_batches_get_the_rankings_they_get_together(mode, monkeypatch):
    cfg = load_config(DEMO / "rageval.yml")
    cfg = replace(cfg, retrieval=replace(cfg.retrieval, mode=mode))
    chunks = chunk_corpus(load_corpus(cfg.corpus, cfg.root), cfg.chunking.size)
    questions = [c.question for c in load_golden(cfg.golden).cases]
    assert len(questions) > 7
    together = Retriever(cfg, chunks).search(questions, 10)
    monkeypatch.setattr(builtin, "SEARCH_BATCH", 7)
    cut = Retriever(cfg, chunks).search(questions, 10)
    assert cut == together
    assert len(cut) == len(questions) and all(len(hits) == 10 for hits in cut)

"""Hybrid retrieval reads the questions' words once, for the local embedder and BM25 (one shared
vocabulary): given those words, each side must return exactly what it returns reading them itself."""

from __future__ import annotations

import numpy as np
import pytest

from rageval.pipeline.embedding import LocalEmbedder
from rageval.pipeline.lexical import BM25Index

DOCS = ["Đổi trả hàng trong 7 ngày", "Phí giao hàng 30.000 đồng", "Bảo hành 12 tháng tại cửa hàng",
        "Giảm 15% cho đơn đầu tiên", ""]
QUESTIONS = ["doi tra trong may ngay", "phí giao hàng bao nhiêu", "bảo hành", "", "từ mới chưa gặp"]


def _pair() -> tuple[LocalEmbedder, BM25Index]:
    embedder = LocalEmbedder(dim=256)
    words = embedder.vocabulary.read(DOCS)
    lexical = BM25Index(DOCS, [f"c{i}" for i in range(len(DOCS))], vocabulary=embedder.vocabulary, words=words)
    embedder.fit(DOCS, words=words)
    return embedder, lexical


def test_given_words_give_the_same_query_rows_and_bm25_hits():
    alone_embedder, alone_lexical = _pair()
    rows = alone_embedder.embed_query_rows(QUESTIONS).dense()
    hits = alone_lexical.search_hits(QUESTIONS, 3)
    embedder, lexical = _pair()
    words = lexical.vocabulary.read(QUESTIONS)            # new words ("moi", "gap") are added once, here
    assert np.array_equal(embedder.embed_query_rows(QUESTIONS, words=words).dense(), rows)
    shared = lexical.search_hits(QUESTIONS, 3, words=words)
    assert np.array_equal(shared.rows, hits.rows) and np.array_equal(shared.scores, hits.scores)


def test_words_of_other_texts_are_refused():
    embedder, lexical = _pair()
    words = lexical.vocabulary.read(QUESTIONS[:2])
    with pytest.raises(ValueError, match="2 texts' words for 5"):
        embedder.embed_query_rows(QUESTIONS, words=words)
    with pytest.raises(ValueError, match="2 texts' words for 5"):
        lexical.search_hits(QUESTIONS, 3, words=words)

"""BM25 and hybrid retrieval: scores worked out by hand and cross-checked against the bm25s
package (its Lucene variant), diacritic folding, ties, reciprocal-rank fusion, the shared
vocabulary, and `retrieval.mode` end to end on the demo."""

from __future__ import annotations

import math
import random
import threading
import tracemalloc
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.config import load_config
from rageval.errors import ConfigError
from rageval.golden.corpus import load_corpus
from rageval.pipeline.apps.builtin import BuiltinApp
from rageval.pipeline import lexical as lexical_module
from rageval.pipeline.hits import Hits
from rageval.pipeline.lexical import BM25Index, Vocabulary, fuse, fuse_hits
from rageval.text import folded_words

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "banhang"

DOCS = ["Đổi trả trong 7 ngày", "Phí vận chuyển 30.000 đồng", "Đổi máy lỗi, đổi trả nhanh"]


def bm25(tf: int, df: int, n: int, dl: int, avgdl: float) -> float:
    """Lucene's BM25 term weight, k1 = 1.5, b = 0.75 (written out here, not imported)."""
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))


def test_hand_computed_scores_and_diacritics():
    index = BM25Index(DOCS, ["a", "b", "c"])
    # words: a = doi tra trong 7 ngay (5), b = phi van chuyen 30 000 dong (6), c = doi may loi doi tra nhanh (6)
    avgdl = 17 / 3
    want_c = bm25(2, 2, 3, 6, avgdl) + bm25(1, 2, 3, 6, avgdl)        # "doi" twice in c, "tra" once
    want_a = bm25(1, 2, 3, 5, avgdl) + bm25(1, 2, 3, 5, avgdl)
    hits = index.search(["doi tra"], top_k=3)[0]                       # typed without diacritics
    assert [row for row, _ in hits] == [2, 0, 1]
    assert [s for _, s in hits] == pytest.approx([want_c, want_a, 0.0], abs=1e-6)


def test_repeated_query_words_count_each_time_and_unknown_words_count_nothing():
    index = BM25Index(DOCS, ["a", "b", "c"])
    once = dict(index.search(["phi"], 3)[0])
    twice = dict(index.search(["phi phi xyzzy"], 3)[0])
    assert twice[1] == pytest.approx(2 * once[1], abs=2e-6)     # scores are rounded to 6 decimals


def test_ties_and_empty_queries_go_by_row():
    index = BM25Index(["a b", "c d", "a b", "e"], list("wxyz"))
    assert [row for row, _ in index.search(["a"], 4)[0]] == [0, 2, 1, 3]
    assert index.search(["", "!!"], 2) == [[(0, 0.0), (1, 0.0)], [(0, 0.0), (1, 0.0)]]
    assert index.search(["a"], 0) == [[]]
    assert BM25Index([], []).search(["a"], 3) == [[]]


def test_agrees_with_bm25s_on_a_random_corpus():
    bm25s = pytest.importorskip("bm25s")
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(300)] + ["đổi", "trả", "ngày", "phí"]
    docs = [" ".join(rng.choice(vocab) for _ in range(rng.randint(3, 60))) for _ in range(400)]
    queries = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 6))) for _ in range(50)]
    ours = BM25Index(docs, [str(i) for i in range(len(docs))]).search(queries, 10)
    theirs = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    theirs.index([folded_words(d) for d in docs], show_progress=False)
    for query, hits in zip(queries, ours, strict=True):
        scores = np.asarray(theirs.get_scores(folded_words(query)), dtype=np.float64)
        assert [s for _, s in hits] == pytest.approx([float(scores[row]) for row, _ in hits], abs=1e-4)
        assert [s for _, s in hits] == pytest.approx(sorted(scores, reverse=True)[:10], abs=1e-4)


def test_batches_do_not_change_results(monkeypatch):
    import rageval.pipeline.lexical as lexical
    docs = [f"doc {i} " + " ".join(f"w{(i * j) % 17}" for j in range(8)) for i in range(60)]
    queries = [f"w{i % 17} w{(3 * i) % 17}" for i in range(40)]
    whole = BM25Index(docs, [str(i) for i in range(60)]).search(queries, 5)
    monkeypatch.setattr(lexical, "_SCORES_PER_BATCH", 130)   # two queries per batch
    assert BM25Index(docs, [str(i) for i in range(60)]).search(queries, 5) == whole


def test_reciprocal_rank_fusion_by_hand():
    dense = [(4, 0.9), (7, 0.8), (1, 0.1)]
    lexical = [(7, 12.0), (2, 3.0), (4, 1.0)]
    fused = fuse([dense, lexical], depth=3)
    # 7: 1/62 + 1/61, 4: 1/61 + 1/63, 2: 1/62, 1: 1/63
    assert fused == [(7, round(1 / 62 + 1 / 61, 6)), (4, round(1 / 61 + 1 / 63, 6)), (2, round(1 / 62, 6))]
    assert fuse([[(3, 1.0)], [(1, 1.0)]], 5) == [(1, round(1 / 61, 6)), (3, round(1 / 61, 6))]   # tie: row


def test_equal_fused_scores_go_to_the_best_single_rank_before_the_row():
    """Issue 22 §4: rows 9 and 200, each first in one ranking only, and row 2, 62nd in both, fuse
    to the same 1/61 = 2/122; best rank first (9 and 200, then by row), then row 2, whatever its number."""
    dense = [(9, 1.0), *[(100 + i, 0.5) for i in range(60)], (2, 0.1)]
    lexical = [*[(200 + i, 5.0) for i in range(61)], (2, 1.0)]
    fused = fuse([dense, lexical], depth=200)
    tied = [(row, score) for row, score in fused if score == round(1 / 61, 6)]
    assert tied == [(9, round(1 / 61, 6)), (200, round(1 / 61, 6)), (2, round(1 / 61, 6))]
    as_hits = [Hits(np.array([[row for row, _ in r]]), np.array([[s for _, s in r]])) for r in (dense, lexical)]
    assert fuse_hits(as_hits, 200).lists() == [fused]


@pytest.mark.parametrize("block, depth", [(2048, 25), (7, 25), (2048, 5), (2048, 1), (7, 40)])
def test_fusing_every_query_at_once_is_fusing_each_alone(monkeypatch, block, depth):
    # fuse_hits sums and rounds as fuse does (the same float64 sums in the same order, Python's round)
    rng = random.Random(5)
    n, wide, m = 300, 40, 60
    dense = [[(row, 0.0) for row in rng.sample(range(n), wide)] for _ in range(m)]
    lexical = [[(row, 0.0) for row in rng.sample(range(n), wide)] for _ in range(m)]
    lexical[3] = dense[3][:]                                  # the same ranking twice
    lexical[4] = lexical[4][:7]                               # a short ranking
    dense[5], lexical[5] = dense[5][:3], lexical[5][:4]       # both shorter than most depths
    lexical[6] = [dense[6][i] for i in (10, 0, 30, 39, 20)] + lexical[6][:35]   # rows in both, far down

    def hits(rankings):
        out = Hits(np.full((m, wide), -1, dtype=np.int64), np.zeros((m, wide)))
        for q, ranking in enumerate(rankings):
            out.rows[q, :len(ranking)] = [row for row, _ in ranking]
        return out

    monkeypatch.setattr(lexical_module, "_FUSE_BLOCK", block)
    together = fuse_hits([hits(dense), hits(lexical)], depth).lists()
    assert together == [fuse(pair, depth) for pair in zip(dense, lexical, strict=True)]


def test_search_memory_stays_small_when_every_chunk_holds_the_query_words():
    # Zipf: a few words sit in every chunk, so each query gathers a posting per chunk and word.
    # 6,000 chunks × 1,000 queries × 4 such words is 24M postings: gathered 16M at a time they took
    # ~600 MB (and a 1,677 × 6,000 float64 score matrix); now a million at a time.
    docs = [f"la cua va {i} x{i % 97} y{i % 89}" for i in range(6000)]
    queries = [f"la cua va mot x{i % 97} y{i % 13}" for i in range(1000)]
    index = BM25Index(docs, [str(i) for i in range(6000)])
    tracemalloc.start()
    try:
        hits = index.search(queries, 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(hits) == 1000 and all(len(h) == 5 for h in hits)
    assert peak < 120e6


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("aĐđổả7. ,!-\u0301ǄßIİ\n\t"), max_size=30), max_size=6))
def test_vocabulary_words_are_the_folded_words(texts):
    vocabulary = Vocabulary()
    for _ in range(2):                                      # new tokens, then remembered ones
        words = vocabulary.read(texts)
        for i, text in enumerate(texts):
            ids = words.ids[words.starts[i]:words.starts[i + 1]]
            assert [vocabulary.words[j] for j in ids] == folded_words(text)


def test_vocabulary_read_from_threads_gives_each_word_one_index():
    vocabulary = Vocabulary()
    texts = [" ".join(f"t{(i * 7 + j) % 500}" for j in range(40)) for i in range(200)]
    results: list = [None] * 4

    def read(slot: int) -> None:
        results[slot] = vocabulary.read(texts[slot * 30:slot * 30 + 110])

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(set(vocabulary.words)) == len(vocabulary.words) == 500
    for slot, words in enumerate(results):
        texts_read = texts[slot * 30:slot * 30 + 110]
        assert [vocabulary.words[i] for i in words.ids[:40]] == texts_read[0].split()


# --- retrieval.mode end to end ---------------------------------------------------------------

def demo_app(mode: str) -> BuiltinApp:
    cfg = load_config(DEMO / "rageval.yml")
    cfg = replace(cfg, retrieval=replace(cfg.retrieval, mode=mode))
    return BuiltinApp(cfg, load_corpus(cfg.corpus, cfg.root))


@pytest.fixture(scope="module")
def demo_questions() -> list[str]:
    import yaml
    return [c["question"] for c in yaml.safe_load((DEMO / "golden.yaml").read_text(encoding="utf-8"))["cases"]]


def test_bm25_mode_ranks_the_demo_as_bm25s_does(demo_questions):
    bm25s = pytest.importorskip("bm25s")
    app = demo_app("bm25")
    assert app.name == "builtin:bm25+extractive:2" and app.deterministic
    theirs = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    theirs.index([folded_words(c.indexed) for c in app.chunks], show_progress=False)  # ids are labels
    hits = app.retriever.search(demo_questions, 5)
    for question, ours in zip(demo_questions, hits, strict=True):
        scores = np.asarray(theirs.get_scores(folded_words(question)), dtype=np.float64)
        assert [s for _, s in ours] == pytest.approx([float(scores[row]) for row, _ in ours], abs=1e-4)
        assert [s for _, s in ours] == pytest.approx(sorted(scores, reverse=True)[:5], abs=1e-4)


def test_hybrid_mode_fuses_the_dense_and_bm25_rankings(demo_questions):
    hybrid, dense, lexical = (demo_app(m) for m in ("hybrid", "dense", "bm25"))
    assert hybrid.name == "builtin:rrf(local:hashed-ngrams-v1,bm25)+extractive:2" and hybrid.deterministic
    n = len(hybrid.chunks)
    for question, got in zip(demo_questions, hybrid.retriever.search(demo_questions, 5), strict=True):
        d, b = dense.retriever.search([question], n)[0], lexical.retriever.search([question], n)[0]
        rrf = {row: 0.0 for row in range(n)}
        for ranking in (d, b):
            for rank, (row, _) in enumerate(ranking, 1):
                rrf[row] += 1 / (60 + rank)
        want = sorted(rrf, key=lambda row: (-round(rrf[row], 6), row))[:5]
        assert [row for row, _ in got] == want


def test_hybrid_reads_the_corpus_words_once_into_one_vocabulary(monkeypatch):
    # An empty Vocabulary is falsy (it has a length), so `vocabulary or Vocabulary()` gave BM25 and
    # the embedder a vocabulary each, and the corpus was split and folded twice.
    reads = []
    real = Vocabulary.read
    monkeypatch.setattr(Vocabulary, "read", lambda self, texts: reads.append(len(texts)) or real(self, texts))
    app = demo_app("hybrid")
    assert app.retriever.lexical.vocabulary is app.retriever.embedder.vocabulary
    assert reads == [len(app.chunks)]


def test_unknown_mode_is_a_config_error(tmp_path):
    cfg = tmp_path / "rageval.yml"
    cfg.write_text("golden: g.yaml\ncorpus: docs\nretrieval: {mode: sparse}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"retrieval\.mode.*dense, bm25, hybrid"):
        load_config(cfg)

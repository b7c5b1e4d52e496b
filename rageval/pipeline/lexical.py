"""Lexical retrieval: BM25 over diacritic-folded words, and reciprocal-rank fusion with the vector
index for hybrid retrieval.

BM25 as Lucene scores it (the ``lucene`` variant of Kamphuis et al., ECIR 2020, which bm25s
implements too; tests/pipeline/test_lexical.py checks the two agree)::

    score(q, d) = Σ_{t ∈ q} idf(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    idf(t)      = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

with k1 = 1.5, b = 0.75; a word repeated in the query counts each time, words no chunk has
score nothing. A document's words are :func:`rageval.text.folded_words` ("Đổi trả" and "doi tra"
are the same two words), the same words the local embedder hashes.

Hybrid retrieval fuses the vector and BM25 rankings by reciprocal rank (Cormack et al., SIGIR
2009): ``rrf(d) = Σ_rankings 1 / (60 + rank(d))`` over each ranking's top 100 (or deeper when more
is asked), equal fused scores by the row's best rank in either ranking, then by row. Everything is integer counting and float64 sums in a fixed order, so
results do not depend on the process or its hash seed.

Why not the ``bm25s`` package: the scoring above is thirty lines of numpy, where bm25s would add a
runtime dependency (and scipy for its sparse matrices) for the same numbers.
"""

from __future__ import annotations

import array
import itertools
import re
import threading
import unicodedata
from collections.abc import Sequence

import numpy as np

from rageval.pipeline.hits import Hits, top_of
from rageval.text import fold

__all__ = ["RRF_DEPTH", "RRF_K", "WORD_FORMS", "BM25Index", "Vocabulary", "Words", "fuse", "fuse_hits"]

K1 = 1.5
B = 0.75
RRF_K = 60                   # the constant of reciprocal-rank fusion
RRF_DEPTH = 100              # each ranking's depth before fusion, at least
_FUSE_BLOCK = 2048           # queries fused at once
_MEMO_LIMIT = 500_000        # distinct tokens remembered before the memo starts over
_WORD = re.compile(r"\w+")  # a word: as rageval.text.folded_words finds them in the folded text
_SCORES_PER_BATCH = 1 << 20     # (query, chunk) scores held at once (8 MB); a query's postings are gathered alone
_WEIGHT_STEP = 1 << 20       # postings weighed per step at build time
_FOLDED_FIELD = "~"          # "both": a folded word's term, apart from the same letters written exactly


def _folded(token: str) -> list[str]:
    return _WORD.findall(fold(token))


def _exact(token: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFC", token.casefold()))


def _both(token: str) -> list[str]:
    return _exact(token) + [_FOLDED_FIELD + w for w in _folded(token)]


#: retrieval.bm25_words -> a token's terms. ``folded``: lower case without diacritics ("Trả" and "tra"
#: meet; so do "trả" (return) and "trà" (tea)); ``exact``: lower case as written (NFC); ``both``: the
#: exact words and the folded words as two fields of one index, so a diacritic-exact match scores
#: in both and a customer's unaccented query still meets the text.
WORD_FORMS = {"folded": _folded, "exact": _exact, "both": _both}


class Words:
    """The words of some texts as vocabulary indices: ``ids`` (int32) text after text, ``counts``
    how many belong to each text, ``starts`` where each text's begin in ``ids`` (plus the end)."""

    def __init__(self, ids: np.ndarray, counts: np.ndarray) -> None:
        self.ids, self.counts = ids, counts
        self.starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.counts)

    def batches(self, max_texts: int, max_words: int):
        """(first text, last text + 1) of consecutive runs of at most ``max_texts`` texts and (unless
        one text alone is longer) ``max_words`` words."""
        n, start, starts = len(self.counts), 0, self.starts
        while start < n:
            stop = min(n, start + max_texts)
            fits = int(np.searchsorted(starts, starts[start] + max_words, "right")) - 1
            stop = max(start + 1, min(stop, fits))
            yield start, stop
            start = stop


class Vocabulary:
    """Folded words → indices, growing as texts are read; safe to share between threads.

    A whitespace-separated token's words are the same wherever it occurs (folding works character
    by character and whitespace is never part of a word), so each distinct token is folded and
    split once and remembered as its words' indices: reading a corpus costs a split and a dict
    look-up per token.
    """

    def __init__(self, form: str = "folded") -> None:
        self.form = form
        self._terms = WORD_FORMS[form]
        self.words: list[str] = []                 # index -> word, in the order first seen
        self._index: dict[str, int] = {}
        self._memo: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.words)

    def _token(self, token: str) -> tuple[int, ...]:
        """The indices of a new token's words (by default :func:`rageval.text.folded_words` of the
        token: the word runs of its folded form; see :data:`WORD_FORMS`), remembered."""
        index, words = self._index, self.words
        ids = []
        for word in self._terms(token):
            i = index.get(word)
            if i is None:
                i = index[word] = len(words)
                words.append(word)
            ids.append(i)
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[token] = found = tuple(ids)
        return found

    def read(self, texts: Sequence[str]) -> Words:
        """The words of ``texts`` as vocabulary indices (new words are added)."""
        with self._lock:
            return self._read(texts)

    def _read(self, texts: Sequence[str]) -> Words:
        ids = array.array("i")
        counts = array.array("q")
        known, new = self._memo.get, self._token
        for text in texts:
            before = len(ids)       # a token without words is looked at again: () is falsy; they are few
            ids.fromlist(list(itertools.chain.from_iterable([known(t) or new(t) for t in text.split()])))
            counts.append(len(ids) - before)
        return Words(np.frombuffer(ids, dtype=np.int32), np.frombuffer(counts, dtype=np.int64))


class BM25Index:
    """BM25 (Lucene's variant, k1 = 1.5, b = 0.75) over ``texts``, one id per text.

    Postings are stored term by term: the documents holding each word and the word's precomputed
    BM25 weight there (float32), so a query is a gather and one weighted ``bincount``.
    ``vocabulary`` may be shared with the local embedder (the corpus's words are then read once).
    """

    name = "bm25"
    deterministic = True

    def __init__(self, texts: Sequence[str], ids: Sequence[str], *, vocabulary: Vocabulary | None = None,
                 words: Words | None = None, form: str = "folded") -> None:
        if len(texts) != len(ids):
            raise ValueError(f"BM25Index: {len(texts)} texts but {len(ids)} ids")
        self.ids: tuple[str, ...] = tuple(ids)
        self.vocabulary = vocabulary if vocabulary is not None else Vocabulary(form)   # an empty one is falsy
        if self.vocabulary.form != form:
            raise ValueError(f"BM25Index: a {self.vocabulary.form} vocabulary for {form} words")
        if words is None:
            words = self.vocabulary.read(list(texts))
        n = len(words)
        lengths = words.counts.astype(np.float64)
        avgdl = float(lengths.mean()) if n and lengths.sum() else 1.0
        docs, terms, tf = _term_frequencies(words)
        order = np.argsort(terms, kind="stable")                  # term by term, documents ascending
        docs, terms, tf = docs[order], terms[order], tf[order]
        del order
        df = np.bincount(terms, minlength=len(self.vocabulary))
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        self._weights = np.empty(len(docs), dtype=np.float32)
        for a in range(0, len(docs), _WEIGHT_STEP):              # bounded float64 temporaries
            t, d, f = terms[a:a + _WEIGHT_STEP], docs[a:a + _WEIGHT_STEP], tf[a:a + _WEIGHT_STEP].astype(np.float64)
            self._weights[a:a + _WEIGHT_STEP] = idf[t] * f / (f + K1 * (1.0 - B + B * lengths[d] / avgdl))
        self._starts = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        self._docs = docs

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, queries: Sequence[str], top_k: int) -> list[list[tuple[int, float]]]:
        """For each query, up to ``top_k`` ``(row index, BM25 score)`` pairs, best first; equal
        scores (documents sharing no word with the query score 0) by row index."""
        return self.search_hits(queries, top_k).lists()

    def search_hits(self, queries: Sequence[str], top_k: int, *, words: Words | None = None) -> Hits:
        """:meth:`search`, as arrays. ``words``: the queries' words as this index's vocabulary read
        them (a local embedder sharing the vocabulary reads them too)."""
        if words is None:
            words = self.vocabulary.read(list(queries))
        elif len(words) != len(queries):
            raise ValueError(f"BM25Index.search_hits: {len(words)} texts' words for {len(queries)} queries")
        n, m = len(self.ids), len(words)
        if n == 0 or top_k == 0:
            return Hits.empty(m)
        terms = words.ids.astype(np.int64)
        known = terms < len(self._starts) - 1            # a word first seen in a query has no postings
        first, last = np.zeros(len(terms), dtype=np.int64), np.zeros(len(terms), dtype=np.int64)
        first[known], last[known] = self._starts[terms[known]], self._starts[terms[known] + 1]
        k = min(int(top_k), n)
        out = Hits(np.full((m, k), -1, dtype=np.int64), np.zeros((m, k)))
        step = max(1, _SCORES_PER_BATCH // n)
        for start in range(0, m, step):
            stop = min(m, start + step)
            span = slice(int(words.starts[start]), int(words.starts[stop]))
            hits = top_of(self._scores(first[span].tolist(), last[span].tolist(),
                                       words.counts[start:stop].tolist()), k)
            out.rows[start:stop], out.scores[start:stop] = hits.rows, hits.scores
        return out

    def _scores(self, first: list[int], last: list[int], counts: list[int]) -> np.ndarray:
        """(len(counts), n) BM25 scores of queries whose words' postings are first..last, ``counts``
        words per query: per query one weighted bincount of its words' postings, word after word (so
        a chunk's weights are summed in the query's word order, from 0.0, in float64)."""
        scores = np.zeros((len(counts), len(self.ids)))
        docs, weights = self._docs, self._weights
        at = 0
        for row, count in enumerate(counts):
            spans = [(a, b) for a, b in zip(first[at:at + count], last[at:at + count], strict=True) if b > a]
            at += count
            if spans:
                scores[row] = np.bincount(np.concatenate([docs[a:b] for a, b in spans]),
                                          weights=np.concatenate([weights[a:b] for a, b in spans]),
                                          minlength=len(self.ids))
        return scores


def _term_frequencies(words: Words) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document, term, count) of every distinct word of every document, documents ascending
    (int32 arrays: a 100,000-chunk corpus has ~7 million of them)."""
    docs, terms, counts = [], [], []
    vocabulary = int(words.ids.max()) + 1 if len(words.ids) else 1
    for start, stop in words.batches(4096, 1 << 20):
        lo, hi = words.starts[start], words.starts[stop]
        row = np.repeat(np.arange(start, stop, dtype=np.int64), words.counts[start:stop])
        keys, tf = np.unique(row * vocabulary + words.ids[lo:hi], return_counts=True)
        docs.append((keys // vocabulary).astype(np.int32))
        terms.append((keys % vocabulary).astype(np.int32))
        counts.append(tf.astype(np.int32))
    if not docs:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    return np.concatenate(docs), np.concatenate(terms), np.concatenate(counts)


def fuse(rankings: Sequence[Sequence[tuple[int, float]]], depth: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of several rankings of the same rows: the ``depth`` best
    ``(row, Σ 1/(60 + rank))`` pairs, score descending (6 decimals), then the row's best rank in
    any one ranking, then row ascending."""
    fused: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranking in rankings:
        for rank, (row, _) in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + 1.0 / (RRF_K + rank)
            best_rank[row] = min(rank, best_rank.get(row, rank))
    best = sorted(((round(score, 6) + 0.0, best_rank[row], row) for row, score in fused.items()),
                  key=lambda x: (-x[0], x[1], x[2]))
    return [(row, score) for score, _, row in best[:depth]]


def fuse_hits(rankings: Sequence[Hits], depth: int) -> Hits:
    """:func:`fuse` of every query at once: the i-th query's rankings are row i of each of
    ``rankings``. The sums run in the same order (ranking after ranking, from 0.0) and are rounded as
    :func:`round` does, so the results are :func:`fuse`'s, bit for bit. 2,048 queries at a time."""
    m = len(rankings[0])
    blocks = [_fuse_block([Hits(h.rows[a:a + _FUSE_BLOCK], h.scores[a:a + _FUSE_BLOCK]) for h in rankings], depth)
              for a in range(0, m, _FUSE_BLOCK)]
    if not blocks:
        return Hits.empty(0)
    return Hits(np.concatenate([b.rows for b in blocks]), np.concatenate([b.scores for b in blocks]))


def _fuse_block(rankings: Sequence[Hits], depth: int) -> Hits:
    m = len(rankings[0])
    width = 1 + max(int(h.rows.max(initial=-1)) for h in rankings)
    keys, ranks = [], []
    for hits in rankings:
        valid = hits.rows >= 0
        rank = np.broadcast_to(np.arange(1, hits.rows.shape[1] + 1), hits.rows.shape)
        which = np.broadcast_to(np.arange(m)[:, None], hits.rows.shape)
        keys.append(which[valid].astype(np.int64) * width + hits.rows[valid])
        ranks.append(rank[valid])
    unique, where = np.unique(np.concatenate(keys), return_inverse=True)
    rank = np.concatenate(ranks)
    fused = np.bincount(where, weights=1.0 / (RRF_K + rank), minlength=len(unique))
    best_rank = np.full(len(unique), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best_rank, where, rank)
    # A row summing to less than 1/(60 + depth) − 1e-6 is below rank ``depth`` in every ranking
    # holding it, so one of those rankings has ``depth`` rows above it, each summing to 1/(60 + depth)
    # or more; its sum rounds below theirs, and it is never among the best: only the others are ranked.
    kept = np.flatnonzero(fused >= 1.0 / (RRF_K + depth) - 1e-6)
    unique, fused, best_rank = unique[kept], fused[kept], best_rank[kept]
    values, back = np.unique(fused, return_inverse=True)
    rounded = np.array([round(v, 6) + 0.0 for v in values.tolist()], dtype=np.float64)[back]
    return Hits.best(unique // width, unique % width, rounded, m, depth, tie=best_rank)

"""The built-in RAG pipeline, all from the config: chunk → embed and/or index words → retrieve → generate."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from rageval.errors import ConfigError
from rageval.golden.corpus import Corpus
from rageval.golden.set import Case
from rageval.pipeline.apps import Retrieved, Trace
from rageval.pipeline.chunking import Chunk, chunk_corpus, content_order
from rageval.pipeline.embedding import Embedder, document_rows, make_embedder, query_rows
from rageval.pipeline.generation import (
    ChatGenerator,
    ExtractiveGenerator,
    Generated,
    Generator,
)
from rageval.pipeline.index import VectorIndex
from rageval.pipeline.lexical import RRF_DEPTH, BM25Index, fuse_hits
from rageval.settings import Config
from rageval.text import detect_language

#: questions searched at a time (20,000 hybrid questions over 10,000 chunks at once peaked at 559 MB, in
#: batches of 2,048 at 309 MB, with less CPU)
SEARCH_BATCH = 2048
#: context chunks per chunk of the index from which the chunks are read before worker processes fork
#: (BuiltinApp.before_fork). Two workers, 10,000 Zipf-like chunks, a run's CPU: 8.8 -> 8.6 s at five,
#: 26.0 -> 23.9 s at twenty; at one and 2.5 a stage probe found it even (docs/benchmarks.md, eighth round)
READ_AHEAD = 4


class Retriever:
    """The chunks' retrieval as ``retrieval.mode`` says: ``dense`` (the embedder and a
    :class:`VectorIndex`), ``bm25`` (a :class:`BM25Index`, no embedder) or ``hybrid`` (both, fused by
    reciprocal rank; they share the local embedder's vocabulary, so the corpus's words are split once)."""

    def __init__(self, cfg: Config, chunks: Sequence[Chunk], client: Any = None) -> None:
        mode = cfg.retrieval.mode
        texts, ids = [c.indexed for c in chunks], [c.id for c in chunks]      # section ids are labels, not words
        self.embedder: Embedder | None = None if mode == "bm25" else make_embedder(cfg.embedding, client)
        self.index: VectorIndex | None = None
        self.lexical: BM25Index | None = None
        form = cfg.retrieval.bm25_words
        shared = getattr(self.embedder, "vocabulary", None) if mode == "hybrid" and form == "folded" else None
        words = shared.read(texts) if shared is not None else None
        if mode != "dense":       # first: its build's temporaries are gone before the vector index's
            self.lexical = BM25Index(texts, ids, vocabulary=shared, words=words, form=form)
        if self.embedder is not None:
            self.embedder.fit(texts, **({} if words is None else {"words": words}))
            del words
            self.index = VectorIndex(document_rows(self.embedder, texts), ids, copy=False)
        dense = self.embedder.name if self.embedder is not None else ""
        bm25 = "bm25" if form == "folded" else f"bm25({form})"
        self.name = {"dense": dense, "bm25": bm25}.get(mode, f"rrf({dense},{bm25})")
        self.deterministic = self.embedder is None or bool(self.embedder.deterministic)
        self.size = len(chunks)

    def search(self, questions: Sequence[str], depth: int) -> list[list[tuple[int, float]]]:
        """For each question, up to ``depth`` ``(chunk row, score)`` pairs, best first; at most
        ``SEARCH_BATCH`` questions at a time, so that a search's working memory (the rankings fused
        at ``RRF_DEPTH``, the shortlists) stays one batch's: the same pairs, whatever the batch."""
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(questions), SEARCH_BATCH):
            out += self._search(questions[start:start + SEARCH_BATCH], depth)
        return out

    def _search(self, questions: Sequence[str], depth: int) -> list[list[tuple[int, float]]]:
        if self.index is None or self.embedder is None:
            return self.lexical.search(questions, depth)  # type: ignore[union-attr]
        if self.lexical is None:
            return self.index.search(query_rows(self.embedder, questions), depth)
        wide = min(self.size, max(depth, RRF_DEPTH))
        words = None
        if self.lexical.vocabulary is getattr(self.embedder, "vocabulary", None):   # one vocabulary: read once
            words = self.lexical.vocabulary.read(list(questions))
            queries = self.embedder.embed_query_rows(questions, words=words)  # type: ignore[attr-defined]
        else:
            queries = query_rows(self.embedder, questions)
        dense = self.index.search_hits(queries, wide, scores=False)                # fusion reads ranks only
        return fuse_hits([dense, self.lexical.search_hits(questions, wide, words=words)], depth).lists()


class BuiltinApp:
    def __init__(self, cfg: Config, corpus: Corpus, client: Any = None) -> None:
        started = time.monotonic()
        self.cfg = cfg
        # rows in content order: equal scores are then broken by content, never by file order or name
        self.chunks: list[Chunk] = content_order(chunk_corpus(corpus, cfg.chunking.size, cfg.chunking.overlap,
                                                              merge_sections=cfg.chunking.merge_sections))
        self.retriever = Retriever(cfg, self.chunks, client)
        self.language = cfg.language if cfg.language != "auto" else detect_language(s.text for s in corpus.sections)
        self.generator: Generator | None = make_generator(cfg, client, self.language, len(self.chunks))
        self.deterministic = bool(self.retriever.deterministic and (self.generator is None or self.generator.deterministic))
        self.name = f"builtin:{self.retriever.name}+{self.generator.name if self.generator else 'none'}"
        # Retrieve deep enough that every token budget can be filled, not only top_k.
        min_tokens = max(1, min((c.tokens for c in self.chunks), default=1))
        budget_depth = math.ceil(max(cfg.retrieval.token_budgets, default=0) / min_tokens)
        self.depth = min(len(self.chunks), max(cfg.retrieval.top_k, budget_depth))
        self._rankings: dict[str, tuple[Retrieved, ...]] = {}
        self.index_seconds = time.monotonic() - started

    def prepare(self, cases: Sequence[Case]) -> None:
        """Retrieve for every question in one batch (one matrix product, one postings pass), ahead of answer()."""
        todo = [c for c in cases if c.id not in self._rankings]
        if not todo:
            return
        for case, hits in zip(todo, self.retriever.search([c.question for c in todo], self.depth), strict=True):
            self._rankings[case.id] = tuple(self.chunks[row].retrieved(round(float(score), 6)) for row, score in hits)

    def before_fork(self, cases: int) -> None:
        """Ahead of worker processes answering ``cases`` cases: what each of them would otherwise
        do again, done once here and inherited. When the cases' contexts hold at least ``READ_AHEAD``
        times as many chunks as the index, each worker would meet, and read, most chunks: the
        extractive generator reads them all now."""
        contexts = cases * self.cfg.retrieval.top_k
        if isinstance(self.generator, ExtractiveGenerator) and contexts >= READ_AHEAD * len(self.chunks):
            self.generator.read_ahead(self.chunks)

    def after_fork(self) -> None:
        """Once the workers forked: this process lets go of what it read for them and has not used (at
        10,000 chunks about 25 MB of objects; the workers hold their own copy)."""
        if isinstance(self.generator, ExtractiveGenerator):
            self.generator.forget_read_ahead()

    def answer(self, case: Case, *, fresh: bool = False, previous: Trace | None = None) -> Trace:
        started = time.monotonic()
        if previous is not None and previous.retrieved is not None and self.retriever.deterministic:
            retrieved = previous.retrieved          # retrieval is deterministic: reuse it on a re-run
            self._rankings.pop(case.id, None)
        else:
            self.prepare([case])
            retrieved = self._rankings.pop(case.id)   # held until answered: memory is one block's rankings
        context = retrieved[: self.cfg.retrieval.top_k]
        gen: Generated = (self.generator.generate(case.question, context, case_id=case.id, fresh=fresh)
                          if self.generator else Generated(None))
        return Trace(case.id, gen.answer, retrieved, gen.usage, round((time.monotonic() - started) * 1000, 1),
                     gen.error, context_k=self.cfg.retrieval.top_k)


def make_generator(cfg: Config, client: Any, language: str = "vi", chunks: int = 0) -> Generator | None:
    """The generator ``generation.provider`` names; ``chunks``: the index's size (the extractive
    generator keeps that many chunks' sentences, so each chunk is read once)."""
    g = cfg.generation
    if g.provider == "none":
        return None
    if g.provider == "extractive":
        return ExtractiveGenerator(g.max_sentences, language=language, cache_size=chunks)
    if client is None:
        raise ConfigError(f"{cfg.path}: generation.provider is openai but no model client could be built; "
                          "check the llm: section.")
    if g.model is None or g.prompt is None:  # config validation guarantees both; keep the check honest
        raise ConfigError(f"{cfg.path}: generation.provider openai needs generation.model and generation.prompt.")
    return ChatGenerator(client, g.model, g.prompt, g.temperature, g.max_tokens, g.seed)

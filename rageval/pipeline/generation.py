"""Generators: turn a question and its retrieved context into an answer.

- ``extractive`` (offline, deterministic): picks the context sentences that best cover the
  question's words (IDF-weighted, diacritic-folded), in the order they appear; declines, in the
  project's language (:data:`DECLINES`), when no sentence covers enough of the question.
- ``openai``: a chat completion through ``rageval.pipeline.llm`` with the user's jinja2 prompt template,
  rendered with ``question`` and ``chunks`` (each with ``chunk_id``, ``sections``, ``text``). A
  model's refusal (``content: null``) becomes the answer as its refusal text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jinja2

from rageval.errors import ConfigError, ModelError
from rageval.pipeline.apps import Retrieved
from rageval.text import folded_words, sentences

#: what the extractive generator answers when no sentence covers the question, by language
#: (rageval.metrics.rules recognises both as declines)
DECLINES = {"vi": "Tài liệu không đề cập thông tin này.", "en": "The documents do not cover this."}
DECLINE = DECLINES["vi"]
# Function words that say nothing about which sentence answers (folded Vietnamese + English), and,
# for an English corpus, more English ones (folded Vietnamese words collide with some: "it" is ít,
# "may" is máy, "so" is số, so they are function words only where the corpus is English).
_STOP = frozenset(
    "thi la co khong duoc cua va cho voi nhu nao gi bao lau may mot nhung cac toi minh ban em a oi "
    "neu khi da se dang bi thi roi nay do ma de o tai trong ra vao len xuong "
    "the a an is are do does can i my to of in for on with what how when which".split())
_STOP_EN = _STOP | frozenset(
    "was were be been did could would should will shall might must me you your we our us it its they them "
    "their this that these those there here at by from about into over as or and but if so than then who whom "
    "where why any some have has had get got still way just also very".split())
STOP_WORDS = {"vi": _STOP, "en": _STOP_EN}


@dataclass(frozen=True)
class Generated:
    answer: str | None
    usage: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    cached: bool = False


class Generator(Protocol):
    name: str
    deterministic: bool

    def generate(self, question: str, chunks: Sequence[Retrieved], *, case_id: str, fresh: bool = False) -> Generated:
        ...


def _words(text: str, stop: frozenset[str] = _STOP) -> list[str]:
    return [w for w in folded_words(text) if w not in stop]


#: a sentence as the extractive generator reads it: its section heading, where it sits in its chunk's
#: text (start, end) and its folded content words in order
Sentence = tuple[str, int, int, tuple[str, ...]]

#: chunks whose sentences an extractive generator keeps at least (an app sizes it to its index)
CACHE_MIN = 2048


class ExtractiveGenerator:
    """Copies the context sentences that best cover the question's words.

    Every sum over a set of terms is :func:`math.fsum` (exact, so independent of the set's
    iteration order and hence of ``PYTHONHASHSEED``); ties are broken by position. A chunk's
    sentences are split and their words folded once per generator, not once per case that
    retrieves the chunk: the generator keeps them for up to ``cache_size`` chunks (the builtin app
    passes its chunk count, so every chunk is read at most once), as words and offsets — a few
    hundred bytes a sentence — and matches a question's terms against them on the fly.
    """

    deterministic = True

    def __init__(self, max_sentences: int = 2, min_coverage: float = 0.2, language: str = "vi",
                 cache_size: int = CACHE_MIN) -> None:
        self.max_sentences, self.min_coverage = max_sentences, min_coverage
        self.decline, self.stop = DECLINES[language], STOP_WORDS[language]
        self.name = f"extractive:{max_sentences}"
        self.cache_size = max(cache_size, CACHE_MIN)
        self._read: dict[tuple[str, tuple[str, ...]], tuple[Sentence, ...]] = {}

    def sentences_of(self, chunk: Retrieved) -> tuple[Sentence, ...]:
        """The chunk's sentences, read once (a full cache is emptied, not grown: memory stays bounded)."""
        key = (chunk.text, tuple(chunk.sections))
        found = self._read.get(key)
        if found is None:
            if len(self._read) >= self.cache_size:
                self._read.clear()
            found = self._read[key] = _chunk_sentences(chunk.text, key[1], self.stop)
        return found

    def generate(self, question: str, chunks: Sequence[Retrieved], *, case_id: str, fresh: bool = False) -> Generated:
        q_terms = _terms(question, self.stop)
        if not q_terms:
            return Generated(self.decline)
        # a bigram "a_b" of the question can only follow a word that is its text before an underscore
        heads = frozenset(t[:i] for t in q_terms for i, ch in enumerate(t) if ch == "_")
        candidates: list[tuple[int, frozenset[str]]] = []   # (chunk index, the question's terms it holds)
        places: list[tuple[str, int, int]] = []             # (section heading, start, end) in that chunk
        for ci, chunk in enumerate(chunks):
            for heading, start, end, words in self.sentences_of(chunk):
                candidates.append((ci, _matched(words, q_terms, heads)))
                places.append((heading, start, end))
        if not candidates:
            return Generated(self.decline)
        df: dict[str, int] = {}
        for _, held in candidates:
            for t in held:
                df[t] = df.get(t, 0) + 1
        n = len(candidates)
        idf = {t: math.log(1 + n / max(df.get(t, 1), 1)) for t in q_terms}  # unseen words weigh as the rarest seen
        unigrams = frozenset(t for t in q_terms if "_" not in t)
        total = math.fsum(idf[t] for t in unigrams) or 1.0
        # coverage: IDF share of the question's words a sentence contains; bigrams break ties.
        scored = sorted(((math.fsum(idf[t] for t in held & unigrams) / total, math.fsum(idf[t] for t in held), -pos)
                         for pos, (_, held) in enumerate(candidates)), reverse=True)
        if scored[0][0] < self.min_coverage:
            return Generated(self.decline)
        # Further sentences come from the best sentence's own section: one passage answers.
        home = (candidates[-scored[0][2]][0], places[-scored[0][2]][0])
        best = [-s[2] for s in scored
                if (candidates[-s[2]][0], places[-s[2]][0]) == home and s[0] >= self.min_coverage][: self.max_sentences]
        best.sort()
        text = chunks[home[0]].text
        return Generated(" ".join(text[places[p][1]:places[p][2]] for p in best))


def _terms(text: str, stop: frozenset[str] = _STOP) -> frozenset[str]:
    """Folded content words and adjacent-word pairs (``"doi_tra"``) of a text."""
    words = _words(text, stop)
    return frozenset(words).union(f"{a}_{b}" for a, b in zip(words, words[1:], strict=False))


def _matched(words: tuple[str, ...], q_terms: frozenset[str], heads: frozenset[str]) -> frozenset[str]:
    """``_terms`` of the sentence whose content words are ``words``, intersected with ``q_terms``,
    without building the sentence's pairs unless one could be a term of the question."""
    held = q_terms.intersection(words)
    if heads.isdisjoint(words):
        return held
    pairs = {f"{a}_{b}" for a, b in zip(words, words[1:]) if a in heads}
    return held | q_terms.intersection(pairs) if pairs else held


def _chunk_sentences(text: str, sections: tuple[str, ...] = (), stop: frozenset[str] = _STOP) -> tuple[Sentence, ...]:
    """(section heading, start, end, content words) of each sentence of a chunk text, in order;
    ``text[start:end]`` is the sentence. Heading lines — a line that starts with the id of one of
    the chunk's ``sections`` ("DT-1 Thời hạn") — name the section of the sentences below them and
    are not sentences; a paragraph that only looks like one ("Same-day delivery is …") is text."""
    out = []
    section = ""
    at = 0
    for line in text.splitlines():
        first = line.strip().split(" ", 1)[0]
        heading = first in sections
        if heading:
            section = first
        if not line.strip() or heading:
            continue
        for sent in sentences(line.lstrip("-*• ").strip()):
            start = text.find(sent, at)          # in order: found at or after the previous one's end
            at = start + len(sent)
            out.append((section, start, at, tuple(_words(sent, stop))))
    return tuple(out)


class ChatGenerator:
    deterministic = False

    def __init__(self, client: Any, model: str, prompt_path: Path, temperature: float = 0.0,
                 max_tokens: int = 400, seed: int | None = None) -> None:
        self.client, self.model = client, model
        self.temperature, self.max_tokens, self.seed = temperature, max_tokens, seed
        self.name = f"openai:{model}"
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(prompt_path.parent)),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
        try:
            self.template = env.get_template(prompt_path.name)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(f"{prompt_path}: line {exc.lineno}: prompt template error: {exc.message}. "
                              "Fix the jinja2 syntax there.") from None

    def render(self, question: str, chunks: Sequence[Retrieved]) -> str:
        try:
            return self.template.render(question=question, chunks=list(chunks))
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"{self.template.filename}: {exc.message}. The template gets `question` and `chunks` "
                              "(each with chunk_id, sections, text).") from None

    def generate(self, question: str, chunks: Sequence[Retrieved], *, case_id: str, fresh: bool = False) -> Generated:
        messages = [{"role": "user", "content": self.render(question, chunks)}]
        try:
            result = self.client.chat(messages, model=self.model, temperature=self.temperature, seed=self.seed,
                                      max_tokens=self.max_tokens, stage="generation", case_id=case_id,
                                      use_cache=not fresh)
        except ModelError as exc:
            return Generated(None, error=f"generation: {exc}")
        # a refusal (content null) is what the customer would read: it is the answer, and the
        # checks grade it (a refusal where the documents answer fails the refusal rule)
        answer = result.text if getattr(result, "refusal", None) is None else result.refusal
        return Generated(answer, {"prompt_tokens": result.prompt_tokens,
                                  "completion_tokens": result.completion_tokens}, cached=result.cached)

"""Generators: turn a question and its retrieved context into an answer.

- ``extractive`` (offline, deterministic): picks the context sentences that best cover the
  question's words (IDF-weighted, diacritic-folded), in the order they appear; declines with
  ``DECLINE`` when no sentence covers enough of the question.
- ``openai``: a chat completion through ``rageval.pipeline.llm`` with the user's jinja2 prompt template,
  rendered with ``question`` and ``chunks`` (each with ``chunk_id``, ``sections``, ``text``). A
  model's refusal (``content: null``) becomes the answer as its refusal text.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import jinja2

from rageval.errors import ConfigError, ModelError
from rageval.pipeline.apps import Retrieved
from rageval.text import folded_words, sentences

DECLINE = "Tài liệu không đề cập thông tin này."
_HEADING_LINE = re.compile(r"^[A-Za-z][\w.]*-[\w.-]+\b")
# Function words that say nothing about which sentence answers (folded Vietnamese + English).
_STOP = frozenset(
    "thi la co khong duoc cua va cho voi nhu nao gi bao lau may mot nhung cac toi minh ban em a oi "
    "neu khi da se dang bi thi roi nay do ma de o tai trong ra vao len xuong "
    "the a an is are do does can i my to of in for on with what how when which".split())


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


def _words(text: str) -> list[str]:
    return [w for w in folded_words(text) if w not in _STOP]


class ExtractiveGenerator:
    """Copies the context sentences that best cover the question's words.

    Every sum over a set of terms is :func:`math.fsum` (exact, so independent of the set's
    iteration order and hence of ``PYTHONHASHSEED``); ties are broken by position. A chunk's
    sentences and their terms are read once, not once per case that retrieves it
    (:func:`_chunk_sentences` remembers the last 2,048 chunks: a corpus of a few thousand sections
    fits, and the memory stays bounded — ~20 KB a chunk).
    """

    deterministic = True

    def __init__(self, max_sentences: int = 2, min_coverage: float = 0.2) -> None:
        self.max_sentences, self.min_coverage = max_sentences, min_coverage
        self.name = f"extractive:{max_sentences}"

    def generate(self, question: str, chunks: Sequence[Retrieved], *, case_id: str, fresh: bool = False) -> Generated:
        candidates: list[tuple[int, str, frozenset[str]]] = []
        origin: list[str] = []  # chunk index + section heading each sentence came from
        for ci, chunk in enumerate(chunks):
            for heading, sent, terms in _chunk_sentences(chunk.text):
                candidates.append((len(candidates), sent, terms))
                origin.append(f"{ci}:{heading}")
        q_terms = _terms(question)
        if not candidates or not q_terms:
            return Generated(DECLINE)
        df: dict[str, int] = {}
        for _, _, terms in candidates:
            for t in terms & q_terms:
                df[t] = df.get(t, 0) + 1
        n = len(candidates)
        idf = {t: math.log(1 + n / max(df.get(t, 1), 1)) for t in q_terms}  # unseen words weigh as the rarest seen
        unigrams = frozenset(t for t in q_terms if "_" not in t)
        total = math.fsum(idf[t] for t in unigrams) or 1.0
        # coverage: IDF share of the question's words a sentence contains; bigrams break ties.
        scored = sorted(((math.fsum(idf[t] for t in terms & unigrams) / total,
                          math.fsum(idf[t] for t in terms & q_terms), -pos, sent)
                         for pos, sent, terms in candidates), reverse=True)
        if scored[0][0] < self.min_coverage:
            return Generated(DECLINE)
        # Further sentences come from the best sentence's own section: one passage answers.
        home = origin[-scored[0][2]]
        best = [s for s in scored if origin[-s[2]] == home and s[0] >= self.min_coverage][: self.max_sentences]
        best.sort(key=lambda s: -s[2])
        return Generated(" ".join(s[3] for s in best))


def _terms(text: str) -> frozenset[str]:
    """Folded content words and adjacent-word pairs (``"doi_tra"``) of a text."""
    words = _words(text)
    return frozenset(words).union(f"{a}_{b}" for a, b in zip(words, words[1:], strict=False))


@functools.lru_cache(maxsize=2048)
def _chunk_sentences(text: str) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """(section heading, sentence, terms) of each sentence of a chunk text, in order. Heading
    lines ("DT-1 Thời hạn") name the section of the sentences below them and are not sentences."""
    out = []
    section = ""
    for line in text.splitlines():
        heading = _HEADING_LINE.match(line.strip())
        if heading:
            section = heading.group(0)
        if not line.strip() or heading:
            continue
        out.extend((section, sent, _terms(sent)) for sent in sentences(line.lstrip("-*• ").strip()))
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

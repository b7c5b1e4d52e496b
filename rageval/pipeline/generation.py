"""Generators: turn a question and its retrieved context into an answer.

- ``extractive`` (offline, deterministic): picks the context sentences that best cover the
  question's words (IDF-weighted, diacritic-folded), in the order they appear; declines, in the
  project's language (:data:`DECLINES`), when no sentence covers enough of the question.
- ``openai``: a chat completion through ``rageval.pipeline.llm`` with the user's jinja2 prompt template,
  rendered with ``question`` and ``chunks`` (each with ``chunk_id``, ``sections``, ``text``). A
  model's refusal (``content: null``) becomes the answer as its refusal text.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import Any, Protocol

import jinja2

from rageval.errors import ConfigError, ModelError
from rageval.pipeline.apps import Retrieved
from rageval.pipeline.chunking import Chunk
from rageval.text import folded_words, folded_words_once

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
#: a chunk read ahead of its first use (ExtractiveGenerator.read_ahead): its word masks wait for a second use
_READ_AHEAD: dict[str, int] = {}


class ExtractiveGenerator:
    """Copies the context sentences that best cover the question's words.

    Every sum over a set of terms is :func:`math.fsum` (exact, so independent of the set's
    iteration order and hence of ``PYTHONHASHSEED``); ties are broken by position. A chunk's
    sentences are split and their words folded once per generator, not once per case that
    retrieves the chunk: the generator keeps them for up to ``cache_size`` chunks (the builtin app
    passes its chunk count, so every chunk is read at most once), as words and offsets — about
    2 KB a chunk of eight sentences — and matches a question's terms against them on the fly,
    scoring only the sentences that hold one (a sentence holding none scores 0, never picked).
    From a chunk's second use on it also keeps which of its sentences hold each word (a bit mask a
    word, about 1.6 KB a chunk): a question's terms are then looked up, not intersected with every
    sentence of the chunk.
    """

    deterministic = True

    def __init__(self, max_sentences: int = 2, min_coverage: float = 0.2, language: str = "vi",
                 cache_size: int = CACHE_MIN) -> None:
        self.max_sentences, self.min_coverage = max_sentences, min_coverage
        self.decline, self.stop = DECLINES[language], STOP_WORDS[language]
        self.name = f"extractive:{max_sentences}"
        self.cache_size = max(cache_size, CACHE_MIN)
        self._read: dict[tuple[str, tuple[str, ...]], tuple[tuple[Sentence, ...], dict[str, int] | None]] = {}

    def sentences_of(self, chunk: Retrieved) -> tuple[Sentence, ...]:
        """The chunk's sentences, read once (a full cache is emptied, not grown: memory stays bounded)."""
        return self._chunk(chunk)[0]

    def _chunk(self, chunk: Retrieved) -> tuple[tuple[Sentence, ...], dict[str, int] | None]:
        """The chunk's sentences, read once, and from its second use on which of them hold each word
        (:func:`_word_masks`: they cost about as much as they save on one use, so a chunk only one
        question retrieves is matched sentence by sentence)."""
        key = (chunk.text, tuple(chunk.sections))
        found = self._read.get(key)
        if found is None:
            if len(self._read) >= self.cache_size:
                self._read.clear()
            found = self._read[key] = (_chunk_sentences(chunk.text, key[1], self.stop), None)
        elif found[1] is _READ_AHEAD:       # read by read_ahead: this is its first use
            found = self._read[key] = (found[0], None)
        elif found[1] is None:
            found = self._read[key] = (found[0], _word_masks(found[0]))
        return found

    def read_ahead(self, chunks: Iterable[Chunk]) -> None:
        """Read the sentences of ``chunks`` now, up to the cache's size, as their first use would
        (the builtin app, before its worker processes fork: what each would read again, read once)."""
        read, stop = self._read, self.stop
        for chunk in chunks:
            if len(read) >= self.cache_size:
                return
            key = (chunk.text, tuple(chunk.sections))
            if key not in read:
                read[key] = (_chunk_sentences(chunk.text, key[1], stop), _READ_AHEAD)

    def forget_read_ahead(self) -> None:
        """Let go of the chunks read ahead and not used since (once the workers that use them forked)."""
        self._read = {key: found for key, found in self._read.items() if found[1] is not _READ_AHEAD}

    def generate(self, question: str, chunks: Sequence[Retrieved], *, case_id: str, fresh: bool = False) -> Generated:
        q_terms = _terms(question, self.stop)
        if not q_terms:
            return Generated(self.decline)
        chunked = [self._chunk(chunk) for chunk in chunks]
        read = [sentences for sentences, _ in chunked]
        firsts = list(itertools.accumulate(map(len, read), initial=0))    # chunk -> its first position
        n = firsts[-1]
        if not n:
            return Generated(self.decline)
        order, keys, df = _holding(q_terms, chunked, firsts)
        idf = [math.log(1 + n / max(d, 1)) for d in df]  # unseen words weigh as the rarest seen
        unigrams = sum(1 << j for j, t in enumerate(order) if "_" not in t)
        scored = _scores(keys, idf, unigrams, every=self.min_coverage <= 0)
        if not scored or scored[0][0] < self.min_coverage:
            return Generated(self.decline)

        # Further sentences come from the best sentence's own section: one passage answers.
        home_ci = bisect.bisect_right(firsts, -scored[0][2]) - 1
        lo, hi, home = firsts[home_ci], firsts[home_ci + 1], read[home_ci]
        section = home[-scored[0][2] - lo][0]
        best = []
        for coverage, _, neg in scored:
            if lo <= -neg < hi and coverage >= self.min_coverage and home[-neg - lo][0] == section:
                best.append(home[-neg - lo])
                if len(best) == self.max_sentences:
                    break
        best.sort(key=lambda sent: sent[1])
        text = chunks[home_ci].text
        return Generated(" ".join(text[start:end] for _, start, end, _ in best))


def _terms(text: str, stop: frozenset[str] = _STOP) -> frozenset[str]:
    """Folded content words and adjacent-word pairs (``"doi_tra"``) of a text."""
    words = _words(text, stop)
    return frozenset(words).union(f"{a}_{b}" for a, b in zip(words, words[1:], strict=False))


def _holding(q_terms: frozenset[str], chunks: Sequence[tuple[tuple[Sentence, ...], dict[str, int] | None]],
             firsts: Sequence[int]) -> tuple[list[str], list[int], list[int]]:
    """The question's terms in an order (term ``j`` is ``order[j]``), which of them each sentence
    holds, as a bit mask a position (bit ``j``: it holds ``order[j]``; positions count the chunks'
    sentences one after another, chunk ``ci``'s from ``firsts[ci]``), and how many sentences hold
    each term. A sentence holds a term that is one of its words or a pair of adjacent words joined
    by ``_`` (a word may hold ``_`` itself, so every split of a term at a ``_`` is tried)."""
    order = list(q_terms)
    bit = {t: 1 << j for j, t in enumerate(order)}
    by_head: dict[str, list[tuple[str, str]]] = {}       # a -> (term, b) for each split a_b of a term
    for t in order:
        if "_" in t:
            for i in _underscores(t):
                by_head.setdefault(t[:i], []).append((t, t[i + 1:]))
    heads = frozenset(by_head)
    keys = [0] * firsts[-1]
    where = dict.fromkeys(order, 0)                      # term -> the positions holding it, as a bit mask
    for (sentences, masks), first in zip(chunks, firsts, strict=False):
        if masks is not None:
            _held_by_masks(q_terms, by_head, bit, sentences, masks, first, keys, where)
            continue
        for pos, sent in enumerate(sentences, first):
            words = sent[3]
            terms = q_terms.intersection(words)
            if not heads.isdisjoint(words):
                pairs = [t for a in heads.intersection(words) for t, b in by_head[a]
                         if t not in terms and _adjacent(words, a, b)]
                if pairs:
                    terms = terms.union(pairs)
            key = 0
            for t in terms:
                key |= bit[t]
                where[t] |= 1 << pos
            keys[pos] = key
    return order, keys, [where[t].bit_count() for t in order]


def _held_by_masks(q_terms: frozenset[str], by_head: dict[str, list[tuple[str, str]]], bit: dict[str, int],
                   sentences: Sequence[Sentence], masks: dict[str, int], first: int,
                   keys: list[int], where: dict[str, int]) -> None:
    """:func:`_holding` of one chunk through its word masks, into ``keys`` and ``where``: the bits of
    the sentences holding each term; a pair a_b is looked for only in the sentences holding both."""
    words = masks.keys()
    for t in words & q_terms:
        mask, b = masks[t], bit[t]
        where[t] |= mask << first
        while mask:
            low = mask & -mask
            keys[first + low.bit_length() - 1] |= b
            mask ^= low
    for a in words & by_head.keys():
        for t, b in by_head[a]:
            mask = masks[a] & masks.get(b, 0)
            while mask:
                low = mask & -mask
                i = low.bit_length() - 1
                mask ^= low
                if _adjacent(sentences[i][3], a, b):
                    keys[first + i] |= bit[t]
                    where[t] |= 1 << (first + i)


def _underscores(term: str) -> Iterator[int]:
    """Where ``term`` holds ``_``."""
    i = term.find("_")
    while i >= 0:
        yield i
        i = term.find("_", i + 1)


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _word_masks(sentences: Sequence[Sentence]) -> dict[str, int]:
    """Word → the sentences holding it, as a bit mask (bit i: sentence i)."""
    masks: dict[str, int] = {}
    get = masks.get
    for i, sent in enumerate(sentences):
        bit = 1 << i
        for w in sent[3]:
            masks[w] = get(w, 0) | bit
    return masks


def _adjacent(words: tuple[str, ...], a: str, b: str) -> bool:
    """Whether ``b`` follows ``a`` somewhere in ``words`` (which hold ``a``)."""
    i, last = words.index(a), len(words) - 1
    while i < last:
        if words[i + 1] == b:
            return True
        try:
            i = words.index(a, i + 1)
        except ValueError:
            return False
    return False


def _scores(keys: Sequence[int], idf: Sequence[float], unigrams: int, *,
            every: bool = False) -> list[tuple[float, float, int]]:
    """(coverage, weight, -position) of each sentence holding a term (``every``: of each sentence),
    best first: coverage is the IDF share of the question's words (the terms of mask ``unigrams``)
    the sentence holds, the IDF of all its terms breaks ties. Sums are :func:`math.fsum`: exact, so
    the same in any order."""
    total = _sum(idf, unigrams) or 1.0
    known: dict[int, tuple[float, float]] = {}
    scored = []
    for pos, key in enumerate(keys):
        if not key and not every:
            continue
        score = known.get(key)
        if score is None:
            score = known[key] = (_sum(idf, key & unigrams) / total, _sum(idf, key))
        scored.append((score[0], score[1], -pos))
    scored.sort(reverse=True)
    return scored


def _sum(values: Sequence[float], mask: int) -> float:
    """:func:`math.fsum` of the ``values`` at the set bits of ``mask``. Of one or two values it is the
    value, or their float sum (IEEE addition rounds the exact sum, as fsum does): most sentences hold
    one or two of a question's terms, and fsum over a generator cost ten times more."""
    rest = mask & (mask - 1)
    if not rest:
        return values[mask.bit_length() - 1] if mask else 0.0
    if not rest & (rest - 1):
        return values[(mask ^ rest).bit_length() - 1] + values[rest.bit_length() - 1]
    return math.fsum(values[j] for j in _bits(mask))


def _chunk_sentences(text: str, sections: tuple[str, ...] = (), stop: frozenset[str] = _STOP
                     ) -> tuple[Sentence, ...]:
    """(section heading, start, end, content words) of each sentence of a chunk text, in order;
    ``text[start:end]`` is the sentence. Heading lines — a line that starts with the id of one of
    the chunk's ``sections`` ("DT-1 Thời hạn") — name the section of the sentences below them and
    are not sentences; a paragraph that only looks like one ("Same-day delivery is …") is text.
    Each sentence is folded whole (:func:`rageval.text.folded_words_once`): a chunk is read once."""
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
        for sent in _line_sentences(line.lstrip("-*• ").strip()):
            start = text.find(sent, at)          # in order: found at or after the previous one's end
            at = start + len(sent)
            out.append((section, start, at, tuple([intern(w) for w in folded_words_once(sent) if w not in stop])))
    return tuple(out)


#: where a sentence ends inside a line: :data:`rageval.text.sentences`'s rule without its newlines
_ENDS = re.compile(r"[.!?…]\s+(?=\S)")


def _line_sentences(line: str) -> list[str]:
    """:func:`rageval.text.sentences` of a text without line breaks (one regular expression pass
    that needs no look-behind at every character)."""
    out, at = [], 0
    for m in _ENDS.finditer(line):
        out.append(line[at:m.start() + 1].strip())
        at = m.end()
    out.append(line[at:].strip())
    return [s for s in out if s]


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

"""Leaks of eval questions into what the model sees: a golden question found, verbatim or nearly,
in the prompt template, a few-shot file or a corpus section.

A question leaks into a place holding at least ``min_overlap`` of its distinct word 3-grams (words
as :func:`rageval.text.folded_words` cuts them: folded, runs of letters and digits). Every
evaluation reads every corpus section, so what matters at a million sections (issue 25) is the cost
per section: the texts are read about a million characters at a time by
:class:`~rageval.golden.word_index.WordReader` (each word a question-word index, with numpy, no
Python step per text or per word) and their 3-grams looked up all at once in the questions' table.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rageval.golden.corpus import Corpus, Section
from rageval.golden.set import HOLDOUT_TAG, Case
from rageval.golden.word_index import IntMap, WordReader
from rageval.records import Record
from rageval.text import folded_words

#: Questions shorter than this (in words) are too generic to look for.
LEAK_MIN_WORDS = 4
LEAK_NGRAM = 3
_PASS_CHARS = 1_000_000       # characters of text read in one pass (a longer text is read alone)


@dataclass(frozen=True)
class Leak(Record):
    case: str
    where: str                    # "prompt.j2 line 12", "corpus DT-3 (doi-tra)"
    overlap: float                # share of the question's word 3-grams found there
    holdout: bool

    def message(self) -> str:
        who = "a holdout case" if self.holdout else self.case
        return (f"leak: the question of {who} appears in {self.where} ({self.overlap:.0%} of its word "
                f"3-grams). A model that sees the question with its answer passes the case without retrieving; "
                f"remove it there or drop the case.")


def _ngrams(words: Sequence[str], n: int = LEAK_NGRAM) -> set[tuple[str, ...]]:
    return set(zip(*(words[i:] for i in range(n))))


def find_leaks(cases: Iterable[Case], places: Sequence[tuple[str, str, bool]], min_overlap: float) -> list[Leak]:
    """Golden questions found (verbatim or near-verbatim) in ``places``: (label, text, by_line).
    A question leaks into a place holding at least ``min_overlap`` of its word 3-grams; with
    ``by_line`` the label names the line holding most of them. Leaks come in the cases' order, and
    for one case in the places' order."""
    asked: list[tuple[Case, set[tuple[str, ...]]]] = []
    for case in cases:
        words = folded_words(case.question)
        grams = _ngrams(words)
        if len(words) >= LEAK_MIN_WORDS and grams:
            asked.append((case, grams))
    place, question, count = _gram_hits([grams for _, grams in asked], [text for _, text, _ in places])
    overlap = count / np.array([len(grams) for _, grams in asked] or [1])[question]
    keep = ~(overlap + 1e-9 < min_overlap)
    leaks = []
    for p, n, share in zip(place[keep].tolist(), question[keep].tolist(), overlap[keep].tolist()):
        label, text, by_line = places[p]               # places in order, then questions in order
        case, grams = asked[n]
        where = label
        if by_line:
            lines = text.splitlines()
            best = max(range(len(lines)), key=lambda i: len(grams & _ngrams(folded_words(lines[i]))))
            where = f"{label} line {best + 1}"
        leaks.append(Leak(case.id, where, round(share, 3), HOLDOUT_TAG in case.tags))
    order = {case.id: n for n, (case, _) in enumerate(asked)}
    return sorted(leaks, key=lambda x: order[x.case])


@dataclass(frozen=True)
class _Grams:
    """The questions' 3-grams as a sorted table of codes ``(a * size + b) * size + c`` over the
    questions' word indices, with, per code, the questions owning it (``owners[starts:starts+counts]``)."""

    index: Mapping[str, int]      # question word -> its index
    size: int
    wanted: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    owners: np.ndarray
    n_questions: int
    at: IntMap                    # code -> its place in ``wanted``

    @classmethod
    def of(cls, questions: Sequence[set[tuple[str, ...]]]) -> _Grams:
        words = list(itertools.chain.from_iterable(itertools.chain.from_iterable(questions)))
        index = {word: n for n, word in enumerate(dict.fromkeys(words))}
        size = len(index) + 1
        ids = np.fromiter(map(index.__getitem__, words), dtype=np.int64, count=len(words)).reshape(-1, LEAK_NGRAM)
        codes = (ids[:, 0] * size + ids[:, 1]) * size + ids[:, 2]
        owners = np.repeat(np.arange(len(questions), dtype=np.int64), [len(grams) for grams in questions])
        order = np.argsort(codes, kind="stable")
        wanted, starts, counts = np.unique(codes[order], return_index=True, return_counts=True)
        return cls(index, size, wanted, starts, counts, owners[order], len(questions),
                   IntMap(wanted, np.arange(len(wanted))))


def _gram_hits(questions: Sequence[set[tuple[str, ...]]], texts: Sequence[str]) -> tuple[np.ndarray, ...]:
    """(text index, question index, how many distinct 3-grams of the question the text holds) for
    the pairs holding at least one, as three arrays sorted by text, then question."""
    table = _Grams.of(questions)
    out = []
    if len(table.wanted):
        reader = WordReader(table.index)
        for first, last in _passes(texts):
            words, text = reader.read(texts[first:last])
            out.append(_text_hits(words, text + first, table))
    if not out:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(3))
    return tuple(np.concatenate(part) for part in zip(*out))


def _passes(texts: Sequence[str]) -> Iterator[tuple[int, int]]:
    """(first, last) text indices of each pass: about ``_PASS_CHARS`` characters, at least one text."""
    bounds = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
    first = 0
    while first < len(texts):
        start = int(bounds[first - 1]) if first else 0
        last = max(first + 1, int(np.searchsorted(bounds, start + _PASS_CHARS, side="right")))
        yield first, last
        first = last


def _text_hits(words: np.ndarray, text: np.ndarray, table: _Grams) -> tuple[np.ndarray, ...]:
    """:func:`_gram_hits` for some texts: their words' question-word indices in one array (-1: a
    word no question has) and the text of each word (a 3-gram lies within one text)."""
    wanted = table.wanted
    a, b, c = words[:-2], words[1:-1], words[2:]
    found = (a >= 0) & (b >= 0) & (c >= 0) & (text[:-2] == text[2:])
    code = (a[found] * table.size + b[found]) * table.size + c[found]
    at = table.at.get(code)
    hit = at >= 0
    pairs = np.unique(text[:-2][found][hit] * len(wanted) + at[hit])      # each (text, 3-gram) once
    where, gram = np.divmod(pairs, len(wanted))
    many = table.counts[gram]                               # the questions owning each 3-gram
    rows = np.repeat(table.starts[gram] - np.cumsum(many) + many, many) + np.arange(many.sum())
    keys, hits = np.unique(np.repeat(where, many) * table.n_questions + table.owners[rows], return_counts=True)
    place_of, question = np.divmod(keys, table.n_questions)
    return place_of, question, hits


class Places(Sequence[tuple[str, str, bool]]):
    """The places a question may leak into, as (label, text, by_line): some files, then the corpus
    sections, whose labels ("corpus DT-3 (doi-tra)") are made only when asked for."""

    def __init__(self, files: Sequence[tuple[str, str, bool]], sections: Sequence[Section]) -> None:
        self._files, self._sections = tuple(files), sections

    def __len__(self) -> int:
        return len(self._files) + len(self._sections)

    def __getitem__(self, i: int) -> tuple[str, str, bool]:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        return self._files[i] if i < len(self._files) else _section_place(self._sections[i - len(self._files)])

    def __iter__(self) -> Iterator[tuple[str, str, bool]]:
        yield from self._files
        yield from map(_section_place, self._sections)


def _section_place(section: Section) -> tuple[str, str, bool]:
    return f"corpus {section.id} ({section.document})", section.text, False


def leak_places(prompt: Path | None, extra: Sequence[Path], corpus: Corpus, root: Path) -> Places:
    """The prompt template, the configured few-shot / extra files and every corpus section."""
    files = []
    for path in [p for p in (prompt, *extra) if p is not None]:
        try:
            label = path.relative_to(root).as_posix()
        except ValueError:
            label = path.as_posix()
        files.append((label, path.read_text(encoding="utf-8"), True))
    return Places(files, corpus.sections)

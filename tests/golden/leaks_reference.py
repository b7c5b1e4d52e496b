"""The leak check as it was before issue 25 made its cost per corpus section small (rageval at
3e2f8a7, ``lifecycle.find_leaks``): every text split and folded on its own, its word indices
listed in Python, the 3-gram hits counted with numpy. Kept here, not in the package, as the
reference the faster ``rageval.golden.leaks.find_leaks`` must equal exactly (tests/golden/
test_leaks_property.py): same leaks, same order, same fields."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from rageval.golden.leaks import Leak
from rageval.golden.set import HOLDOUT_TAG, Case
from rageval.text import folded_words

LEAK_MIN_WORDS = 4
LEAK_NGRAM = 3
LEAK_TEXTS = 2000


def _ngrams(words: Sequence[str], n: int = LEAK_NGRAM) -> set[tuple[str, ...]]:
    return set(zip(*(words[i:] for i in range(n))))


def find_leaks(cases: Iterable[Case], places: Sequence[tuple[str, str, bool]], min_overlap: float,
               texts_per_pass: int = LEAK_TEXTS) -> list[Leak]:
    asked: list[tuple[Case, set[tuple[str, ...]]]] = []
    for case in cases:
        words = folded_words(case.question)
        grams = _ngrams(words)
        if len(words) >= LEAK_MIN_WORDS and grams:
            asked.append((case, grams))
    place, question, count = _gram_hits([grams for _, grams in asked], [text for _, text, _ in places],
                                        texts_per_pass)
    overlap = count / np.array([len(grams) for _, grams in asked] or [1])[question]
    keep = ~(overlap + 1e-9 < min_overlap)
    leaks = []
    for p, n, share in zip(place[keep].tolist(), question[keep].tolist(), overlap[keep].tolist()):
        label, text, by_line = places[p]
        case, grams = asked[n]
        where = label
        if by_line:
            lines = text.splitlines()
            best = max(range(len(lines)), key=lambda i: len(grams & _ngrams(folded_words(lines[i]))))
            where = f"{label} line {best + 1}"
        leaks.append(Leak(case.id, where, round(share, 3), HOLDOUT_TAG in case.tags))
    order = {case.id: n for n, (case, _) in enumerate(asked)}
    return sorted(leaks, key=lambda x: order[x.case])


def _gram_hits(questions: Sequence[set[tuple[str, ...]]], texts: Sequence[str],
               texts_per_pass: int) -> tuple[np.ndarray, ...]:
    index: dict[str, int] = {}
    for grams in questions:
        for gram in grams:
            for word in gram:
                index.setdefault(word, len(index))
    size = len(index) + 1
    codes = np.array([(index[a] * size + index[b]) * size + index[c] for grams in questions for a, b, c in grams],
                     dtype=np.int64)
    owners = np.repeat(np.arange(len(questions), dtype=np.int64), [len(grams) for grams in questions])
    order = np.argsort(codes, kind="stable")
    codes, owners = codes[order], owners[order]
    wanted, starts, counts = np.unique(codes, return_index=True, return_counts=True)
    pieces: dict[str, tuple[int, ...]] = {}
    out = []
    for first in range(0, len(texts) if len(wanted) else 0, texts_per_pass):
        ids: list[int] = []
        for text in texts[first:first + texts_per_pass]:
            split, mark = text.split(), len(ids)
            try:
                ids.extend(itertools.chain.from_iterable(map(pieces.__getitem__, split)))
            except KeyError:
                del ids[mark:]
                for piece in split:
                    if piece not in pieces:
                        pieces[piece] = tuple(index.get(word, -1) for word in folded_words(piece))
                ids.extend(itertools.chain.from_iterable(map(pieces.__getitem__, split)))
            ids.append(-2)
        out.append(_text_hits(np.array(ids, dtype=np.int64), first, size, wanted, starts, counts, owners,
                              len(questions)))
    if not out:
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(3))
    return tuple(np.concatenate(part) for part in zip(*out))


def _text_hits(words: np.ndarray, first: int, size: int, wanted: np.ndarray, starts: np.ndarray,
               counts: np.ndarray, owners: np.ndarray, n_questions: int) -> tuple[np.ndarray, ...]:
    ends = words == -2
    place = (np.cumsum(ends) - ends + first)[:-2]
    a, b, c = words[:-2], words[1:-1], words[2:]
    found = (a >= 0) & (b >= 0) & (c >= 0)
    code = (a[found] * size + b[found]) * size + c[found]
    at = np.minimum(np.searchsorted(wanted, code), len(wanted) - 1)
    hit = wanted[at] == code
    pairs = np.unique(place[found][hit] * len(wanted) + at[hit])
    where, gram = np.divmod(pairs, len(wanted))
    many = counts[gram]
    rows = np.repeat(starts[gram] - np.cumsum(many) + many, many) + np.arange(many.sum())
    keys, hits = np.unique(np.repeat(where, many) * n_questions + owners[rows], return_counts=True)
    place_of, question = np.divmod(keys, n_questions)
    return place_of, question, hits

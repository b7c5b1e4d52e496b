"""The folded words of many texts at once, as indices into a small vocabulary (the golden
questions' words), read with numpy: no Python step per text, per piece or per word.

The words are exactly those of :func:`rageval.text.folded_words`: the runs of letters and digits of
the folded text. Folding works character by character (case folding, then diacritics stripped), and
whitespace only ever separates words, so each distinct character is asked once what it becomes, by
folding it between two letters: ``folded_words("a" + ch + "a")`` says whether it separates words
(``["a", "a"]``), becomes one letter (``["aXa"]``: nearly always), nothing (``["aa"]``: a combining
mark) or several letters (``["assa"]``: "ß"); the last two are spread out in the few passes holding one.

The vocabulary's letters are numbered 1..K (K+1: a letter no vocabulary word has), so a word of at
most ``width`` letters packs exactly into one int64, ``bits`` per letter: equal codes are equal
words, no hashing (the codes are then found with :class:`IntMap`). A longer word is compared as a
string, and only when the vocabulary has one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rageval.text import folded_words

_UNKNOWN, _SPREAD = -1, -2      # a character not asked yet; one folding to no letter or to several
_SEPARATOR = 0
_CODE_POINTS = 0x110000


class IntMap:
    """Exact look-ups of many int64 keys at once (``get``: the value of each, or -1): a few levels of
    hash tables, one key per slot, a key going to the first level where its slot is free; a query
    goes on to the next level only when its slot overflowed. Keys are distinct and not negative."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        self._levels: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        keys, values = np.asarray(keys, dtype=np.int64), np.asarray(values, dtype=np.int64)
        while len(keys):
            bits = max(4, (4 * len(keys)).bit_length())        # at most a quarter of the slots used
            slot = self._slot(keys, len(self._levels), bits)
            taken, first, count = np.unique(slot, return_index=True, return_counts=True)
            held = np.full(1 << bits, -1, dtype=np.int64)
            value = np.zeros(1 << bits, dtype=np.int64)
            more = np.zeros(1 << bits, dtype=bool)
            held[taken], value[taken], more[taken[count > 1]] = keys[first], values[first], True
            self._levels.append((bits, held, value, more))
            rest = np.ones(len(keys), dtype=bool)
            rest[first] = False
            keys, values = keys[rest], values[rest]

    @staticmethod
    def _slot(keys: np.ndarray, level: int, bits: int) -> np.ndarray:
        """Multiplicative hashing (the top ``bits`` of key × an odd constant, one per level)."""
        factor = np.uint64((0x9E3779B97F4A7C15 * (2 * level + 1)) % (1 << 64) | 1)
        return (keys.view(np.uint64) * factor) >> np.uint64(64 - bits)

    def get(self, queries: np.ndarray) -> np.ndarray:
        out = np.full(len(queries), -1, dtype=np.int64)
        where = None                                            # the queries still looked for (None: all)
        for level, (bits, held, value, more) in enumerate(self._levels):
            slot = self._slot(queries, level, bits)
            found = held[slot] == queries
            if where is None:
                out[found] = value[slot[found]]
            else:
                out[where[found]] = value[slot[found]]
            going = more[slot] & ~found
            if not going.any():
                break
            where = np.flatnonzero(going) if where is None else where[going]
            queries = queries[going]
        return out


class WordReader:
    """``read(texts)``: the words of the texts as vocabulary indices (-1: not in the vocabulary)
    and, per word, the text it is in. Characters are learnt as they are met (``_kind``)."""

    def __init__(self, vocabulary: Mapping[str, int]) -> None:
        self._letters = sorted({ch for word in vocabulary for ch in word})
        self._letter = {ch: n for n, ch in enumerate(self._letters, 1)}
        self._foreign = len(self._letters) + 1
        self._bits = self._foreign.bit_length()
        self.width = 63 // self._bits                      # letters packed in one code
        self._masks = np.array([(1 << (self._bits * n)) - 1 for n in range(self.width + 1)], dtype=np.int64)
        short = [(self._pack(w), i) for w, i in vocabulary.items() if len(w) <= self.width]
        self._codes = IntMap(np.array([c for c, _ in short], dtype=np.int64),
                             np.array([i for _, i in short], dtype=np.int64))
        self._long = {w: i for w, i in vocabulary.items() if len(w) > self.width}
        small = next(t for t in (np.int8, np.int16, np.int32) if self._foreign <= np.iinfo(t).max)
        self._kind = np.full(_CODE_POINTS, _UNKNOWN, dtype=small)
        self._spread: dict[int, tuple[int, ...]] = {}

    def _pack(self, word: str) -> int:
        return sum(self._letter[ch] << (self._bits * j) for j, ch in enumerate(word))

    def _learn(self, code_points: np.ndarray) -> None:
        """What each character becomes: the words of ``"a" + ch + "a"`` joined by a separator, without
        the two a's — one letter (the common case, kept in ``_kind``), or none, or several letters
        and separators (kept in ``_spread``)."""
        for point in code_points.tolist():
            middle = "\0".join(folded_words(f"a{chr(point)}a"))[1:-1]     # "\0": no word holds it
            kinds = tuple(_SEPARATOR if ch == "\0" else self._letter.get(ch, self._foreign) for ch in middle)
            self._kind[point] = kinds[0] if len(kinds) == 1 else _SPREAD
            if len(kinds) != 1:
                self._spread[point] = kinds

    def read(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(vocabulary index of each word of ``texts`` in order, or -1; the index of its text)."""
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        starts = np.cumsum(lengths + 1) - lengths - 1          # of each text in the joined text
        points = np.frombuffer("\n".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        kind = self._kind[points]
        if len(kind) and kind.min() < 0:
            if (kind == _UNKNOWN).any():
                self._learn(np.unique(points[kind == _UNKNOWN]))
                kind = self._kind[points]
            if (kind == _SPREAD).any():
                kind, starts = self._spread_out(points, kind, starts)
        return self._words(kind, starts)

    def _spread_out(self, points: np.ndarray, kind: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``kind`` with each character that folds to none or several letters replaced by what it
        becomes, and the texts' starts moved to match."""
        at = np.flatnonzero(kind == _SPREAD)
        which, each = np.unique(points[at], return_inverse=True)
        spread = [self._spread[p] for p in which.tolist()]
        counts = np.ones(len(kind), dtype=np.int64)
        counts[at] = np.array([len(k) for k in spread], dtype=np.int64)[each]
        before = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(counts)])
        out = np.repeat(kind, counts)
        for n, kinds in enumerate(spread):
            into = before[at[each == n]]
            for k, value in enumerate(kinds):
                out[into + k] = value
        return out, before[starts]

    def _words(self, kind: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The words of the joined texts, each character's kind given (0: separator, else a letter)."""
        inword = kind > 0
        edge = np.diff(inword.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        first = np.flatnonzero(edge == 1)
        size = np.flatnonzero(edge == -1) - first
        code = self._packed(np.concatenate([kind, np.zeros(self.width, dtype=kind.dtype)]), first, size)
        ids = self._codes.get(code)
        ids[size > self.width] = -1
        if self._long:
            for j in np.flatnonzero(size > self.width).tolist():
                word = "".join(self._letters[k - 1] if k < self._foreign else "\0"
                               for k in kind[first[j]:first[j] + size[j]].tolist())
                ids[j] = self._long.get(word, -1)
        own = np.searchsorted(first, starts)                   # each text's first word
        return ids, np.repeat(np.arange(len(starts)), np.diff(own, append=len(first)))

    def _packed(self, kind: np.ndarray, first: np.ndarray, size: np.ndarray) -> np.ndarray:
        """Each word's first ``width`` letters packed into an int64, ``bits`` per letter (the first
        lowest); exact for the words of at most ``width`` letters. ``kind`` ends with ``width`` zeros."""
        code = kind[first].astype(np.int64)
        many = np.cumsum(np.bincount(np.minimum(size, self.width), minlength=self.width + 1)[::-1])[::-1]
        some = None                                             # the words longer than j, once they are few
        for j in range(1, min(self.width, int(size.max(initial=0)))):
            if some is None and many[j + 1] * 2 < len(size):
                some = np.flatnonzero(size > j)
            if some is None:
                code |= kind[first + j].astype(np.int64) << (self._bits * j)
            else:
                some = some[size[some] > j]
                code[some] |= kind[first[some] + j].astype(np.int64) << (self._bits * j)
        return code & self._masks[np.minimum(size, self.width)]

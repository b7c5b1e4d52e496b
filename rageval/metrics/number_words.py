"""Reading a number at a token: digits ("30.000", "1,5", "1.234,5") and number words in
Vietnamese ("bảy", "mười hai", "hai mươi mốt", "năm trăm linh năm", also typed without
diacritics: "bay") and English ("seven", "twenty-one", "one hundred and five", "a"/"an").

Used by the number rule (:mod:`rageval.metrics.numbers`), which decides what a number means
from the unit after it. Nothing here does I/O.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal

from rageval.text import PieceCache, fold

# Superscript, subscript and circled digits ("7 ngày¹", "m²", "①") are digits to str.isdigit() but
# numbers to nobody: each is a token of its own (a footnote mark ends the word before it), never
# part of a number or a word.
_MARKS = "\u00b2\u00b3\u00b9\u2070-\u2079\u2080-\u2089\u2460-\u24ff\u2776-\u2793"
#: a token of the number rule: a number ("30.000"), a word, a mark, a punctuation character
TOKEN = re.compile(rf"\d+(?:[.,]\d+)*|[^\W\d_{_MARKS}]+|[{_MARKS}]|[^\w\s]")

_PIECES = PieceCache(lambda piece: tuple(TOKEN.findall(piece)))   # a piece -> its tokens


def tokens(text: str) -> list[str]:
    """The tokens the number rule reads: ``TOKEN.findall`` of the text, NFC and casefolded. No
    token spans whitespace, so they are found piece by piece (``str.split``), and each distinct
    piece is cut once per process (the regular expression over every character is the slow part)."""
    return _PIECES.joined(unicodedata.normalize("NFC", text).casefold().split())


def piece_tokens(pieces: list[str]) -> list[tuple[str, ...]]:
    """The tokens of each piece (NFC and casefolded already), in order: :func:`tokens` piece by piece."""
    return _PIECES.each(pieces)


@functools.lru_cache(maxsize=16384)
def fold_word(word: str) -> str:
    """fold() of one token, memoised: the scanner asks about the same few words constantly."""
    return fold(word)


def is_plain(word: str) -> bool:
    """True when the word carries no Vietnamese diacritics (it is its own folded form)."""
    return fold_word(word) == word


_VI_DIGITS = {"một": 1, "hai": 2, "ba": 3, "bốn": 4, "năm": 5, "sáu": 6, "bảy": 7, "bẩy": 7,
              "tám": 8, "chín": 9}
# units digit after "mười"/"mươi": five is "lăm"/"nhăm" there (so "mười năm" is ten years),
# one may be "mốt", four may be "tư".
_VI_AFTER_TEN = {"một": 1, "mốt": 1, "hai": 2, "ba": 3, "bốn": 4, "tư": 4, "lăm": 5, "nhăm": 5,
                 "sáu": 6, "bảy": 7, "bẩy": 7, "tám": 8, "chín": 9}
_VI_DIGITS_PLAIN = {fold(w): v for w, v in _VI_DIGITS.items() if fold(w) != "sau"}
_VI_AFTER_TEN_PLAIN = {fold(w): v for w, v in _VI_AFTER_TEN.items()}

_EN_ONES = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_EN_TENS = {w: 10 * i for i, w in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}


@dataclass(frozen=True)
class Number:
    value: Decimal
    end: int                 # index of the first token after the number
    plain: bool = False      # a Vietnamese word read only through its diacritic-less form
    article: bool = False    # English "a"/"an": one, but only before a time unit


def parse_digits(token: str) -> Decimal | None:
    groups = re.split(r"[.,]", token)
    seps = re.findall(r"[.,]", token)
    if not seps:
        return Decimal(token)
    if len(set(seps)) == 1:
        thousands = (len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])
                     and (len(seps) > 1 or groups[0] != "0"))
        if thousands:
            return Decimal("".join(groups))
        if len(seps) == 1:
            return Decimal(f"{groups[0]}.{groups[1]}")
        return None                                  # "1.2.3": a version, not a quantity
    # "1.234,5" or "1,234.5": one kind groups thousands, the last separator is the decimal mark
    if (seps[-1] != seps[0] and all(s == seps[0] for s in seps[:-1]) and len(groups[0]) <= 3
            and all(len(g) == 3 for g in groups[1:-1])):
        return Decimal("".join(groups[:-1]) + "." + groups[-1])
    return None


class Reader:
    """Number readers over one token list."""

    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        # where a mention can start (digits, a word a number starts with, a "$" sign): the scan skips
        # from one to the next, since every other token fails at once
        self.starts = list(itertools.compress(itertools.count(), _STARTS.each(toks)))

    def after(self, j: int) -> int:
        """The first start at ``j`` or later (the end of the tokens when there is none)."""
        k = bisect.bisect_left(self.starts, j)
        return self.starts[k] if k < len(self.starts) else len(self.toks)

    def tok(self, j: int) -> str | None:
        return self.toks[j] if 0 <= j < len(self.toks) else None

    def _vi(self, j: int, exact: dict[str, int], plain: dict[str, int]) -> tuple[int, bool] | None:
        word = self.tok(j)
        if word is None:
            return None
        if word in exact:
            return exact[word], False
        if is_plain(word) and word in plain:
            return plain[word], True
        return None

    def _is(self, j: int, exact: str) -> tuple[bool, bool]:
        """(matches, plain) for a Vietnamese word spelled with or without diacritics."""
        word = self.tok(j)
        if word == exact:
            return True, False
        plain = word is not None and is_plain(word) and word == fold_word(exact)
        return plain, plain

    def _vi_tens(self, j: int, bare_digit: bool) -> tuple[int, int, bool] | None:
        """Below one hundred: "mười [u]" | "D mươi [u]" | "D" (if bare_digit)."""
        ten, plain = self._is(j, "mười")
        if ten:
            value, j = 10, j + 1
            unit = self._vi(j, _VI_AFTER_TEN, _VI_AFTER_TEN_PLAIN)
            if unit:
                return value + unit[0], j + 1, plain or unit[1]
            return value, j, plain
        digit = self._vi(j, _VI_DIGITS, _VI_DIGITS_PLAIN)
        if digit is None:
            return None
        tens, tens_plain = self._is(j + 1, "mươi")
        if tens and digit[0] >= 2:
            value, end, plain = digit[0] * 10, j + 2, digit[1] or tens_plain
            unit = self._vi(end, _VI_AFTER_TEN, _VI_AFTER_TEN_PLAIN)
            if unit:
                return value + unit[0], end + 1, plain or unit[1]
            return value, end, plain
        return (digit[0], j + 1, digit[1]) if bare_digit else None

    def vietnamese(self, i: int) -> Number | None:
        digit = self._vi(i, _VI_DIGITS, _VI_DIGITS_PLAIN)
        hundred, hundred_plain = self._is(i + 1, "trăm")
        if digit and hundred:
            value, j, plain = digit[0] * 100, i + 2, digit[1] or hundred_plain
            filler = self.tok(j) in ("linh", "lẻ", "le")
            rest = self._vi(j + 1, _VI_DIGITS, _VI_DIGITS_PLAIN) if filler else None
            if rest:
                return Number(Decimal(value + rest[0]), j + 2, plain or rest[1])
            tens = self._vi_tens(j, bare_digit=False)
            if tens:
                return Number(Decimal(value + tens[0]), tens[1], plain or tens[2])
            return Number(Decimal(value), j, plain)
        tens = self._vi_tens(i, bare_digit=True)
        return Number(Decimal(tens[0]), tens[1], tens[2]) if tens else None

    def _en_below_hundred(self, j: int) -> tuple[int, int] | None:
        word = self.tok(j)
        if word in _EN_ONES:
            return _EN_ONES[word], j + 1
        if word in _EN_TENS:
            value = _EN_TENS[word]
            after = self.tok(j + 1)
            if after == "-" and self.tok(j + 2) in _EN_ONES and 0 < _EN_ONES[self.toks[j + 2]] < 10:
                return value + _EN_ONES[self.toks[j + 2]], j + 3
            if after in _EN_ONES and 0 < _EN_ONES[after] < 10:
                return value + _EN_ONES[after], j + 2
            return value, j + 1
        return None

    def english(self, i: int) -> Number | None:
        word = self.tok(i)
        if word in ("a", "an"):
            if self.tok(i + 1) == "hundred":
                value, j = 100, i + 2
            else:
                return Number(Decimal(1), i + 1, article=True)
        else:
            below = self._en_below_hundred(i)
            if below is None:
                return None
            value, j = below
            if not (self.tok(j) == "hundred" and 0 < value < 10):
                return Number(Decimal(value), j)
            value, j = value * 100, j + 1
        k = j + 1 if self.tok(j) == "and" else j
        rest = self._en_below_hundred(k)
        if rest and rest[0] > 0:
            return Number(Decimal(value + rest[0]), rest[1])
        return Number(Decimal(value), j)

    def number(self, i: int) -> Number | None:
        word = self.toks[i]
        if word[0].isdecimal():     # not isdigit(): "²", "①" are digits to str but no number to Decimal
            value = parse_digits(word)
            return Number(value, i + 1) if value is not None else None
        if word not in _FIRST_WORDS:                # most words start no number: say so at once
            return None
        return self.vietnamese(i) or self.english(i)


#: Every word a number written in words can start with (vietnamese() and english() read nothing else).
_FIRST_WORDS = frozenset([*_VI_DIGITS, *_VI_DIGITS_PLAIN, "mười", fold("mười"), *_EN_ONES, *_EN_TENS, "a", "an"])


def _can_start(token: str) -> bool:
    """Whether a mention can start at ``token``: digits, a word a number starts with, a "$" sign."""
    return token[0].isdecimal() or token in _FIRST_WORDS or token == "$"


#: token -> _can_start, decided once per distinct token, so a text's starts are found without a Python step per token
_STARTS = PieceCache(_can_start)

"""Text primitives every stage agrees on: normalisation, diacritic folding, the token counter,
and sentence splitting.

The tokenizer is deliberately simple and needs no download: a token is a run of letters/digits
(Unicode-aware, so "ngày" is one token) or a single punctuation character. Whitespace is not a
token. Counting this way is within ~10–30% of BPE tokenizers on Vietnamese and English prose,
and — what matters for comparing configurations — it is the same on both sides of a comparison.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")
# A sentence ends at . ! ? … or a newline; "30.000" and "v1.2" are not ends (a digit follows).
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=\S)|\n+")


def normalize(text: str) -> str:
    """NFC, casefolded, whitespace collapsed. The form used for substring rules."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text).casefold()).strip()


def _fold_table() -> dict[int, str]:
    """Latin letters with diacritics → their base letters, combining marks → nothing."""
    table: dict[int, str] = {cp: "" for cp in range(0x300, 0x370)}
    for cp in [*range(0xC0, 0x250), *range(0x1E00, 0x1F00)]:
        ch = chr(cp)
        base = "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")
        if base != ch:
            table[cp] = base
    table[ord("đ")], table[ord("Đ")] = "d", "d"
    return table


_FOLD = _fold_table()


def fold(text: str) -> str:
    """Lower-case and strip Vietnamese diacritics: "Đổi trả trong 7 ngày" -> "doi tra trong 7 ngay".

    Customers type without diacritics; folding both the query and the documents lets them meet.
    (A translate table, not per-character Unicode look-ups: this sits on every hot path.)
    """
    return _SPACE.sub(" ", text.casefold().translate(_FOLD)).strip()


class PieceCache(Generic[T]):
    """What ``cut`` makes of each distinct whitespace-free piece of text (as ``str.split`` cuts it),
    computed once per process: the per-character work (folding, a regular expression) is paid once
    per piece, not once per occurrence. At most ``limit`` pieces are kept; when full it starts
    again. Threads may share one: a piece dropped by another thread's restart is cut again.
    ``joined`` is for cuts that are sequences of words."""

    def __init__(self, cut: Callable[[str], T], limit: int = 200_000) -> None:
        self._cut, self._limit = cut, limit
        self._known: dict[str, T] = {}

    def each(self, pieces: list[str]) -> list[T]:
        """``cut`` of each piece, in order."""
        known = self._known
        try:
            return list(map(known.__getitem__, pieces))
        except KeyError:
            pass
        if len(known) > self._limit:
            known.clear()
        cut, out = self._cut, []
        for p in pieces:
            got = known.get(p)
            if got is None:                 # new, or dropped by another thread's restart: cut (again)
                got = known[p] = cut(p)
            out.append(got)
        return out

    def joined(self, pieces: list[str]) -> list[str]:
        """The pieces' cuts one after another."""
        try:
            return list(itertools.chain.from_iterable(map(self._known.__getitem__, pieces)))  # type: ignore[call-overload]
        except KeyError:
            return list(itertools.chain.from_iterable(self.each(pieces)))  # type: ignore[call-overload]


_WORDS = PieceCache(lambda piece: tuple(_WORD.findall(fold(piece))))   # a piece -> its folded words


def folded_words(text: str) -> list[str]:
    r"""The words (runs of letters/digits) of the folded text: "Đổi trả, 7 ngày" -> ["doi", "tra",
    "7", "ngay"]. What retrieval, the extractive generator and the leak check compare.

    Equal to ``re.findall(r"\w+", fold(text))``, computed piece by piece: folding works character by
    character and whitespace is never part of a word, so each distinct whitespace-separated piece is
    folded once per process (``str.translate`` over Vietnamese text is the slow part)."""
    return _WORDS.joined(text.split())


def folded_words_once(text: str) -> list[str]:
    """:func:`folded_words` of a text read once (a chunk's sentence: the extractive generator keeps
    what it read), in one pass each of folding and matching and no piece looked up: the same words,
    for folding works character by character and no word spans whitespace. For a text whose pieces
    are met once, the lookups and the splitting cost more than folding it whole."""
    return _WORD.findall(text.casefold().translate(_FOLD))


def tokenize(text: str) -> list[str]:
    """Words/numbers and single punctuation marks, in order."""
    return _TOKEN.findall(text)


_COUNTS: dict[str, int] = {}     # whitespace-separated piece -> its tokens; bounded, thread-safe use
_COUNTS_LIMIT = 200_000


def count_tokens(text: str) -> int:
    """How many tokens :func:`tokenize` finds, without building them: a token never spans
    whitespace, so the count is the sum over the text's whitespace-separated pieces, and each
    distinct piece is counted once per process (the regular expression is the slow part)."""
    counts = _COUNTS
    pieces = text.split()
    try:
        return sum(map(counts.__getitem__, pieces))
    except KeyError:
        if len(counts) > _COUNTS_LIMIT:
            counts.clear()
        fresh = {p: len(_TOKEN.findall(p)) for p in pieces if p not in counts}
        counts.update(fresh)
        try:
            return sum(map(counts.__getitem__, pieces))
        except KeyError:                                           # another thread cleared it
            return sum(counts.get(p) or fresh[p] for p in pieces)


def token_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each token, so chunks can keep the original text."""
    return [m.span() for m in _TOKEN.finditer(text)]


def sentences(text: str) -> list[str]:
    """Split prose into sentences; keeps the original spelling, drops empty pieces."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


_USERINFO = re.compile(r"(?<=://)([^/@\s:]*):[^/@\s]*@")


def hide_password(text: str) -> str:
    """``https://user:secret@host/v1`` → ``https://user:***@host/v1`` wherever a URL in ``text``
    carries a password (config values, error messages, app names)."""
    return _USERINFO.sub(r"\1:***@", text)


#: Function words, folded, by language: what tells a corpus's language without a model.
LANGUAGE_WORDS = {
    "vi": frozenset("khong duoc cua va cho voi la co nhung cac mot trong khi thi neu se da dang nay do "
                    "tai ve den tu hoac hay nao ban khach hang".split()),
    "en": frozenset("the and of to is are for with on in that be by or as an this it from your you we our "
                    "will can not if at which have has".split()),
}
LANGUAGES = tuple(LANGUAGE_WORDS)


def detect_language(texts: Iterable[str], sample: int = 200_000) -> str:
    """``vi`` or ``en``: the language whose function words are more frequent in ``texts`` (folded,
    so Vietnamese typed without diacritics counts as Vietnamese), read up to ``sample`` characters."""
    counts = dict.fromkeys(LANGUAGE_WORDS, 0)
    seen = 0
    for text in texts:
        for word in folded_words(text[: max(0, sample - seen)]):
            for language, words in LANGUAGE_WORDS.items():
                counts[language] += word in words
        seen += len(text)
        if seen >= sample:
            break
    return "vi" if counts["vi"] > counts["en"] else "en"


def secret_lines(value: str) -> list[str]:
    """The lines of a secret as a log reader sees them (line by line): those not blank."""
    return [line for line in value.replace("\r\n", "\n").replace("\r", "\n").split("\n") if line.strip()]


def redact(text: str, secrets: Iterable[str], min_piece: int = 1) -> str:
    """``text`` with every secret, and every line of a multi-line secret, replaced by ``***``
    (longest first); pieces shorter than ``min_piece`` characters are left alone."""
    pieces = {p for s in secrets if s for p in [s, *secret_lines(s)] if p.strip() and len(p) >= min_piece}
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "***")
    return text

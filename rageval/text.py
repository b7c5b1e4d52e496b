"""Text primitives every stage agrees on: normalisation, diacritic folding, the token counter,
and sentence splitting.

The tokenizer is deliberately simple and needs no download: a token is a run of letters/digits
(Unicode-aware, so "ngày" is one token) or a single punctuation character. Whitespace is not a
token. Counting this way is within ~10–30% of BPE tokenizers on Vietnamese and English prose,
and — what matters for comparing configurations — it is the same on both sides of a comparison.
"""

from __future__ import annotations

import re
import unicodedata

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)
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


def tokenize(text: str) -> list[str]:
    """Words/numbers and single punctuation marks, in order."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


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

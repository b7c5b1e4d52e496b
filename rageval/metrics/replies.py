"""Reading what a model replied, in the shapes real endpoints give: pure functions, no I/O.

Endpoints that ignore ``response_format`` (many local servers, some gateways) wrap the JSON asked
for in prose or a fence, write it with single quotes, or answer the verdict in the conversation's
language. :func:`first_json_object` reads, in this order of trying:

* the first balanced ``{…}`` of the reply — the scan skips braces inside strings (double- or
  single-quoted, with backslash escapes) — that parses as a JSON object; so bare JSON, a
  ```json fence, prose before or after the object and prose plus a fence all read the same;
* the same text as a Python-literal-like object (``{'verdict': 'pass', 'ok': True}``), turned
  into JSON token by token: single-quoted strings become JSON strings, ``True`` / ``False`` /
  ``None`` become ``true`` / ``false`` / ``null``, a trailing comma is dropped. Nothing is ever
  evaluated.

A reply with no readable object raises ValueError showing its first :data:`SNIPPET_CHARS`
characters. :func:`verdict_word` and :func:`claim_word` map the documented words (English and
Vietnamese, any case, Unicode-normalised, a trailing full stop ignored) to ``pass`` / ``fail`` and
``supported`` / ``unsupported`` / ``contradicted``; anything else is None.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

SNIPPET_CHARS = 200
MAX_STARTS = 50          # '{' positions tried before giving up on a reply

#: verdict -> the words read as that verdict (after :func:`_norm`)
VERDICT_WORDS: dict[str, tuple[str, ...]] = {
    "pass": ("pass", "passed", "correct", "đạt", "đúng"),
    "fail": ("fail", "failed", "incorrect", "không đạt", "chưa đạt", "sai", "không đúng"),
}
#: per-claim support -> the words read as it
CLAIM_WORDS: dict[str, tuple[str, ...]] = {
    "supported": ("supported", "có căn cứ", "được hỗ trợ"),
    "unsupported": ("unsupported", "not supported", "không có căn cứ", "không được hỗ trợ", "không đề cập"),
    "contradicted": ("contradicted", "mâu thuẫn", "trái ngược"),
}
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}
_PY_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}


def snippet(text: Any) -> str:
    """The first ``SNIPPET_CHARS`` characters of a reply, whitespace collapsed."""
    text = " ".join(str(text).split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model reply (see the module docstring); ValueError otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    start, tried = text.find("{"), 0
    while start >= 0 and tried < MAX_STARTS:
        end = _balanced_end(text, start)
        if end is not None:
            found = _load(text[start:end])
            if found is not None:
                return found
        tried += 1
        start = text.find("{", start + 1)
    if not text.strip():
        raise ValueError("the reply is empty")
    raise ValueError(f"no JSON object in the reply: {snippet(text)!r}")


def _balanced_end(text: str, start: int) -> int | None:
    """The index just past the ``}`` closing the ``{`` at ``start``; None when it never closes.
    Braces inside quoted strings do not count."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _load(candidate: str) -> dict[str, Any] | None:
    for text in (candidate, python_literal_to_json(candidate)):
        if text is None:
            continue
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def python_literal_to_json(text: str) -> str | None:
    """A Python-literal-like object as JSON text (single quotes, True/False/None, a trailing
    comma); None when a string never closes. Never evaluates anything."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            end, value = _read_string(text, i)
            if end is None:
                return None
            out.append(text[i:end] if ch == '"' else json.dumps(value, ensure_ascii=False))
            i = end
            continue
        if ch.isalpha():
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            out.append(_PY_WORDS.get(text[i:j], text[i:j]))
            i = j
            continue
        if ch == "," and text[i + 1:].lstrip()[:1] in ("}", "]"):
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _read_string(text: str, start: int) -> tuple[int | None, str]:
    """(index past the closing quote, the decoded value) of the string opening at ``start``."""
    quote, chars, i = text[start], [], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            chars.append(_PY_ESCAPES.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        if ch == quote:
            return i + 1, "".join(chars)
        chars.append(ch)
        i += 1
    return None, ""


def _norm(word: str) -> str:
    text = unicodedata.normalize("NFC", word).casefold()
    return " ".join(text.split()).strip(" .!")


def _lookup(value: Any, table: dict[str, tuple[str, ...]]) -> str | None:
    if not isinstance(value, str):
        return None
    word = _norm(value)
    return next((name for name, words in table.items() if word in words), None)


def verdict_word(value: Any) -> str | None:
    """"pass" / "fail" for a documented verdict word (:data:`VERDICT_WORDS`), else None."""
    return _lookup(value, VERDICT_WORDS)


def claim_word(value: Any) -> str | None:
    """"supported" / "unsupported" / "contradicted" for a documented word (:data:`CLAIM_WORDS`), else None."""
    return _lookup(value, CLAIM_WORDS)

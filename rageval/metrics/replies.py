"""Reading what a model replied, in the shapes real endpoints give: pure functions, no I/O.

Endpoints that ignore ``response_format`` (many local servers, some gateways) wrap the JSON asked
for in prose or a fence, write it with single quotes, think aloud first, or answer the verdict in
the conversation's language. A reply is read by one rule (:func:`deciding_object`):

1. a reply over :data:`MAX_REPLY_CHARS` characters is an error, not parsed (a 150 MB reply was a
   MemoryError, a 1.6 MB one 14 s of CPU);
2. reasoning blocks are dropped: ``<think>…</think>``, ``<thinking>…``, ``<reasoning>…`` (an
   unclosed one runs to the end of the reply; a closing tag with no opening one drops everything
   before it, as servers that strip the opening tag send it);
3. every complete top-level JSON object of what is left is read (:func:`json_objects`): the scan
   skips braces inside strings (double- or single-quoted, with backslash escapes), so bare JSON, a
   ```json fence, prose before or after and prose plus a fence all read the same; an object
   written as a Python literal (``{'verdict': 'pass', 'ok': True}``) is turned into JSON token by
   token — single-quoted strings, ``True`` / ``False`` / ``None``, a trailing comma — and never
   evaluated. A duplicate key, nesting deeper than :data:`MAX_DEPTH` or more than
   :data:`MAX_STARTS` braces that open no object make the whole reply an error;
4. the reply is accepted only when exactly one object carries the key asked for (``verdict``,
   ``better``, ``claims``) — or all that carry it agree (then the last one is read). Objects that
   disagree (a draft "pass" then a final "fail", a verdict quoted from the context before the
   judge's own) are an error, never the first one read. No object with the key: an error.

An error is a ValueError showing the reply's first :data:`SNIPPET_CHARS` characters; the caller
asks again once, then reports an ``error`` check — never a pass. :func:`refusal_text` tells a
refusal written as prose ("I can't help with that.", "Xin lỗi, tôi không thể …") from an
unreadable reply: it is the ``refused`` state, not asked again. :func:`verdict_word` and
:func:`claim_word` map the documented words (English and Vietnamese, any case,
Unicode-normalised, a trailing full stop ignored) to ``pass`` / ``fail`` and ``supported`` /
``unsupported`` / ``contradicted``; anything else is None.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

SNIPPET_CHARS = 200
MAX_REPLY_CHARS = 65_536    # a judge reply with claims for a long answer is a few KB
MAX_DEPTH = 32              # braces and brackets nested inside one object
MAX_STARTS = 50             # '{' that open no JSON object, before the reply is given up on
REFUSAL_MAX_CHARS = 600     # a refusal is a sentence or two

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
#: A refusal written as text (matched on the casefolded reply, curly apostrophes made straight).
REFUSAL_PATTERNS = tuple(re.compile(p) for p in (
    r"\bi(?:'m| am)? (?:sorry|afraid)\b.*\b(?:can't|cannot|can not|unable|won't|will not)\b",
    r"^\W*(?:sorry[,.!]?\s*)?i (?:can't|cannot|can not|won't|will not|am unable to|'m unable to|am not able to) "
    r"(?:help|assist|comply|do that|provide|grade|evaluate|answer|continue|fulfil)",
    r"\b(?:xin lỗi|rất tiếc)\b.*\bkhông thể\b",
    r"^\W*tôi không thể (?:hỗ trợ|giúp|đánh giá|thực hiện|trả lời|chấm)",
))
_PY_WORDS = {"True": "true", "False": "false", "None": "null"}
_PY_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0"}
_REASONING_TAG = re.compile(r"<(/?)\s*(think|thinking|reasoning)\b[^>]*>", re.IGNORECASE)
_OUTSIDE = re.compile(r"[{}\[\]\"']")
_IN_STRING = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
T = TypeVar("T")


class _Duplicate(ValueError):
    pass


def snippet(text: Any) -> str:
    """The first ``SNIPPET_CHARS`` characters of a reply, whitespace collapsed."""
    text = " ".join(str(text)[: SNIPPET_CHARS * 4].split())
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS] + "…"


def without_reasoning(text: str) -> str:
    """``text`` less its reasoning blocks (rule 2 of the module docstring)."""
    out: list[str] = []
    pos, inside = 0, None
    for m in _REASONING_TAG.finditer(text):
        closing, name = bool(m.group(1)), m.group(2).lower()
        if inside is None and not closing:
            out.append(text[pos:m.start()])
            inside = name
        elif inside is None and closing:
            out = []                           # no opening tag: everything before was reasoning
            pos = m.end()
            continue
        elif closing and name == inside:
            inside = None
        else:
            continue
        pos = m.end()
    if inside is None:
        out.append(text[pos:])
    return "".join(out)


def _checked(text: Any) -> str:
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    if len(text) > MAX_REPLY_CHARS:
        raise ValueError(f"the reply is {len(text):,} characters, over the {MAX_REPLY_CHARS:,} read; not parsed")
    return text


def json_objects(text: str) -> list[dict[str, Any]]:
    """Every complete top-level JSON object of a reply, reasoning blocks dropped (rules 1–3 of the
    module docstring), in order; ValueError for a reply that must not be read."""
    body = without_reasoning(_checked(text))
    found: list[dict[str, Any]] = []
    pos, failed = 0, 0
    while (start := body.find("{", pos)) >= 0:
        end = _object_end(body, start)
        value = _load(body[start:end]) if end is not None else None
        if value is not None:
            found.append(value)
            pos = end  # type: ignore[assignment]
            continue
        failed += 1
        if failed > MAX_STARTS:
            raise ValueError(f"more than {MAX_STARTS} '{{' in the reply open no JSON object; not read: "
                             f"{snippet(text)!r}")
        pos = start + 1
    return found


def deciding_object(text: str, key: str, read: Callable[[dict[str, Any]], T],
                    agree: Callable[[T], Hashable] = lambda value: value,  # type: ignore[assignment, return-value]
                    ) -> T:
    """``read(obj)`` of the one JSON object of the reply that carries ``key`` — or of the last one
    when every object carrying it agrees (``agree`` gives what must be equal); ValueError otherwise
    (rule 4 of the module docstring). An object ``read`` refuses makes the reply unreadable."""
    objects = json_objects(text)
    if not objects:
        if not without_reasoning(text).strip():
            raise ValueError("the reply is empty" if not text.strip() else "the reply holds only reasoning")
        raise ValueError(f"no JSON object in the reply: {snippet(text)!r}")
    carrying = [obj for obj in objects if key in obj]
    if not carrying:
        if len(objects) == 1:
            return read(objects[0])           # names what is missing, e.g. "'verdict' must be …, got null"
        raise ValueError(f"none of the {len(objects)} JSON objects in the reply has '{key}': {snippet(text)!r}")
    readings = [read(obj) for obj in carrying]
    values = list(dict.fromkeys(agree(r) for r in readings))
    if len(values) > 1:
        shown = ", ".join(json.dumps(v, ensure_ascii=False, default=str) for v in values)
        raise ValueError(f"the reply holds {len(carrying)} JSON objects whose '{key}' disagree ({shown}); "
                         f"a reply must decide once")
    return readings[-1]


def refusal_text(text: Any) -> bool:
    """Whether a reply with no JSON object is a refusal written as prose (:data:`REFUSAL_PATTERNS`)."""
    if not isinstance(text, str) or len(text) > REFUSAL_MAX_CHARS or "{" in text:
        return False
    words = " ".join(unicodedata.normalize("NFC", text).casefold().replace("\u2019", "'").split())
    return any(p.search(words) for p in REFUSAL_PATTERNS)


def _object_end(text: str, start: int) -> int | None:
    """The index just past the ``}`` closing the ``{`` at ``start``; None when it never closes.
    Braces inside quoted strings do not count; ValueError past :data:`MAX_DEPTH` levels."""
    depth, nest, pos = 0, 0, start
    while (m := _OUTSIDE.search(text, pos)) is not None:
        ch, pos = m.group(), m.end()
        if ch in "\"'":
            pos = _string_end(text, pos, ch)
            if pos is None:
                return None
        elif ch in "{[":
            depth += ch == "{"
            nest += 1
            if nest > MAX_DEPTH:
                raise ValueError(f"a JSON object in the reply is nested deeper than {MAX_DEPTH} levels; not read")
        else:
            nest = max(nest - 1, 0)
            if ch == "}":
                depth -= 1
                if depth == 0:
                    return pos
    return None


def _string_end(text: str, pos: int, quote: str) -> int | None:
    pattern = _IN_STRING[quote]
    while (m := pattern.search(text, pos)) is not None:
        if m.group() == quote:
            return m.end()
        pos = m.end() + 1                      # a backslash escapes the next character
    return None


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"a JSON object in the reply gives '{key}' twice; not read")
        out[key] = value
    return out


def _not_json(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


def _load(candidate: str) -> dict[str, Any] | None:
    """The candidate as a JSON object (or a Python-literal-like one); None when it is neither.
    A duplicate key raises ValueError: a reply that says one thing twice is not read."""
    for text in (candidate, python_literal_to_json(candidate)):
        if text is None:
            continue
        try:
            value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_not_json)
        except _Duplicate as exc:
            raise ValueError(str(exc)) from None
        except (ValueError, RecursionError):
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

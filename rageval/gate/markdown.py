"""Untrusted text made safe for the PR comment and the terminal.

* ``printable`` neutralises control characters and bidi controls (visible escapes, never dropped);
* ``escape_md`` (the ``md`` filter) for text inline in a paragraph, a table cell or an HTML tag:
  ``<`` that could open a tag, comment or autolink (``<`` before a letter, ``/``, ``!`` or ``?``),
  every ``>``, and ``&`` that could start an entity become entities — so no raw HTML, and an
  answer cannot close our ``<details>``; a lone ``<`` as in ``0.63 < 0.85`` stays readable. ``|``,
  backticks, backslashes and brackets become entities (no broken tables, no code spans or links
  swallowing our markup). A zero-width joiner breaks what GitHub would turn into a notification
  or a cross-reference: a mention (``@name`` after anything but an ASCII letter, digit or ``_`` —
  GitHub counts ``é@octocat`` as one), an issue reference (``#1``, ``acme/other#2``, ``GH-1``)
  and a bare URL. Newlines become ``<br>``.
* ``fence`` for answers shown verbatim: a fenced code block whose fence is longer than any
  backtick run in the text, so the text cannot close it; inside it nothing is rendered.

Both cut the text to a bounded length, ending "… (N more characters)": one 200 KB answer must not
push every other case out of the comment.
"""

from __future__ import annotations

import re
from typing import Any

ANSWER_MAX_CHARS = 1_500           # Before / After answers, each
FIELD_MAX_CHARS = 1_500            # the Question and Expected lines of a pass→fail case
QUESTION_MAX_CHARS = 300           # a question in a case's summary line or a table cell
INLINE_MAX_CHARS = 1_000           # any other untrusted text: ids, reasons, check messages
TITLE_MAX_CHARS = 200              # report.title, before the verdict on the first line
SUMMARY_TITLE_MAX = 60             # report.title in the one-line summary (≤ 140 characters in all)

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;", "`": "&#96;", "\\": "&#92;",
             "[": "&#91;", "]": "&#93;"}
_ENTITY_RE = re.compile(r"&(?=[#A-Za-z0-9])|<(?=[A-Za-z/!?])|[>|`\\\[\]]")
#: "@" that GitHub may read as a mention: after anything but an ASCII letter, digit or "_"
_MENTION_RE = re.compile(r"(?<![A-Za-z0-9_])@(?=[\w-])")
#: where a zero-width joiner goes to break an issue reference (#1, acme/other#2, GH-1) or a bare URL
_REFERENCE_RE = re.compile(r"#(?=\d)|(?<![A-Za-z0-9_])GH-(?=\d)|:(?=//)|(?<![A-Za-z0-9_.])www(?=\.)", re.I)
#: what printable() makes visible: C0 controls but tab (and newline, when kept), DEL, C1 controls,
#: the Arabic letter mark, LRM/RLM, line and paragraph separators, bidi embeddings, overrides and isolates
_UNPRINTABLE = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNPRINTABLE_RE = re.compile(rf"[\n{_UNPRINTABLE}]")
_UNPRINTABLE_BUT_NEWLINE_RE = re.compile(rf"[{_UNPRINTABLE}]")
_ESCAPES = {"\n": "\\n", "\r": "\\r"}

# --- escaping --------------------------------------------------------------------------------

def _lines(text: Any) -> str:
    return str(text).replace("\r\n", "\n").replace("\r", "\n")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0xA0 else f"U+{ord(char):04X}"


def printable(text: Any, *, newlines: bool = False) -> str:
    """``text`` safe to show in a terminal, a job log or the PR comment: control characters (C0
    but tab, DEL, C1) become ``\\x1b``-style escapes, bidi controls (U+202A–U+202E, U+2066–U+2069,
    U+200E/F, U+061C) and line/paragraph separators become ``U+202E``-style text — visible, never
    dropped — so untrusted text (golden files, answers, app errors) cannot move the cursor,
    recolour the terminal, or hide and reorder what follows it. A newline becomes ``\\n`` too,
    unless ``newlines`` keeps line breaks. Backslashes already in the text are left as they are."""
    pattern = _UNPRINTABLE_BUT_NEWLINE_RE if newlines else _UNPRINTABLE_RE
    return pattern.sub(_escape, str(text))


def cut(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, ending "… (N more characters)"; ``None``: no limit."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()}… ({len(text) - limit:,} more characters)"


def _break_links(text: str) -> str:
    text = _MENTION_RE.sub("@\u200d", text)
    return _REFERENCE_RE.sub(lambda m: m.group() + "\u200d", text)


def escape_md(text: Any, limit: int | None = INLINE_MAX_CHARS) -> str:
    """Model/user text made safe inline in markdown, a table cell or an HTML tag (see module doc),
    cut to ``limit`` characters (before escaping) with "… (N more characters)"."""
    if text is None:
        return ""
    s = _break_links(printable(cut(_lines(text), limit), newlines=True))
    s = _ENTITY_RE.sub(lambda m: _ENTITIES[m.group()], s)
    return s.replace("\n", "<br>")


def fence(text: Any, limit: int | None = ANSWER_MAX_CHARS) -> str:
    """A fenced code block showing ``text`` verbatim (control and bidi characters made visible),
    cut to ``limit`` characters; its fence is longer than any backtick run in the text (at least
    three), so the text cannot end the block."""
    s = printable(cut(_lines(text).strip("\n"), limit), newlines=True)
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}text\n{s}\n{bar}"


#: an entity escape_md wrote (kept whole), or a number not inside a word or an id (DT-1): 7, 30.000, 12:00
_NUMBER_RE = re.compile(r"&#?\w+;|(?<![\w\-;&#])(\d(?:[\d.,:]*\d)?)")
#: what would start a block (heading, list, quote, setext line) at the start of the quoted text
_BLOCK_START_RE = re.compile(r"^(\d+)([.)])|^([#+\-=>])")


def _numbers(text: Any) -> set[str]:
    return {m.group(1) for m in _NUMBER_RE.finditer(str(text or "")) if m.group(1)}


def quoted(text: Any, other: Any = None, limit: int | None = ANSWER_MAX_CHARS) -> str:
    """An answer as a block quote, which wraps (a code block does not, so the wrong number could sit
    off screen): escaped like ``escape_md`` (no HTML, no mention, no link, newlines as ``<br>``), with
    emphasis characters and a block marker at the start escaped too, and in bold each number that
    ``other`` (the answer it is compared with) does not have."""
    raw = _lines(text if text is not None else "")
    more = len(raw) - limit if limit is not None and len(raw) > limit else 0
    s = escape_md(raw[:limit].rstrip() if more else raw, None)
    s = s.replace("*", "&#42;").replace("_", "&#95;").replace("~", "&#126;")
    s = _BLOCK_START_RE.sub(lambda m: f"{m.group(1)}&#{ord(m.group(2))};" if m.group(1)
                            else f"&#{ord(m.group(3))};", s)
    theirs = _numbers(other) if other is not None else set()

    def bold(match: re.Match[str]) -> str:
        number = match.group(1)
        return f"**{number}**" if number and other is not None and number not in theirs else match.group()
    return "> " + _NUMBER_RE.sub(bold, s) + (f"… ({more:,} more characters)" if more else "")

"""From chat logs to golden-set candidates: scrub personal data, merge duplicates, group by intent,
and propose a diverse sample for a person to label.

The pipeline (``rageval golden candidates --logs chat.jsonl --out candidates.yaml``)::

    entries = load_logs(path)                         # JSONL -> LogEntry(line, text)
    cs = propose(entries, embedder=LocalEmbedder(), n=40, names=load_names(names_file))
    text = render_candidates_yaml(cs, source=path.name)

Questions keep the customer's own spelling (no diacritics added, typos kept): the only change
to a text is that personal data becomes a placeholder.

Scrubbing policy (:func:`scrub`), applied in this order:

1. ``<EMAIL>``: ``local@domain.tld`` in the usual ASCII forms.
2. ``<ORDER>``: every regex of ``order_patterns`` (:data:`DEFAULT_ORDER_PATTERNS` by default:
   ``DH-2026-0012345``, ``ĐH2026001234``, ``dh 20260012345``, ``BH123456`` — ``DH``/``ĐH``/``BH``
   and at least five digits, any letter case; ``#123456``; carrier tracking codes ``GHN…``, ``GHTK…``, ``SPXVN…``,
   ``VTP…``, ``VNP…`` with at least six digits). Section ids such as ``BH-3`` or ``DT-10`` have
   too few digits to match.
3. ``<PHONE>``: Vietnamese numbers with a leading 0 (10-digit mobiles, 11-digit ``02…``
   landlines, optionally ``(028) …``), or with ``84``/``+84``/``(+84)``/``0084`` instead of the
   0 (a ``(0)`` or ``0`` after the country code is allowed); international numbers that start
   with ``+``, ``(+cc)`` or ``00`` and a space (``+1`` and ten digits; others 8–15 digits).
   Digit groups may be separated by one space, dot or hyphen (``0912 345 678``,
   ``0912.345.678``, ``+84-912-345-678``); the local form needs a first group of at least three
   digits. A number is only replaced whole, and the digits after it are left alone
   (``0912 345 678 2 cái`` -> ``<PHONE> 2 cái``).
4. ``<NAME>``: every name of ``names``, matched as whole words, ignoring case and diacritics,
   with any whitespace between its words ("Nguyễn Văn An" also matches "nguyen  van an").
5. ``<NUMBER>``, the safety net: digits that are left form chains (digit groups joined by one
   space, ``.``, ``,``, ``-`` or ``/``). A chain is cut at its spaces into parts; a part is kept
   when it is a money amount (a currency unit follows — ``đ d vnd vnđ đồng dong k tr triệu nghìn
   ngàn`` — or it is grouped by thousands and ends in ``000``, like ``499.000`` or ``1.500.000``)
   or a date (``28/09/2026``, ``2026-09-28``). Consecutive other parts with 7 or more digits in
   total (a phone written some other way, an account or ID-card number, an unknown order code)
   become ``<NUMBER>``. So "7 ngày", "30 ngày", "12 tháng", "500.000đ" and "1.500.000" survive,
   while "3822 1234", "912 345 678" and "1234567" do not. Privacy wins over content when they
   meet: a chain whose digits read together are a Vietnamese phone number (10 digits from 0,
   11 from 02, 84 + 9 or 10) is replaced whole however it is grouped, even when a piece of it
   looks like a date ("ngày 01.02.2026 12 giờ" -> "ngày <NUMBER> giờ").
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from rageval.errors import ConfigError, DatasetError
from rageval.text import fold

__all__ = [
    "DEFAULT_ORDER_PATTERNS",
    "KINDS",
    "MAX_LOG_LINES",
    "MAX_UNIQUE",
    "STOPWORDS",
    "TEXT_FIELDS",
    "Candidate",
    "CandidateSet",
    "Cluster",
    "LogEntry",
    "ScrubResult",
    "Scrubber",
    "load_logs",
    "load_names",
    "propose",
    "render_candidates_yaml",
    "scrub",
]

#: Placeholder kinds, in the order they are reported.
KINDS = ("PHONE", "EMAIL", "ORDER", "NAME", "NUMBER")

#: Order-code regexes used when none are configured (see the module docstring).
DEFAULT_ORDER_PATTERNS: tuple[str, ...] = (
    r"(?i)\b(?:DH|ĐH|BH)[-_ ]?\d(?:[-_]?\d){4,}\b",
    r"(?<![\w#])#\d{5,}\b",
    r"(?i)\b(?:GHN|GHTK|SPXVN|SPX|VTP|VNP)[-_ ]?[A-Z0-9]*\d{6,}[A-Z0-9]*\b",
)

#: Keys tried, in order, for the customer's text of a log line when no field is given.
TEXT_FIELDS = ("question", "message", "text", "content")

MAX_LOG_LINES = 200_000
MAX_UNIQUE = 50_000

MSG_TOO_MANY_LINES = ("{path}: more than {limit} lines. Candidates need a sample, not the whole history: "
                      "take a random sample first (e.g. `shuf -n 20000 {name} > sample.jsonl`).")
MSG_BAD_JSON = "{path}:{line}: not valid JSON ({error}). Each line must be one JSON object; fix or delete the line."
MSG_NOT_OBJECT = "{path}:{line}: expected a JSON object, got {kind}. Each line must be one object like {{\"message\": \"...\"}}."
MSG_NO_FIELD = ("{path}:{line}: no customer text found; tried {tried}, the line has keys {keys}. "
                "Name the field that holds the question with --field.")
MSG_FIELD_NOT_TEXT = ("{path}:{line}: field '{field}' is {kind}, expected text (or an OpenAI-style messages list). "
                      "Name the field that holds the question with --field.")
MSG_BAD_PATTERN = "order pattern {pattern!r} is not a valid regular expression ({error}). Fix the pattern."
MSG_EMPTY_PATTERN = ("order pattern {pattern!r} matches the empty string, so it would match everywhere. "
                     "Make it require at least one character (e.g. use + instead of *).")
MSG_BAD_NAME = "names: entry #{index} ({value!r}) has no letters. Give full names such as 'Nguyễn Văn An'."

#: Words left out of the text that is embedded for de-duplication and clustering (folded forms):
#: Vietnamese particles, pronouns, pleasantries and question words that every intent shares
#: ("có … không", "thì sao ạ", "shop ơi", "cảm ơn"), and a few English ones. Words whose folded form collides with a
#: content word are kept: "bao" (bao lâu / bảo hành), "may" (mấy / máy), "tien" (tiền).
_STOPWORDS_TEXT = """
a ah ak alo anh ban cho chi chua co cua cung dc de den di do duoc em gi ha hok hoi k kg khi khong ko
la lai luon ma minh nao nay nha nhe nhieu nhu nua o oi ra roi sao sau sdt shop so the thi thoi toi
trong tu va vao vay ve voi vs cam on xin chao ok oke
an and are at about can do does for from hello hi how i is it me my of or please thank thanks the to what
when you
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())

_PLACEHOLDER = re.compile(r"<(?:PHONE|EMAIL|ORDER|NAME|NUMBER)>")
_WORD = re.compile(r"\w+")


# --- scrubbing ---------------------------------------------------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]*[A-Za-z0-9_%+-])?"
                    r"@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                    r"\.[A-Za-z]{2,24}\b")

# One separator between two digit groups of a phone number.
_PSEP = r"(?:[ \t]?[.\-][ \t]?|[ \t])"
# Where a phone number may start. The Vietnamese local form needs a first group of >= 3 digits
# (or a bracketed area code), so "01.02.2026 12" is not read as a phone number.
_PHONE_START = re.compile(
    r"(?<!\d)(?<!\d[.,])(?:"
    r"(?P<intl>\([ \t]?\+[ \t]?\d{1,3}[ \t]?\)|\+[ \t]?\d{1,3}|00[1-9]\d{0,2}(?=" + _PSEP + r"\d))"
    r"|(?P<vn84>84(?=" + _PSEP + r"?(?:\(0\)|0)?" + _PSEP + r"?[1-9]))"
    r"|(?P<local>\(0[1-9]\d{1,2}\)|0[1-9]\d+)"
    r")"
)
_PHONE_GROUP = re.compile(_PSEP + r"?(\(0\)|\(\d{1,4}\)|\d+)")
_MAX_GROUPS = 16

_CHAIN = re.compile(r"\d+(?:(?:[.,\-/]|[ \t][.\-/]?[ \t]?)\d+)*")
_CHAIN_GAP = re.compile(r"[ \t][.\-/]?[ \t]?")
_MONEY_GROUPED = re.compile(r"[1-9]\d{0,2}(?:(?P<sep>[.,])\d{3})(?:(?P=sep)\d{3})*")
_MONEY_PLAIN = re.compile(r"[1-9]\d*(?:[.,]\d{3})*")
_CURRENCY = re.compile(r"[ \t]?(?:đồng|dong|vnđ|vnd|đ|d|k|tr|triệu|trieu|nghìn|nghin|ngàn|ngan)(?!\w)", re.IGNORECASE)
_DATE = re.compile(r"(?P<d>\d{1,2})([./-])(?P<m>\d{1,2})\2(?P<y>\d{4}|\d{2})|(?P<y2>\d{4})([./-])(?P<m2>\d{1,2})\6(?P<d2>\d{1,2})")
_NET_MIN_DIGITS = 7


@dataclass(frozen=True)
class ScrubResult:
    text: str
    kinds: tuple[str, ...]   # the kinds of placeholder inserted, in KINDS order


def _digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def _phone_valid(kind: str, digits: str) -> bool:
    """Whether ``digits`` (trunk zeros removed) is a whole phone number of this kind."""
    if kind == "local":
        return len(digits) == (11 if digits.startswith("02") else 10)
    if digits.startswith("84"):           # Vietnam: 9-digit mobiles, 10-digit 02x landlines
        return len(digits) == (12 if digits[2:3] == "2" else 11)
    if kind == "vn84":
        return False
    if digits.startswith("1"):            # North America: +1 and ten digits
        return len(digits) == 11
    return 8 <= len(digits) <= 15


def _phone_span(text: str, m: re.Match[str]) -> int | None:
    """End of the longest phone number starting at match ``m``, or None.

    Reads digit groups after the start, and keeps the longest prefix of groups that is a whole
    number of the start's kind, so "0912 345 678 2 cái" ends before "2"."""
    kind = m.lastgroup or "local"
    pos = m.end()
    digits = re.sub(r"\D", "", m.group(0))
    if kind == "intl" and digits.startswith("00"):
        digits = digits[2:]                  # 0084 …: the international call prefix
    ends: list[tuple[int, str]] = [(pos, digits)]     # (end, digits so far) after each group
    for index in range(_MAX_GROUPS):
        g = _PHONE_GROUP.match(text, pos)
        if g is None:
            break
        group = g.group(1)
        if kind == "local" and (group.startswith("(") or len(group) < 2):
            break
        if group == "(0)" or (kind == "vn84" and index == 0 and group == "0"):
            if kind == "local" or index > 0:
                break
            group = ""                       # trunk zero after the country code: not dialled
        pos = g.end()
        digits += re.sub(r"\D", "", group)
        if kind != "local" and digits.startswith("840"):
            digits = "84" + digits[3:]       # +84 0912…: the trunk zero written anyway
        ends.append((pos, digits))
        if len(digits) > 16:
            break
    for end, found in reversed(ends):
        if _phone_valid(kind, found):
            return end
    return None


def _replace_phones(text: str) -> tuple[str, bool]:
    out: list[str] = []
    pos = 0
    found = False
    search = 0
    while True:
        m = _PHONE_START.search(text, search)
        if m is None:
            break
        end = _phone_span(text, m)
        if end is None:
            search = m.start() + 1
            continue
        out.append(text[pos:m.start()])
        out.append("<PHONE>")
        found = True
        pos = search = end
    out.append(text[pos:])
    return "".join(out), found


def _is_date(part: str) -> bool:
    m = _DATE.fullmatch(part)
    if m is None:
        return False
    day, month = (m.group("d"), m.group("m")) if m.group("d") else (m.group("d2"), m.group("m2"))
    return 1 <= int(day) <= 31 and 1 <= int(month) <= 12


def _is_money(part: str, after: str) -> bool:
    if _CURRENCY.match(after) and _MONEY_PLAIN.fullmatch(part):
        return True
    return bool(_MONEY_GROUPED.fullmatch(part)) and part.endswith("000")


def _net_spans(text: str, chain: re.Match[str]) -> list[tuple[int, int]]:
    """The spans of one digit chain that become <NUMBER> (see the module docstring)."""
    digits = re.sub(r"\D", "", chain.group(0))
    if _phone_valid("local", digits) or _phone_valid("vn84", digits.removeprefix("00")):
        return [chain.span()]        # a phone number however grouped, even if a piece looks like a date
    parts: list[tuple[int, int]] = []
    start = chain.start()
    for gap in _CHAIN_GAP.finditer(text, chain.start(), chain.end()):
        if gap.start() > start:
            parts.append((start, gap.start()))
        start = gap.end()
    parts.append((start, chain.end()))
    runs: list[list[tuple[int, int]]] = [[]]
    for a, b in parts:
        part = text[a:b]
        if _is_money(part, text[b:b + 8]) or _is_date(part):
            runs.append([])
        else:
            runs[-1].append((a, b))
    return [(run[0][0], run[-1][1]) for run in runs
            if run and sum(_digits(text[a:b]) for a, b in run) >= _NET_MIN_DIGITS]


def _net(text: str) -> tuple[str, bool]:
    """Replace left-over long digit runs that are neither money nor dates with <NUMBER>."""
    out: list[str] = []
    pos = 0
    for chain in _CHAIN.finditer(text):
        for a, b in _net_spans(text, chain):
            out.append(text[pos:a])
            out.append("<NUMBER>")
            pos = b
    out.append(text[pos:])
    return "".join(out), bool(pos)


_CHAR_FOLD: dict[str, str] = {}


def _fold_map(text: str) -> tuple[str, list[int]]:
    """The folded text (:func:`rageval.text.fold` character by character, whitespace kept as one
    space each) and, for every folded character, the index of the original character."""
    chars: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        piece = _CHAR_FOLD.get(ch)
        if piece is None:
            piece = " " if ch.isspace() else fold(ch)
            if len(_CHAR_FOLD) < 100_000:
                _CHAR_FOLD[ch] = piece
        chars.append(piece)
        index.extend([i] * len(piece))
    return "".join(chars), index


class Scrubber:
    """Compiled scrubbing rules for one list of names and one list of order patterns.

    Building one compiles the patterns once; :func:`scrub` keeps a small cache of them.
    Raises ConfigError for an invalid order pattern or a name with no letters.
    """

    def __init__(self, names: Sequence[str] = (), order_patterns: Sequence[str] = DEFAULT_ORDER_PATTERNS) -> None:
        if isinstance(names, str):
            names = [names]
        if isinstance(order_patterns, str):
            order_patterns = [order_patterns]
        self.order_patterns = tuple(order_patterns)
        self._orders: list[re.Pattern[str]] = []
        for pattern in self.order_patterns:
            try:
                compiled = re.compile(pattern)
            except re.error as exc:
                raise ConfigError(MSG_BAD_PATTERN.format(pattern=pattern, error=exc)) from None
            if compiled.search("") is not None:
                raise ConfigError(MSG_EMPTY_PATTERN.format(pattern=pattern))
            self._orders.append(compiled)
        words_of_names: list[tuple[str, ...]] = []
        for i, name in enumerate(names, start=1):
            words = tuple(_WORD.findall(fold(unicodedata.normalize("NFC", str(name)))))
            if not isinstance(name, str) or not any(any(c.isalpha() for c in w) for w in words):
                raise ConfigError(MSG_BAD_NAME.format(index=i, value=name))
            words_of_names.append(words)
        self.names = tuple(names)
        unique = sorted(set(words_of_names), key=lambda w: (-sum(map(len, w)), w))
        self._names = (re.compile(r"(?<!\w)(?:" + "|".join(r"\s+".join(map(re.escape, w)) for w in unique) + r")(?!\w)")
                       if unique else None)

    def scrub(self, text: str) -> ScrubResult:
        text = unicodedata.normalize("NFC", text)
        kinds: set[str] = set()
        text, n = _EMAIL.subn("<EMAIL>", text)
        if n:
            kinds.add("EMAIL")
        for pattern in self._orders:
            text, n = pattern.subn("<ORDER>", text)
            if n:
                kinds.add("ORDER")
        text, found = _replace_phones(text)
        if found:
            kinds.add("PHONE")
        if self._names is not None:
            text, found = self._replace_names(text)
            if found:
                kinds.add("NAME")
        text, found = _net(text)
        if found:
            kinds.add("NUMBER")
        return ScrubResult(text, tuple(k for k in KINDS if k in kinds))

    def _replace_names(self, text: str) -> tuple[str, bool]:
        folded, index = _fold_map(text)
        spans = [(index[m.start()], index[m.end() - 1] + 1) for m in self._names.finditer(folded)]
        for start, end in reversed(spans):
            while end < len(text) and unicodedata.combining(text[end]):
                end += 1
            text = text[:start] + "<NAME>" + text[end:]
        return text, bool(spans)


@lru_cache(maxsize=16)
def _scrubber(names: tuple[str, ...], order_patterns: tuple[str, ...]) -> Scrubber:
    return Scrubber(names, order_patterns)


def scrub(text: str, *, names: Sequence[str] = (), order_patterns: Sequence[str] = DEFAULT_ORDER_PATTERNS) -> str:
    """``text`` with phone numbers, emails, order codes, the given names and other long digit runs
    replaced by ``<PHONE>``, ``<EMAIL>``, ``<ORDER>``, ``<NAME>``, ``<NUMBER>`` (policy in the module
    docstring). Everything else — spelling, diacritics or their absence, prices, deadlines — is kept.

    >>> scrub("sdt em 0912 345 678, đổi trả trong 7 ngày hả?")
    'sdt em <PHONE>, đổi trả trong 7 ngày hả?'
    """
    names_t = (names,) if isinstance(names, str) else tuple(names)
    patterns_t = (order_patterns,) if isinstance(order_patterns, str) else tuple(order_patterns)
    return _scrubber(names_t, patterns_t).scrub(text).text


# --- loading -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogEntry:
    line: int    # 1-based line number in the log file
    text: str    # the customer's text, as written


def _content_text(content: Any) -> str | None:
    """OpenAI message content: a string, or a list of parts with ``{"type": "text", "text": …}``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "\n".join(parts) if parts else None
    return None


def _first_user_message(messages: list[Any]) -> str | None:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "user":
            text = _content_text(message.get("content"))
            if text is not None:
                return text
    return None


def _entry_text(obj: dict[str, Any], field: str | None, path: Path, line: int) -> str | None:
    if field is not None:
        if field not in obj:
            raise DatasetError(MSG_NO_FIELD.format(path=path, line=line, tried=f"'{field}'", keys=_keys(obj)))
        value = obj[field]
        if isinstance(value, list):
            text = _first_user_message(value)
            if text is None and value and not all(isinstance(m, dict) for m in value):
                raise DatasetError(MSG_FIELD_NOT_TEXT.format(path=path, line=line, field=field, kind="a list of non-messages"))
            return text
        if value is None:
            return None
        if not isinstance(value, str):
            raise DatasetError(MSG_FIELD_NOT_TEXT.format(path=path, line=line, field=field, kind=type(value).__name__))
        return value
    for key in TEXT_FIELDS:
        value = obj.get(key)
        if isinstance(value, str):
            return value
        if key == "content" and isinstance(value, list):
            return _content_text(value)
    if isinstance(obj.get("messages"), list):
        return _first_user_message(obj["messages"])
    raise DatasetError(MSG_NO_FIELD.format(path=path, line=line, tried=", ".join([*TEXT_FIELDS, "messages"]),
                                           keys=_keys(obj)))


def _keys(obj: dict[str, Any]) -> str:
    return ", ".join(sorted(map(str, obj))) if obj else "none"


def load_logs(path: str | Path, field: str | None = None) -> list[LogEntry]:
    """Customer messages from a JSONL chat log, one :class:`LogEntry` per line that has text.

    Each non-empty line is a JSON object. The text is taken from ``field`` when given, else from
    the first of ``question``, ``message``, ``text``, ``content`` that holds text, else from an
    OpenAI-style ``messages`` list (the conversation's first ``user`` message). Lines whose text is
    empty, and conversations with no user message, are skipped. Raises DatasetError naming the
    file and line for a malformed line, and for files over :data:`MAX_LOG_LINES` lines.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: log file not found. Check the --logs path.")
    entries: list[LogEntry] = []
    try:
        with path.open("r", encoding="utf-8") as handle:
            for number, raw in enumerate(handle, start=1):
                if number > MAX_LOG_LINES:
                    raise DatasetError(MSG_TOO_MANY_LINES.format(path=path, limit=MAX_LOG_LINES, name=path.name))
                raw = raw.strip()
                if not raw:
                    continue
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise DatasetError(MSG_BAD_JSON.format(path=path, line=number, error=exc.msg)) from None
                if not isinstance(obj, dict):
                    raise DatasetError(MSG_NOT_OBJECT.format(path=path, line=number, kind=type(obj).__name__))
                text = _entry_text(obj, field, path, number)
                if text is not None and text.strip():
                    entries.append(LogEntry(number, text.strip()))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start} of a line). Save the log as UTF-8.") from None
    return entries


def load_names(path: str | Path) -> tuple[str, ...]:
    """Names to scrub, one per line; blank lines and lines starting with ``#`` are skipped."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: names file not found. Give a text file with one customer name per line.")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start}). Save the names file as UTF-8.") from None
    return tuple(s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#"))


# --- proposing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    id: str                     # cand-001 …
    question: str               # scrubbed, otherwise exactly as the customer wrote it
    cluster: int                # 1-based; clusters are numbered by how often customers asked
    cluster_label: str          # the cluster's most distinctive (folded) words
    duplicates: int             # other log entries merged into this one (exact or near duplicates)
    lines: tuple[int, ...]      # source line numbers of this question and its duplicates
    scrubbed: tuple[str, ...]   # kinds of personal data replaced in ``question``
    variants: tuple[str, ...] = ()   # other spellings merged into it (scrubbed, at most 5)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "cluster": self.cluster,
                "cluster_label": self.cluster_label, "duplicates": self.duplicates, "lines": list(self.lines),
                "scrubbed": list(self.scrubbed), "variants": list(self.variants)}


@dataclass(frozen=True)
class Cluster:
    id: int
    label: str
    questions: int      # distinct questions (after merging duplicates)
    occurrences: int    # log entries, duplicates included

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "questions": self.questions, "occurrences": self.occurrences}


@dataclass(frozen=True)
class CandidateSet:
    candidates: tuple[Candidate, ...]
    clusters: tuple[Cluster, ...]
    entries: int             # log entries given
    unique: int              # distinct questions left after de-duplication
    merged: int              # entries merged into another as an exact or near duplicate
    dropped_empty: int       # entries with fewer than min_words content words once personal data is removed
    dropped_existing: int    # distinct questions already (nearly) in the golden set
    embedder: str
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": [c.to_dict() for c in self.candidates], "clusters": [c.to_dict() for c in self.clusters],
                "entries": self.entries, "unique": self.unique, "merged": self.merged,
                "dropped_empty": self.dropped_empty, "dropped_existing": self.dropped_existing,
                "embedder": self.embedder, "seed": self.seed}


@dataclass
class _Group:
    """A distinct question while proposing (mutable scratch, never returned)."""
    text: str
    kinds: tuple[str, ...]
    key: str
    lines: list[int]
    variants: list[str]


def _key(text: str) -> str:
    """The form two texts must share to be exact duplicates: folded words, placeholders removed."""
    return " ".join(_WORD.findall(fold(_PLACEHOLDER.sub(" ", text))))


def _content_words(text: str, stopwords: frozenset[str]) -> list[str]:
    """Folded words of ``text`` without placeholders and stop words (all words if none is left)."""
    words = _WORD.findall(fold(_PLACEHOLDER.sub(" ", text)))
    return [w for w in words if w not in stopwords] or words


def _check_params(n: int, dedupe_threshold: float, min_words: int, k: int | None) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"candidates: n (how many candidates to propose) must be a positive integer, got {n!r}.")
    if isinstance(dedupe_threshold, bool) or not isinstance(dedupe_threshold, (int, float)) \
            or not 0.0 < float(dedupe_threshold) <= 1.0:
        raise ConfigError(f"candidates: dedupe_threshold must be a cosine similarity in (0, 1], e.g. 0.9; "
                          f"got {dedupe_threshold!r}.")
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
        raise ConfigError(f"candidates: min_words must be a positive integer, got {min_words!r}.")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"candidates: k (number of intent clusters) must be a positive integer, got {k!r}.")


def _near_duplicates(vectors: np.ndarray, threshold: float, block: int = 1024) -> list[int]:
    """For each row, the index of the earlier row it merges into (itself when it starts a group).

    Greedy in order: a row joins the most similar earlier group representative with cosine >=
    threshold. Similarities are computed in blocks of rows, so memory stays O(block × m).
    """
    m = len(vectors)
    parent = list(range(m))
    is_rep = np.zeros(m, dtype=bool)
    for start in range(0, m, block):
        sims = vectors[start:start + block] @ vectors[:start + block].T
        for r in range(sims.shape[0]):
            i = start + r
            row = sims[r, :i]
            candidates = np.nonzero((row >= threshold) & is_rep[:i])[0]
            if len(candidates):
                best = candidates[np.argmax(row[candidates])]
                parent[i] = int(best)
            else:
                is_rep[i] = True
    return parent


def _kmeans(x: np.ndarray, k: int, rng: np.random.Generator, n_init: int = 8, iters: int = 50) -> np.ndarray:
    """Spherical k-means (cosine) with k-means++ seeding; the best of ``n_init`` runs. Labels 0..k-1."""
    m = len(x)
    best_labels, best_score = None, -math.inf
    for _ in range(n_init):
        centers = [int(rng.integers(m))]
        closest = x @ x[centers[0]]
        for _ in range(1, k):
            d = np.clip(1.0 - closest, 0.0, None) ** 2
            d[centers] = 0.0
            total = d.sum()
            if total <= 0:
                choices = np.setdiff1d(np.arange(m), centers)
                nxt = int(choices[rng.integers(len(choices))])
            else:
                nxt = int(rng.choice(m, p=d / total))
            centers.append(nxt)
            closest = np.maximum(closest, x @ x[nxt])
        c = x[centers].copy()
        labels = np.full(m, -1)
        for _ in range(iters):
            sims = x @ c.T
            new = np.argmax(sims, axis=1)
            if np.array_equal(new, labels):
                break
            labels = new
            for j in range(k):
                members = x[labels == j]
                if len(members) == 0:       # an emptied cluster restarts at the worst-served point
                    far = int(np.argmin(sims[np.arange(m), labels]))
                    c[j] = x[far]
                    labels[far] = j
                    continue
                mean = members.sum(axis=0)
                norm = np.linalg.norm(mean)
                c[j] = mean / norm if norm > 0 else members[0]
        score = float((x @ c.T)[np.arange(m), labels].sum())
        if score > best_score + 1e-9:
            best_labels, best_score = labels.copy(), score
    return best_labels


def _diverse_order(x: np.ndarray, occurrences: list[int], first_line: list[int], limit: int) -> list[int]:
    """Up to ``limit`` row indices of one cluster: first the question that best stands for it
    (times asked × similarity to the whole cluster; ties: the earliest), then repeatedly the one
    least similar to all picked so far (ties: the most asked, then the earliest)."""
    size = len(x)
    occ = np.asarray(occurrences)
    line = np.asarray(first_line)
    typical = occ * (x @ x.sum(axis=0))
    first = int(np.lexsort((line, -typical))[0])
    picked = [first]
    closest = x @ x[first]
    closest[first] = np.inf
    while len(picked) < min(size, limit):
        nxt = int(np.lexsort((line, -occ, closest))[0])
        picked.append(nxt)
        closest = np.maximum(closest, x @ x[nxt])
        closest[picked] = np.inf
    return picked


def _default_k(m: int) -> int:
    return max(1, min(m, 30, round(math.sqrt(m / 2))))


def _mean_position(word: str, texts: list[list[str]]) -> float:
    """Mean relative position (0 = first word, 1 = last) of ``word`` where it occurs, so a label
    reads in the customers' word order ("bao hanh", not "hanh bao")."""
    spots = [t.index(word) / max(1, len(t) - 1) for t in texts if word in t]
    return sum(spots) / len(spots)


def _labels(texts: list[list[str]], members: list[list[int]], top: int = 3) -> list[str]:
    """Most distinctive folded words of each cluster: share of the cluster's questions using a word
    × log(#questions / #questions using it); words of one letter and numbers are left out. The
    chosen words are put in the order customers write them."""
    m = len(texts)
    df: dict[str, int] = {}
    for words in texts:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    out = []
    for group in members:
        cdf: dict[str, int] = {}
        for i in group:
            for w in set(texts[i]):
                if len(w) > 1 and not w.isdigit():
                    cdf[w] = cdf.get(w, 0) + 1
        best = sorted(cdf, key=lambda w: (-(cdf[w] / len(group)) * math.log((m + 1) / df[w]), w))[:top]
        out.append(" ".join(sorted(best, key=lambda w: (_mean_position(w, [texts[i] for i in group]), w))))
    return out


def propose(entries: Iterable[LogEntry], *, embedder: Any = None, n: int = 40, names: Sequence[str] = (),
            order_patterns: Sequence[str] = DEFAULT_ORDER_PATTERNS, existing_questions: Iterable[str] = (),
            dedupe_threshold: float = 0.9, seed: int = 0, k: int | None = None, min_words: int = 2,
            stopwords: Iterable[str] = STOPWORDS) -> CandidateSet:
    """Propose up to ``n`` diverse, scrubbed questions from ``entries`` for a person to label.

    1. Scrub every entry (:class:`Scrubber`); drop those with fewer than ``min_words`` words left
       that are neither placeholders nor ``stopwords`` ("alo shop oi", "<PHONE>").
    2. Merge exact duplicates (same folded words, placeholders ignored), then near duplicates
       (cosine >= ``dedupe_threshold``); the first occurrence is kept, as written. What is
       embedded is the question's folded words without placeholders and without ``stopwords``
       (:data:`STOPWORDS`: particles and question words every intent shares, which would
       otherwise decide the clusters), so "Đổi trả trong mấy ngày vậy shop?" and
       "doi tra trong may ngay" are near duplicates.
    3. Drop questions equal or near (same threshold) to one of ``existing_questions``.
    4. Cluster what is left by intent: spherical k-means on the embeddings, ``k`` defaulting to
       round(sqrt(questions / 2)) within 1..30, seeded by ``seed``.
    5. Sample round-robin over the clusters (most asked first): in each cluster first the question
       that best stands for it (times asked × similarity to the cluster), then each time the one
       least similar to those already picked.

    ``embedder`` defaults to a new :class:`rageval.pipeline.embedding.LocalEmbedder`; it is fitted on the
    questions (and ``existing_questions``) with ``fit``, as the Embedder protocol expects.
    Candidates come grouped by cluster, numbered cand-001, cand-002, …
    """
    _check_params(n, dedupe_threshold, min_words, k)
    if embedder is None:
        from rageval.pipeline.embedding import LocalEmbedder
        embedder = LocalEmbedder()
    scrubber = _scrubber((names,) if isinstance(names, str) else tuple(names),
                         (order_patterns,) if isinstance(order_patterns, str) else tuple(order_patterns))
    entries = list(entries)
    # 1-2a: scrub, drop near-empty, merge exact duplicates
    groups: list[_Group] = []
    by_key: dict[str, _Group] = {}
    dropped_empty = 0
    stop = frozenset(fold(w) for w in stopwords)
    for entry in entries:
        result = scrubber.scrub(entry.text)
        key = _key(result.text)
        if len([w for w in key.split() if w not in stop]) < min_words:
            dropped_empty += 1
            continue
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = _Group(result.text, result.kinds, key, [], [])
            groups.append(group)
        elif result.text != group.text and result.text not in group.variants:
            group.variants.append(result.text)
        group.lines.append(entry.line)
    if len(groups) > MAX_UNIQUE:
        raise DatasetError(f"the logs hold {len(groups)} distinct questions, more than {MAX_UNIQUE}. "
                           "Propose from a random sample of the logs instead.")
    existing = [q for q in existing_questions if isinstance(q, str) and q.strip()]
    existing_keys = {_key(q) for q in existing}
    name = str(getattr(embedder, "name", type(embedder).__name__))
    if not groups:
        return CandidateSet((), (), len(entries), 0, 0, dropped_empty, 0, name, seed)
    texts = [" ".join(_content_words(g.text, stop)) for g in groups]
    existing_texts = [" ".join(_content_words(q, stop)) for q in existing]
    embedder.fit(texts + existing_texts)
    vectors = np.asarray(embedder.embed_queries(texts), dtype=np.float64)
    # 2b: near duplicates
    parent = _near_duplicates(vectors, float(dedupe_threshold))
    for i, p in enumerate(parent):
        if p != i:
            rep, dup = groups[p], groups[i]
            rep.lines.extend(dup.lines)
            for v in [dup.text, *dup.variants]:
                if v != rep.text and v not in rep.variants:
                    rep.variants.append(v)
    keep = [i for i, p in enumerate(parent) if p == i]
    # 3: already in the golden set
    if existing:
        ex_vectors = np.asarray(embedder.embed_queries(existing_texts), dtype=np.float64)
        near = (vectors[keep] @ ex_vectors.T).max(axis=1) >= dedupe_threshold
        fresh = [i for i, is_near in zip(keep, near) if not is_near and groups[i].key not in existing_keys]
    else:
        fresh = keep
    dropped_existing = len(keep) - len(fresh)
    merged = len(entries) - dropped_empty - len(keep)
    if not fresh:
        return CandidateSet((), (), len(entries), 0, merged, dropped_empty, dropped_existing, name, seed)
    # 4: clusters
    x = vectors[fresh]
    m = len(fresh)
    k_used = min(k, m) if k is not None else _default_k(m)
    raw = _kmeans(x, k_used, np.random.default_rng(seed))
    occurrences = [len(groups[i].lines) for i in fresh]
    first_line = [min(groups[i].lines) for i in fresh]
    members: dict[int, list[int]] = {}
    for j, label in enumerate(raw):
        members.setdefault(int(label), []).append(j)
    order = sorted(members, key=lambda c: (-sum(occurrences[j] for j in members[c]), min(first_line[j] for j in members[c])))
    clustered = [members[c] for c in order]
    words = [texts[i].split() for i in fresh]
    labels = _labels(words, clustered)
    clusters = tuple(Cluster(cid + 1, labels[cid], len(group), sum(occurrences[j] for j in group))
                     for cid, group in enumerate(clustered))
    # 5: diverse sample (a cluster never gives more than n, so rank only that many)
    ranked = [_diverse_order(x[group], [occurrences[j] for j in group], [first_line[j] for j in group], n)
              for group in clustered]
    ranked = [[group[r] for r in order] for group, order in zip(clustered, ranked)]
    chosen: list[set[int]] = [set() for _ in ranked]
    taken = 0
    for depth in range(max(len(r) for r in ranked)):
        for cid, r in enumerate(ranked):
            if taken < n and depth < len(r):
                chosen[cid].add(r[depth])
                taken += 1
    candidates = []
    for cid, r in enumerate(ranked):
        for j in r:
            if j in chosen[cid]:
                g = groups[fresh[j]]
                candidates.append(Candidate(
                    id=f"cand-{len(candidates) + 1:03d}", question=g.text, cluster=cid + 1,
                    cluster_label=clusters[cid].label, duplicates=len(g.lines) - 1,
                    lines=tuple(sorted(g.lines)), scrubbed=g.kinds, variants=tuple(g.variants[:5])))
    return CandidateSet(tuple(candidates), clusters, len(entries), m, merged, dropped_empty, dropped_existing,
                        name, seed)


# --- rendering ---------------------------------------------------------------------------------

_HEADER = """\
# Golden-set candidates proposed from {source} ({entries} log entries; {unique} distinct questions
# after merging {merged} duplicates; {dropped_existing} already in the golden set; {dropped_empty} too short).
# Embedder {embedder}, seed {seed}.
#
# How to label:
#   1. Read each question. Delete the cases that are not real questions about the documents.
#   2. Fill `expected_sections` with the section ids that answer it (e.g. [DT-1]) and write
#      `expected_answer` with every number and unit copied from that section; or set
#      `out_of_scope: true` when the documents do not answer it.
#   3. Keep the question exactly as the customer wrote it (typos, missing diacritics). Personal
#      data is replaced by <PHONE>, <EMAIL>, <ORDER>, <NAME>, <NUMBER>; check nothing personal
#      is left before committing.
#   4. Give each case a permanent id, tag it (e.g. [pr] or [holdout]) and move it into the golden set.
#
# Intent clusters (questions / log entries):
{clusters}
"""


def _q(value: str) -> str:
    """A YAML double-quoted scalar on one line, unicode kept."""
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1 << 30).rstrip("\n")


def _comment(text: str) -> str:
    return " ".join(text.split())


def _lines_text(lines: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, lines[:limit]))
    return shown + (f", … (+{len(lines) - limit})" if len(lines) > limit else "")


def render_candidates_yaml(cs: CandidateSet, *, source: str | Path) -> str:
    """The YAML file a person labels: a header comment on how to label, then one golden-set case
    per candidate (``id``, ``question``, empty ``expected_sections`` / ``expected_answer``,
    ``source: logs-<file name>``, ``tags: [candidate]``), with the cluster, duplicates and source
    lines as comments, since the golden set rejects unknown keys."""
    source_name = Path(str(source)).name
    stem = Path(source_name).stem or "logs"
    cluster_lines = "\n".join(f"#   {c.id:>2}. {_comment(c.label) or '-'}: {c.questions} / {c.occurrences}"
                              for c in cs.clusters) or "#   (none)"
    out = [_HEADER.format(source=_comment(source_name), entries=cs.entries, unique=cs.unique, merged=cs.merged,
                          dropped_existing=cs.dropped_existing, dropped_empty=cs.dropped_empty,
                          embedder=_comment(cs.embedder), seed=cs.seed, clusters=cluster_lines)]
    out.append(f"dataset: {_q(stem + '-candidates')}\n")
    out.append("version: 1\n")
    if not cs.candidates:
        out.append("# No new candidates: every question is already in the golden set or too short.\n")
        out.append("cases: []\n")
        return "".join(out)
    out.append("cases:\n")
    current = None
    for c in cs.candidates:
        if c.cluster != current:
            current = c.cluster
            out.append(f"\n  # --- cluster {c.cluster}: {_comment(c.cluster_label) or '-'} ---\n")
        asked = f"asked {c.duplicates + 1}×" if c.duplicates else "asked once"
        out.append(f"  # {asked}; log line{'s' if len(c.lines) > 1 else ''} {_lines_text(c.lines)}"
                   + (f"; scrubbed: {', '.join(c.scrubbed)}" if c.scrubbed else "") + "\n")
        for v in c.variants:
            out.append(f"  #   also written: {_comment(v)}\n")
        out.append(f"  - id: {c.id}\n")
        out.append(f"    question: {_q(c.question)}\n")
        out.append("    expected_sections: []\n")
        out.append('    expected_answer: ""\n')
        out.append(f"    source: {_q('logs-' + source_name)}\n")
        out.append("    tags: [candidate]\n")
    return "".join(out)

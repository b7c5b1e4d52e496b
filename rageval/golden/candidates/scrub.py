"""Personal data out of customer messages: phone numbers, emails, order codes, names, addresses,
dates of birth, IBANs, licence plates and other long digit runs become placeholders; everything
else (spelling, diacritics or their absence, prices, deadlines) is kept.

Scrubbing policy (:func:`scrub`), applied in this order (the rules that need no list — obfuscated
emails, IBANs, plates, dates of birth, addresses, names — are :mod:`.pii`'s, documented there):

1. ``<EMAIL>``: ``local@domain.tld`` in the usual ASCII forms; then ``an.nguyen [at] gmail [dot]
   com`` and the other obfuscated forms; ``<IBAN>``, ``<PLATE>``.
2. ``<ORDER>``: every regex of ``order_patterns`` (:data:`DEFAULT_ORDER_PATTERNS` by default:
   ``DH-2026-0012345``, ``ĐH2026001234``, ``dh 20260012345``, ``BH123456`` — ``DH``/``ĐH``/``BH``
   and at least five digits, any letter case; ``#123456``; carrier tracking codes ``GHN…``, ``GHTK…``, ``SPXVN…``,
   ``VTP…``, ``VNP…`` with at least six digits; ``#A-99881``). Section ids such as ``BH-3`` or
   ``DT-10`` have too few digits to match.
3. ``<PHONE>``: Vietnamese numbers with a leading 0 (10-digit mobiles, 11-digit ``02…``
   landlines, optionally ``(028) …``), or with ``84``/``+84``/``(+84)``/``0084`` instead of the
   0 (a ``(0)`` or ``0`` after the country code is allowed); international numbers that start
   with ``+``, ``(+cc)`` or ``00`` and a space (``+1`` and ten digits; others 8–15 digits).
   Digit groups may be separated by one space, dot or hyphen (``0912 345 678``,
   ``0912.345.678``, ``+84-912-345-678``); the local form needs a first group of at least three
   digits. A number is only replaced whole, and the digits after it are left alone
   (``0912 345 678 2 cái`` -> ``<PHONE> 2 cái``).
4. ``<DOB>`` (a date after a birth cue), ``<ADDRESS>``; then ``<NAME>``: every name of ``names``,
   matched as whole words, ignoring case and diacritics, with any whitespace between its words
   ("Nguyễn Văn An" also matches "nguyen  van an"), and the names :mod:`.pii` finds with no list
   (family name + given names, kinship and title cues, "tên là", "my name is").
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

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from rageval.errors import ConfigError
from rageval.golden.candidates import pii
from rageval.text import fold

#: Placeholder kinds, in the order they are reported.
KINDS = ("PHONE", "EMAIL", "ORDER", "NAME", "ADDRESS", "DOB", "IBAN", "PLATE", "NUMBER")

#: Order-code regexes used when none are configured (see the module docstring).
DEFAULT_ORDER_PATTERNS: tuple[str, ...] = (
    r"(?i)\b(?:DH|ĐH|BH)[-_ ]?\d(?:[-_]?\d){4,}\b",
    r"(?<![\w#])#\d{5,}\b",
    r"(?<![\w#])#[A-Za-z]{1,4}[-_]?\d{4,}\b",
    r"(?i)\b(?:GHN|GHTK|SPXVN|SPX|VTP|VNP)[-_ ]?[A-Z0-9]*\d{6,}[A-Z0-9]*\b",
)

MSG_BAD_PATTERN = "order pattern {pattern!r} is not a valid regular expression ({error}). Fix the pattern."
MSG_EMPTY_PATTERN = ("order pattern {pattern!r} matches the empty string, so it would match everywhere. "
                     "Make it require at least one character (e.g. use + instead of *).")
MSG_BAD_NAME = "names: entry #{index} ({value!r}) has no letters. Give full names such as 'Nguyễn Văn An'."

#: A placeholder as the scrubber writes it: ``<PHONE>``, ``<EMAIL>``, …
PLACEHOLDER = re.compile("<(?:" + "|".join(KINDS) + ")>")
WORD = re.compile(r"\w+")

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
            words = tuple(WORD.findall(fold(unicodedata.normalize("NFC", str(name)))))
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
        for kind, rule in (("EMAIL", pii.scrub_obfuscated_emails), ("IBAN", pii.scrub_ibans),
                           ("PLATE", pii.scrub_plates), ("PHONE", _replace_phones), ("DOB", pii.scrub_birth_dates),
                           ("ADDRESS", pii.scrub_addresses), ("NAME", self._replace_names), ("NAME", pii.scrub_names)):
            text, found = rule(text)
            if found:
                kinds.add(kind)
        text, found = _net(text)
        if found:
            kinds.add("NUMBER")
        return ScrubResult(text, tuple(k for k in KINDS if k in kinds))

    def _replace_names(self, text: str) -> tuple[str, bool]:
        if self._names is None:
            return text, False
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


def cached_scrubber(names: Sequence[str] | str = (),
                    order_patterns: Sequence[str] | str = DEFAULT_ORDER_PATTERNS) -> Scrubber:
    """The :class:`Scrubber` for these names and patterns (a single string counts as one), from a
    small cache, so the patterns are compiled once."""
    return _scrubber((names,) if isinstance(names, str) else tuple(names),
                     (order_patterns,) if isinstance(order_patterns, str) else tuple(order_patterns))


def scrub(text: str, *, names: Sequence[str] = (), order_patterns: Sequence[str] = DEFAULT_ORDER_PATTERNS) -> str:
    """``text`` with phone numbers, emails, order codes, the given names and other long digit runs
    replaced by ``<PHONE>``, ``<EMAIL>``, ``<ORDER>``, ``<NAME>``, ``<NUMBER>`` (policy in the module
    docstring). Everything else — spelling, diacritics or their absence, prices, deadlines — is kept.

    >>> scrub("sdt em 0912 345 678, đổi trả trong 7 ngày hả?")
    'sdt em <PHONE>, đổi trả trong 7 ngày hả?'
    """
    return cached_scrubber(names, order_patterns).scrub(text).text

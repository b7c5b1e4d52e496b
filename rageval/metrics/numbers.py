"""The number rule: deadlines, money and rates in an answer must be exactly right.

A *quantity* is a number followed by a unit ("7 ngày", "30.000 đồng", "5 business days", "15%"),
or a currency sign followed by a number ("$5"). The rule has two directions:

* every quantity of the expected answer must appear in the answer (``missing`` otherwise);
* every quantity of the answer must appear in the expected source sections
  (``outside_source`` otherwise) — this is what catches "30 ngày" copied from the wrong section.

Before comparing, every mention is reduced to a canonical :class:`Quantity`:

* units: one canonical name per unit, Vietnamese (see :data:`UNITS`); English spellings map to the
  same unit ("days" = "ngày"), weeks become days (1 tuần = 7 ngày), and the money multipliers
  k / nghìn / ngàn / triệu / tỷ (and English thousand / million / billion before a currency) are
  applied ("30k" = "30 nghìn đồng" = "30.000 đồng" = "30,000 VND" = "30000đ");
* "ngày làm việc" / "business days" is its own unit and is matched before "ngày": "5 ngày" is
  not "5 ngày làm việc";
* numbers: digits with thousands separators ("30.000", "30,000": a separator followed by exactly
  three digits groups thousands), a decimal comma or point otherwise ("1,5 triệu đồng" =
  1.500.000 đồng), and number words in Vietnamese ("bảy", "mười hai", "ba mươi", "hai mươi mốt",
  "mười lăm", "hai mươi tư", "năm trăm") and English ("seven", "twenty-one", "one hundred";
  "a"/"an" before a time unit: "a week" = 7 ngày);
* text typed without diacritics is read too ("7 ngay", "5 ngay lam viec", "30.000 dong",
  "bay ngay").

Ambiguities are resolved the way Vietnamese is written:

* "năm" is the number five before a unit ("năm ngày" = 5 ngày, "năm năm" = 5 năm) and the unit
  year after a number ("1 năm", "mười năm" — fifteen is spelled "mười lăm");
* dates are not durations: "ngày 28 tháng 9 năm 2026", "thứ 7 ngày 3/10", "thứ năm ngày 1"
  produce nothing;
* a number word written without diacritics counts only when its unit is written without them too
  ("bay ngay" = 7 ngày, but in "bay ngày" the writer uses diacritics, so "bay" is not "bảy"), and
  the bare "sau" is never six (it is far more often "after": "sau ngay nhan hang");
* a bare money multiplier means Vietnamese đồng ("phí 30 nghìn", "hoàn 1,5 triệu");
* ranges carry the unit to both ends: "3-5 ngày", "từ 3 đến 5 ngày", "7 hoặc 30 ngày".

Nothing here does I/O.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rageval.errors import did_you_mean
from rageval.metrics.number_words import TOKEN, Number, Reader, is_plain, parse_digits, piece_tokens
from rageval.metrics.number_words import tokens as _tokens
from rageval.metrics.units import (
    BUILT_IN_WORDS,
    CURRENCIES_BY_LENGTH,
    DATE_CONTEXT,
    LENGTHS,
    MULTIPLIERS,
    POWERS,
    RANGE_WORDS,
    TIME_UNITS,
    UNIT_ALIASES,
    UNITS,
    UNITS_BY_LENGTH,
    UNKNOWN_UNIT,
    WEEK_NAMES,
    WEEK_UNIT,
    Quantity,
    Spelling,
    spellings,
)
from rageval.records import CheckResult
from rageval.text import fold, normalize

__all__ = ["UNITS", "UNIT_ALIASES", "Quantity", "Unit", "check_numbers", "extract_quantities", "resolve_units"]


# --- units configuration -----------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """A unit ``checks.units`` adds: its canonical ``name`` and the ``words`` it is written with (in
    every language the documents use: ``{name: lần, words: [lần, lan, times]}``)."""

    name: str
    words: tuple[str, ...]


def resolve_units(units: Sequence[str | Unit | dict[str, Any]] | None) -> frozenset[str]:
    """The canonical units to check. ``None`` means all of :data:`UNITS`.

    Accepted in ``checks.units``: the canonical names of :data:`UNITS`, their spellings without
    diacritics ("ngay lam viec", "dong"), and the English aliases of :data:`UNIT_ALIASES`
    ("business days", "days", "times", "kilometers", …); case does not matter. Weeks are days, so
    "tuần" is rejected with a hint. Anything else raises ``ValueError`` listing the valid names.
    An entry ``{name: …, words: […]}`` (a :class:`Unit`) adds a unit of its own; when the list
    names no built-in unit, every built-in one is checked besides the added ones.

    Restricting units only filters what is reported: "5 ngày làm việc" is still read as business
    days (and dropped if those are not listed), never as "5 ngày".
    """
    return _spec(units)[0]


def _spec(units: Sequence[str | Unit | dict[str, Any]] | None) -> tuple[frozenset[str], tuple[Spelling, ...]]:
    """(the units to report, the spellings of added units) of a ``checks.units`` value."""
    if units is None:
        return _ALL_UNITS, ()
    if isinstance(units, str) or not isinstance(units, Iterable):
        raise ValueError(f"checks.units must be a list of unit names, got {units!r}")
    names: list[str] = []
    added: list[Unit] = []
    for item in units:
        if isinstance(item, dict):
            item = Unit(item.get("name"), tuple(item.get("words") or ()))  # type: ignore[arg-type]
        if isinstance(item, Unit):
            added.append(item)
        elif isinstance(item, str):
            names.append(item)
        else:
            raise ValueError(f"checks.units entries must be strings (unit names) or {{name, words}}, got {item!r}")
    return _resolve_names(tuple(names), tuple(added))


_ALL_UNITS = frozenset(UNITS)


@functools.lru_cache(maxsize=64)
def _resolve_names(units: tuple[str, ...],
                   added: tuple[Unit, ...] = ()) -> tuple[frozenset[str], tuple[Spelling, ...]]:
    """:func:`_spec` of names and added units, memoised: the number rule asks for every case."""
    lookup: dict[str, str] = {}
    for name in UNITS:
        lookup[normalize(name)] = name
        lookup[fold(name)] = name
    lookup.update(UNIT_ALIASES)
    chosen: set[str] = set()
    for name in units:
        key = normalize(name)
        if key in WEEK_NAMES or fold(key) in WEEK_NAMES:
            raise ValueError(WEEK_UNIT.format(name=name))
        canonical = lookup.get(key) or lookup.get(fold(key))
        if canonical is None:
            raise ValueError(UNKNOWN_UNIT.format(
                name=name, hint=did_you_mean(key, list(UNITS) + list(UNIT_ALIASES)),
                valid=", ".join(UNITS), aliases=", ".join(UNIT_ALIASES)))
        chosen.add(canonical)
    spellings = _added_spellings(added, lookup)
    if not chosen and not added:
        raise ValueError("checks.units is empty, so the number rule would check nothing; "
                         "leave the key out to use all built-in units")
    if not chosen:
        chosen = set(UNITS)
    return frozenset(chosen | {u.name for u in added}), spellings


def _added_spellings(added: tuple[Unit, ...], lookup: dict[str, str]) -> tuple[Spelling, ...]:
    """The spellings of units ``checks.units`` adds; ValueError for one that is no new unit."""
    taken = set(BUILT_IN_WORDS)
    pairs = []
    for unit in added:
        if not isinstance(unit.name, str) or not unit.name.strip():
            raise ValueError(f"checks.units: an added unit needs a name, got {unit.name!r}")
        if normalize(unit.name) in lookup or fold(unit.name) in lookup:
            raise ValueError(f"checks.units: {unit.name!r} is a built-in unit; list it by name instead of defining it")
        words = [w for w in unit.words if isinstance(w, str) and _tokens(w)]
        if not words or len(words) != len(unit.words):
            raise ValueError(f"checks.units: unit {unit.name!r} needs `words`, a list of the ways it is written "
                             f"(e.g. words: [{unit.name}, …] in each language)")
        for word in words:
            if tuple(_tokens(word)) in taken:
                raise ValueError(f"checks.units: the word {word!r} of unit {unit.name!r} already spells a unit")
            taken.add(tuple(_tokens(word)))
            pairs.append((word, unit.name, 1))
    return spellings(pairs)


# --- reading quantities: a number (number_words), then its unit --------------------------------

def _spelling_at(reader: Reader, j: int, table: tuple[Spelling, ...]) -> Spelling | None:
    """The first (so longest) spelling of ``table`` that the tokens at ``j`` spell."""
    first = reader.tok(j)
    for sp in table:
        if sp.words[0] == first and tuple(reader.toks[j:j + len(sp.words)]) == sp.words:
            return sp
    return None


@dataclass(frozen=True)
class _Match:
    unit: str
    factor: Decimal
    end: int
    start: int = 0          # the unit's first token

def _unit_after(reader: Reader, number: Number, table: tuple[Spelling, ...]) -> _Match | None:
    """The unit right after a number (an optional hyphen between: "7-day"), longest spelling first."""
    starts = [number.end]
    if reader.tok(number.end) == "-":
        starts.append(number.end + 1)
    for j in starts:
        found = _plain_unit(reader, j, number, table) or _money_unit(reader, j, number)
        if found:
            return found
    return None


def _plain_unit(reader: Reader, j: int, number: Number, table: tuple[Spelling, ...]) -> _Match | None:
    sp = _spelling_at(reader, j, table)
    if sp is None or (number.plain and not sp.plain) or (sp.unit in LENGTHS and reader.tok(j + len(sp.words))
                                                          in POWERS):
        return None                      # "5 m²", "2 km³": an area or a volume, not a length
    english = all(w.isascii() and len(w) > 1 for w in sp.words)
    if number.article and not (sp.unit in TIME_UNITS and english):
        return None
    return _Match(sp.unit, Decimal(sp.factor), j + len(sp.words), j)


def _money_unit(reader: Reader, j: int, number: Number) -> _Match | None:
    if number.article:
        return None
    factor, bare, k = 1, False, j
    multiplier = reader.tok(j)
    if multiplier in MULTIPLIERS and not (number.plain and not is_plain(multiplier)):
        factor, bare = MULTIPLIERS[multiplier]
        k = j + 1
    currency = _spelling_at(reader, k, CURRENCIES_BY_LENGTH)
    if currency and not (number.plain and not currency.plain):
        return _Match(currency.unit, Decimal(factor), k + len(currency.words), j)
    if k > j and bare:
        return _Match("đồng", Decimal(factor), k, j)
    return None


class _Text:
    """A text as the scanner reads it: its tokens (:func:`number_words.tokens`, cut piece by piece)
    and, for a mention, its tokens as the text wrote them (case kept where folding keeps lengths)."""

    def __init__(self, text: str) -> None:
        self.written = unicodedata.normalize("NFC", text)
        self.folded = self.written.casefold()
        self.pieces = self.folded.split()
        self.each = piece_tokens(self.pieces)          # the tokens of each whitespace-separated piece
        self.toks = list(itertools.chain.from_iterable(self.each))
        self._firsts: list[int] = []                   # piece -> its first token, once a mention is cut
        self._shown: list[str] = []

    def cut(self, first: int, end: int) -> str:
        """Tokens ``first`` .. ``end - 1`` as written, whitespace between pieces as one space. Casefolding
        maps each character to one or more, never to or from whitespace: when the lengths agree the
        written pieces line up with the folded ones character by character."""
        if not self._firsts:
            self._firsts = list(itertools.accumulate(map(len, self.each), initial=0))
            same = len(self.folded) == len(self.written)
            self._shown = self.written.split() if same else self.pieces
        (k, a), (m, b) = self._at(first), self._at(end - 1)
        start, stop = self._span(k, a)[0], self._span(m, b)[1]
        shown = self._shown
        if k == m:
            return shown[k][start:stop]
        return " ".join([shown[k][start:], *shown[k + 1:m], shown[m][:stop]])

    def _at(self, token: int) -> tuple[int, int]:
        """(piece, index among the piece's tokens) of a token."""
        k = bisect.bisect_right(self._firsts, token) - 1
        return k, token - self._firsts[k]

    def _span(self, piece: int, index: int) -> tuple[int, int]:
        return next(itertools.islice(TOKEN.finditer(self.pieces[piece]), index, None)).span()


def _scan(text: str, added: tuple[Spelling, ...] = (), mentions: bool = True) -> list[Quantity]:
    """The quantities of ``text`` in order; ``mentions=False`` leaves each one's mention as written
    out (its ``shown`` is then its canonical form): cutting them is a fifth of the work."""
    table = tuple(sorted(added + UNITS_BY_LENGTH, key=lambda sp: -len(sp.words))) if added else UNITS_BY_LENGTH
    read = _Text(text)
    reader = Reader(read.toks)
    if not reader.starts:
        return []
    toks, cut = reader.toks, read.cut if mentions else _unwritten

    found: list[Quantity] = []
    pending: list[tuple[Decimal, int, int]] = []   # "3" in "3-5 ngày": waits for the unit of the range
    start = 0                            # first token of the mention (of the range, if any)
    i = reader.after(0)
    while i < len(toks):
        if toks[i] == "$" and i + 1 < len(toks) and toks[i + 1][0].isdecimal():
            value = parse_digits(toks[i + 1])
            if value is not None:
                end, factor = i + 2, 1
                if reader.tok(end) in MULTIPLIERS:
                    factor, end = MULTIPLIERS[toks[end]][0], end + 1
                found.append(Quantity(value * factor, "USD", cut(i, end)))
                pending, i = [], end
                continue
        number = reader.number(i)
        if number is None:
            pending, i = [], reader.after(i + 1)
            continue
        match = _unit_after(reader, number, table)
        if match is None:
            if (reader.tok(number.end) in RANGE_WORDS and reader.tok(number.end + 1) is not None
                    and reader.number(number.end + 1) is not None):
                if not pending:
                    start = i
                pending.append((number.value, i, number.end))
                i = number.end + 1
            else:
                pending, i = [], reader.after(i + 1)
            continue
        previous = reader.tok((start if pending else i) - 1)
        if not (previous in DATE_CONTEXT and match.unit in DATE_CONTEXT[previous]):
            unit = cut(match.start, match.end)
            found.extend(Quantity(v * match.factor, match.unit, f"{cut(a, b)} {unit}" if unit else "")
                         for v, a, b in pending)
            found.append(Quantity(number.value * match.factor, match.unit, cut(i, match.end)))
        pending, i = [], match.end
    return found


def _unwritten(first: int, end: int) -> str:
    """The mention of tokens ``first`` .. ``end - 1`` left out (``_scan(..., mentions=False)``)."""
    return ""


@functools.lru_cache(maxsize=65536)
def _stated(text: str, added: tuple[Spelling, ...] = ()) -> tuple[Quantity, ...]:
    """:func:`_scan` of a text of the golden set (an expected answer, a must-include phrase),
    memoised: each is read once per process, and the run's golden-set snapshot reads the same texts
    as the cases' number rule. Kept apart from the answers' cache, so that a run's many one-off
    answers do not push them out before the snapshots (at 20,000 cases over 10,000 chunks they did:
    building the RunResult took 7.6 s of CPU, 4.2 s with the caches apart). At most 65,536 texts,
    about 0.5 KB each."""
    return tuple(_scan(text, added))


@functools.lru_cache(maxsize=65536)
def _sourced(text: str, added: tuple[Spelling, ...] = ()) -> tuple[Quantity, ...]:
    """:func:`_scan` of a source section without the mentions (what it states is only compared, never
    shown: the number rule's ``outside_source`` lists the answer's mentions), memoised as :func:`_stated`."""
    return tuple(_scan(text, added, mentions=False))


@functools.lru_cache(maxsize=2048)
def _answered(text: str, added: tuple[Spelling, ...] = ()) -> tuple[Quantity, ...]:
    """:func:`_scan` of an app's answer, memoised (a re-run near a threshold, or an app that gives
    one answer to many questions, reads it again)."""
    return tuple(_scan(text, added))


def extract_quantities(text: str, units: Sequence[str | Unit] | None = None, *,
                       mentions: bool = True) -> list[Quantity]:
    """Every number+unit mention of ``text``, canonicalised, in order of appearance (repeats
    kept). ``units`` limits the result to those units and adds the units it defines (see
    :func:`resolve_units`; an unknown name raises ``ValueError``). ``mentions=False``: for a source
    section, whose quantities are compared, not shown — each ``shown`` is then its canonical form,
    read faster and memoised with the number rule's reading of the sources."""
    allowed, added = _spec(units)
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    return [q for q in (_stated if mentions else _sourced)(text, added) if q.unit in allowed]


def _listing(quantities: Iterable[Quantity]) -> list[str]:
    """Each distinct quantity once, shown as its first mention wrote it, by unit then value."""
    first: dict[Quantity, Quantity] = {}
    for q in quantities:
        first.setdefault(q, q)
    return [q.shown for q in sorted(first.values(), key=Quantity.sort_key)]


def check_numbers(answer: str | None, expected_answer: str, source_text: str | Sequence[str],
                  units: Sequence[str | Unit] | None = None) -> CheckResult:
    """The number rule, both directions.

    Skipped when there is no answer (a retrieval-only case) or when neither the expected answer
    nor the answer mentions a quantity. Otherwise passes iff ``missing`` (quantities of the
    expected answer absent from the answer) and ``outside_source`` (quantities of the answer
    absent from ``source_text``, the text of the expected sections) are both empty. ``source_text``
    may be the sections' texts one by one: each is then read on its own (a mention never runs from
    one section into the next), and each section is read once per process however many cases cite
    it, in whatever combination.

    Details ``expected``, ``found``, ``missing``, ``outside_source`` list each quantity once, as
    its first mention wrote it ("30 days", "$7.95", "7 ngày"; compared by value and unit, so "30
    days" and "30 ngày" are one quantity), sorted by unit (in :data:`UNITS` order) then value.
    ``score`` = share of quantities that are right: (expected found + found in source) /
    (expected + found).
    """
    allowed, added = _spec(units)
    if answer is None:
        return CheckResult.skipped("no answer: retrieval-only case")
    expected = [q for q in _stated(expected_answer or "", added) if q.unit in allowed]
    found = [q for q in _answered(answer, added) if q.unit in allowed]
    if not expected and not found:
        return CheckResult.skipped("no numbers")
    # the source is read only when the answer states a quantity (nothing else is looked up in it)
    in_source: set[Quantity] = set()
    if found:
        texts = [source_text or ""] if isinstance(source_text, str) else source_text
        in_source = {q for text in texts for q in _sourced(text, added) if q.unit in allowed}
    answered = set(found)
    missing = [q for q in expected if q not in answered]
    outside = [q for q in found if q not in in_source]
    details = {"expected": _listing(expected), "found": _listing(found),
               "missing": _listing(missing), "outside_source": _listing(outside)}
    total = len(set(expected)) + len(set(found))
    score = (total - len(set(missing)) - len(set(outside))) / total
    if not missing and not outside:
        return CheckResult.ok("numbers match: " + ", ".join(_listing([*expected, *found])),
                              score=score, **details)
    parts = []
    if missing:
        parts.append("missing " + ", ".join(details["missing"]))
    if outside:
        parts.append("outside source " + ", ".join(details["outside_source"]))
    return CheckResult.fail("; ".join(parts), score=score, **details)

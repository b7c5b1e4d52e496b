"""Canonical units, the ways they are spelled, and the :class:`Quantity` record the number rule
(:mod:`rageval.metrics.numbers`) reduces every mention to. Tables and a value type; nothing here
reads text or does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from rageval.metrics.number_words import is_plain
from rageval.metrics.number_words import tokens as _tokens

# --- canonical units ---------------------------------------------------------------------------

#: Canonical unit names, in the order quantities are listed in reports. These (or the aliases in
#: :data:`UNIT_ALIASES`) are what a user may put in ``checks.units``.
UNITS: tuple[str, ...] = ("ngày làm việc", "ngày", "tháng", "năm", "giờ", "phút", "%", "đồng", "USD",
                          "lần", "km", "m", "kg", "GB", "MB")

TIME_UNITS = frozenset({"ngày làm việc", "ngày", "tháng", "năm", "giờ", "phút"})

#: Other names accepted in ``checks.units`` (compared after casefolding; the diacritic-less
#: spelling of a canonical name is accepted too, e.g. "ngay lam viec", "dong").
UNIT_ALIASES: dict[str, str] = {
    "business days": "ngày làm việc", "working days": "ngày làm việc",
    "days": "ngày", "months": "tháng", "years": "năm", "hours": "giờ", "minutes": "phút",
    "percent": "%", "phần trăm": "%", "vnd": "đồng", "usd": "USD",
    "times": "lần", "kilometers": "km", "kilometres": "km", "mét": "m", "meters": "m", "metres": "m",
    "kilograms": "kg", "gigabytes": "GB", "megabytes": "MB",
}

WEEK_NAMES = frozenset({"tuần", "tuan", "week", "weeks"})

UNKNOWN_UNIT = ("unknown unit {name!r} in checks.units{hint}; valid unit names are: {valid} "
                "(English aliases: {aliases})")
WEEK_UNIT = ("{name!r} in checks.units is not a unit of its own: weeks are counted as days "
             "(1 tuần = 7 ngày); list 'ngày' instead")

# Surface spellings, tokenised like the text: (spelling, canonical unit, factor).
# Longer spellings are tried first, so "ngày làm việc" wins over "ngày".
UNIT_SPELLINGS: tuple[tuple[str, str, int], ...] = (
    ("ngày làm việc", "ngày làm việc", 1), ("ngay lam viec", "ngày làm việc", 1),
    ("business day", "ngày làm việc", 1), ("business days", "ngày làm việc", 1),
    ("working day", "ngày làm việc", 1), ("working days", "ngày làm việc", 1),
    ("ngày", "ngày", 1), ("ngay", "ngày", 1), ("day", "ngày", 1), ("days", "ngày", 1),
    ("calendar day", "ngày", 1), ("calendar days", "ngày", 1),
    ("tuần", "ngày", 7), ("tuan", "ngày", 7), ("week", "ngày", 7), ("weeks", "ngày", 7),
    ("tháng", "tháng", 1), ("thang", "tháng", 1), ("month", "tháng", 1), ("months", "tháng", 1),
    ("năm", "năm", 1), ("nam", "năm", 1), ("year", "năm", 1), ("years", "năm", 1),
    ("giờ", "giờ", 1), ("gio", "giờ", 1), ("tiếng", "giờ", 1), ("h", "giờ", 1),
    ("hour", "giờ", 1), ("hours", "giờ", 1),
    ("phút", "phút", 1), ("phut", "phút", 1), ("minute", "phút", 1), ("minutes", "phút", 1),
    ("%", "%", 1), ("phần trăm", "%", 1), ("phan tram", "%", 1), ("percent", "%", 1),
    ("per cent", "%", 1),
    ("lần", "lần", 1), ("lan", "lần", 1), ("time", "lần", 1), ("times", "lần", 1),
    ("km", "km", 1), ("cây số", "km", 1), ("cay so", "km", 1), ("ki-lô-mét", "km", 1), ("kilômét", "km", 1),
    ("kilomet", "km", 1), ("kilometer", "km", 1), ("kilometers", "km", 1), ("kilometre", "km", 1),
    ("kilometres", "km", 1),
    ("m", "m", 1), ("mét", "m", 1), ("met", "m", 1), ("meter", "m", 1), ("meters", "m", 1), ("metre", "m", 1),
    ("metres", "m", 1),
    ("kg", "kg", 1), ("ký", "kg", 1), ("ki-lô-gam", "kg", 1), ("kilôgam", "kg", 1), ("kilogam", "kg", 1),
    ("kilogram", "kg", 1), ("kilograms", "kg", 1), ("kilo", "kg", 1), ("kilos", "kg", 1),
    ("gb", "GB", 1), ("gigabyte", "GB", 1), ("gigabytes", "GB", 1),
    ("mb", "MB", 1), ("megabyte", "MB", 1), ("megabytes", "MB", 1),
)
CURRENCY_SPELLINGS: tuple[tuple[str, str], ...] = (
    ("đồng", "đồng"), ("dong", "đồng"), ("vnd", "đồng"), ("vnđ", "đồng"), ("đ", "đồng"),
    ("₫", "đồng"),
    ("usd", "USD"), ("$", "USD"), ("đô la", "USD"), ("đô", "USD"), ("do la", "USD"),
    ("dollar", "USD"), ("dollars", "USD"),
)
# multiplier -> (factor, usable without a currency: then it means đồng)
MULTIPLIERS: dict[str, tuple[int, bool]] = {
    "k": (1_000, True), "nghìn": (1_000, True), "ngàn": (1_000, True), "nghin": (1_000, True),
    "ngan": (1_000, True), "triệu": (1_000_000, True), "trieu": (1_000_000, True),
    "tỷ": (1_000_000_000, True), "tỉ": (1_000_000_000, True), "ty": (1_000_000_000, True),
    "thousand": (1_000, False), "million": (1_000_000, False), "billion": (1_000_000_000, False),
}
RANGE_WORDS = frozenset({"-", "–", "—", "đến", "den", "tới", "toi", "to", "or", "hoặc", "hoac", "hay"})
# A number right after these is part of a date, not a duration, when followed by that unit.
DATE_CONTEXT: dict[str, frozenset[str]] = {
    "ngày": frozenset({"tháng"}), "mùng": frozenset({"tháng"}), "mồng": frozenset({"tháng"}),
    "mung": frozenset({"tháng"}), "tháng": frozenset({"năm"}), "thang": frozenset({"năm"}),
    "thứ": frozenset({"ngày"}), "thu": frozenset({"ngày"}),
}
@dataclass(frozen=True)
class Spelling:
    words: tuple[str, ...]
    unit: str
    factor: int
    plain: bool


def spellings(pairs: Iterable[tuple[str, str, int]]) -> tuple[Spelling, ...]:
    out = [Spelling(tuple(_tokens(s)), unit, factor, is_plain(s)) for s, unit, factor in pairs]
    return tuple(sorted(out, key=lambda sp: -len(sp.words)))


UNITS_BY_LENGTH = spellings(UNIT_SPELLINGS)
CURRENCIES_BY_LENGTH = spellings((s, u, 1) for s, u in CURRENCY_SPELLINGS)
POWERS, LENGTHS = frozenset({"\u00b2", "\u00b3"}), frozenset({"m", "km"})
BUILT_IN_WORDS = frozenset(sp.words for sp in UNITS_BY_LENGTH + CURRENCIES_BY_LENGTH)


# --- the record --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Quantity:
    """A number in a canonical unit. ``value`` is an ``int`` when whole, else a normalised
    ``Decimal``; ``unit`` is one of :data:`UNITS`. Two quantities are equal when value and unit are:
    "30 days" = "30 ngày". ``str()`` gives the canonical (Vietnamese) form: "7 ngày", "5 ngày làm
    việc", "30.000 đồng", "15%", "1,5 giờ"; ``shown`` the mention as the text wrote it ("30 days",
    "$7.95", "within a week" → "a week"), which reports use."""

    value: int | Decimal
    unit: str
    text: str = field(default="", compare=False)      # the mention as written; not part of equality

    def __post_init__(self) -> None:
        if self.unit not in UNITS and not (isinstance(self.unit, str) and self.unit.strip()
                                           and tuple(_tokens(self.unit)) not in BUILT_IN_WORDS):
            raise ValueError(f"unknown unit {self.unit!r}; expected one of {', '.join(UNITS)} or a unit "
                             f"checks.units adds")
        value = self.value
        if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
            raise TypeError(f"quantity value must be an int or Decimal, got {type(value).__name__}")
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"quantity value must be finite, got {value}")
            value = int(value) if value == value.to_integral_value() else value.normalize()
        object.__setattr__(self, "value", value)

    def __str__(self) -> str:
        number = format_number(self.value, group=self.unit == "đồng")
        return f"{number}%" if self.unit == "%" else f"{number} {self.unit}"

    def sort_key(self) -> tuple[int, str, Decimal]:
        """Built-in units in :data:`UNITS` order, then units of ``checks.units`` by name; then value."""
        known = self.unit in UNITS
        return UNITS.index(self.unit) if known else len(UNITS), "" if known else self.unit, Decimal(self.value)

    @property
    def shown(self) -> str:
        return self.text or str(self)


def _group(digits: str) -> str:
    head = len(digits) % 3 or 3
    return ".".join([digits[:head]] + [digits[i:i + 3] for i in range(head, len(digits), 3)])


def format_number(value: int | Decimal, *, group: bool) -> str:
    """Vietnamese style: '.' groups thousands (đồng only), ',' is the decimal mark. A fraction of
    exactly three digits gets a trailing zero ("1,2340") so it cannot be read back as thousands."""
    sign = "-" if value < 0 else ""
    text = str(abs(value)) if isinstance(value, int) else format(abs(value), "f")
    whole, _, frac = text.partition(".")
    if group:
        whole = _group(whole)
    if frac and len(frac) == 3:
        frac += "0"
    return sign + whole + ("," + frac if frac else "")

"""The per-case records a RunResult is made of: :class:`CheckResult` (one check of one case),
:class:`Retrieved` (one retrieved chunk) and :class:`CaseResult`, each with ``to_dict`` and a
strict ``from_dict`` (``rageval.results`` holds the run-level records); and :class:`Record`, the
base of records whose JSON form simply follows their fields' types (the gate's verdict tables).
"""

from __future__ import annotations

import functools
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

from rageval.files import Reader


class Record:
    """Base of a frozen dataclass whose JSON form follows its fields' types, so serialisation is
    written once: ``to_dict`` writes every field (tuples as lists, nested records as their dicts,
    None-valued fields listed in ``OMIT_NONE`` left out); ``from_dict(data, key, reader)`` reads it
    back strictly — unknown keys, wrong types and non-finite numbers are errors naming the dotted
    key; a field with a default may be absent (a file written before the field existed); mappings
    come back read-only. Field types understood: str, int, float, bool, ``X | None``, ``int | str``,
    ``tuple[X, ...]``, ``Mapping[str, X]``, nested records (anything with ``from_dict(data, key,
    reader)``) and ``Any`` (any JSON value). ``field(metadata={"choices": (…)})`` limits a string.
    Floats are written rounded to ``DECIMALS`` (see :func:`plain`); the record itself keeps them
    as given, so what was decided on them is not changed by writing them."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        """Immutable all the way down: a dict given to the constructor is kept read-only, a list as a tuple."""
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, dict):
                object.__setattr__(self, f.name, MappingProxyType(value))
            elif isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
                if not (f.name in self.OMIT_NONE and getattr(self, f.name) is None)}

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Any:
        data = r.obj(data, key)
        known = fields(cls)  # type: ignore[arg-type]
        r.keys(data, [f.name for f in known], key)
        hints = _hints(cls)
        values = {}
        for f in known:
            if f.name in data:
                values[f.name] = _read(hints[f.name], data[f.name], f"{key}.{f.name}" if key else f.name, r, f.metadata)
            elif f.default is MISSING and f.default_factory is MISSING:
                raise r.fail(f"{key}.{f.name}" if key else f.name, "missing")
        return cls(**values)


#: decimals of every float a record writes — as the RunResult's summaries are rounded (``aggregate``):
#: a Δ of two such values is −0.083334, not the binary −0.08333400000000002
DECIMALS = 6


def rounded(value: float) -> float:
    """``value`` to ``DECIMALS`` decimals, −0.0 written as 0.0."""
    return round(value, DECIMALS) + 0.0


def plain(value: Any) -> Any:
    """A record, tuple or mapping as plain JSON values, floats ``rounded``."""
    if isinstance(value, float):
        return rounded(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _read(tp: Any, value: Any, key: str, r: Reader, meta: Mapping[str, Any]) -> Any:  # noqa: PLR0911
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return r.json(value, key)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        if value is None and len(options) < len(args):
            return None
        optional = {float: lambda: r.num(value, key, optional=True), int: lambda: r.int_(value, key, optional=True,
                                                                                        minimum=None),
                    str: lambda: r.str_(value, key, optional=True)}
        if len(options) == 1 and len(options) < len(args) and options[0] in optional:
            read = optional[options[0]]()                     # "expected a finite number or null"
            return float(read) if options[0] is float else read
        if len(options) == 1:
            return _read(options[0], value, key, r, meta)
        kinds = {int: int, str: str, float: float}
        for option in options:
            if isinstance(value, kinds.get(option, ())) and not isinstance(value, bool):
                return value
        raise r.fail(key, f"expected one of {', '.join(getattr(o, '__name__', str(o)) for o in options)}, got {value!r}")
    if tp is str:
        text = r.str_(value, key)
        if "choices" in meta and text not in meta["choices"]:
            raise r.fail(key, f"expected one of {', '.join(meta['choices'])}, got {text!r}")
        return text
    if tp is bool:
        return r.bool_(value, key)
    if tp is int:
        return r.int_(value, key, minimum=None)
    if tp is float:
        return float(r.num(value, key))  # type: ignore[arg-type]
    if origin is tuple:
        return tuple(_read(args[0], v, f"{key}[{i}]", r, {}) for i, v in enumerate(r.lst(value, key)))
    if origin in (Mapping, dict, typing.Mapping):
        return MappingProxyType({str(k): _read(args[1], v, f"{key}.{k}", r, {}) for k, v in r.obj(value, key).items()})
    if hasattr(tp, "from_dict") and is_dataclass(tp):
        return tp.from_dict(value, key, r)
    raise TypeError(f"a Record field of type {tp!r} cannot be read")  # a bug in a record's declaration

PASS, FAIL, SKIPPED, ERROR = "pass", "fail", "skipped", "error"
STATUSES = (PASS, FAIL, SKIPPED, ERROR)
_PASSED = {PASS: True, FAIL: False}                         # a check's ``passed`` by its status
_CHECK_FIELDS = frozenset(("status", "passed", "score", "reason"))
HOLDOUT_TAG = "holdout"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of one check on one case.

    ``status`` is one of pass | fail | skipped | error; ``passed`` is True/False for pass/fail and
    None otherwise. ``details`` are check-specific keys (e.g. ``missing``, ``outside_source`` for
    the number rule) and are flattened into the JSON form beside ``passed``.
    """

    status: str
    score: float | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown check status {self.status!r}; expected one of {STATUSES}")

    @property
    def passed(self) -> bool | None:
        return _PASSED.get(self.status)

    def __reduce__(self) -> tuple[Any, ...]:     # pickled as a call of the class (rageval.pipeline.handoff)
        return (CheckResult, (self.status, self.score, self.reason, self.details))

    @classmethod
    def ok(cls, reason: str = "", score: float | None = 1.0, **details: Any) -> CheckResult:
        return cls(PASS, score, reason, details)

    @classmethod
    def fail(cls, reason: str, score: float | None = 0.0, **details: Any) -> CheckResult:
        return cls(FAIL, score, reason, details)

    @classmethod
    def skipped(cls, reason: str, **details: Any) -> CheckResult:
        return cls(SKIPPED, None, reason, details)

    @classmethod
    def error(cls, reason: str, **details: Any) -> CheckResult:
        return cls(ERROR, None, reason, details)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "passed": _PASSED.get(self.status), "score": self.score,
                               "reason": self.reason}
        details = self.details
        if details:
            if not _CHECK_FIELDS.isdisjoint(details):
                key = next(k for k in details if k in _CHECK_FIELDS)
                raise ValueError(f"check detail {key!r} collides with a record field")
            out.update(details)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "check", *,
                  reader: Reader | None = None) -> CheckResult:
        r = reader or Reader(where)
        fast = _fast_check(data)
        if fast is not None:
            return fast
        data = r.obj(data, where)
        status = r.req(data, "status", where)
        if status not in STATUSES:
            raise r.fail(f"{where}.status", f"expected one of {', '.join(STATUSES)}, got {status!r}")
        details = {k: r.json(v, f"{where}.{k}") for k, v in data.items()
                   if k not in ("status", "passed", "score", "reason")}
        return cls(status, r.num(data.get("score"), f"{where}.score", optional=True),
                   r.str_(data.get("reason", ""), f"{where}.reason") or "", details)


class Shared:
    """One object for each distinct value a run makes again and again: its cases' equal metric
    tables, check results, slices and usages (20,000 cases hold a few thousand distinct ones), so
    each is held once. Values are told apart by their items' ``repr``, what JSON writes of them: 1,
    1.0, True and 0.0, -0.0 stay apart. The records are frozen and nothing changes their mappings.
    Bounded: at ``limit`` distinct values it starts again; threads may share one."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit, self._known = limit, dict[tuple[Any, ...], Any]()

    def _one(self, key: tuple[Any, ...], value: Any) -> Any:
        known = self._known
        found = known.get(key)
        if found is None:
            if len(known) >= self._limit:
                known.clear()
            found = known[key] = value
        return found

    def mapping(self, values: dict[str, Any]) -> dict[str, Any]:
        return self._one(("mapping", *((k, repr(v)) for k, v in values.items())), values)

    def check(self, result: CheckResult) -> CheckResult:
        return self._one(("check", result.status, repr(result.score), result.reason,
                          *((k, repr(v)) for k, v in result.details.items())), result)


@dataclass(frozen=True, slots=True)
class Retrieved:
    """One retrieved chunk, best first in a case's list."""

    chunk_id: str
    sections: tuple[str, ...]
    text: str = ""
    score: float | None = None
    tokens: int | None = None

    def __reduce__(self) -> tuple[Any, ...]:     # pickled as a call of the class (rageval.pipeline.handoff)
        return (Retrieved, (self.chunk_id, self.sections, self.text, self.score, self.tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "sections": list(self.sections), "text": self.text,
                "score": self.score, "tokens": self.tokens}

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> Retrieved:
        data = r.obj(data, key)
        return cls(r.str_(r.req(data, "chunk_id", key), f"{key}.chunk_id"),  # type: ignore[arg-type]
                   r.strs(data.get("sections", []), f"{key}.sections"),
                   r.str_(data.get("text") or "", f"{key}.text"),  # type: ignore[arg-type]
                   r.num(data.get("score"), f"{key}.score", optional=True),
                   r.int_(data.get("tokens"), f"{key}.tokens", optional=True))


def rate_bounds(name: str) -> tuple[float, float | None]:
    """A case's own metrics are retrieval metrics: each lies in [0, 1]."""
    return (0.0, 1.0)


def slice_labels(slice_values: Mapping[str, Any]) -> list[str]:
    """``key=value`` labels of a case's slice, sorted; booleans read ``true``/``false`` (as in YAML).
    The one spelling used by by-slice aggregates, slice gates and reports."""
    def label(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    return [f"{k}={label(v)}" for k, v in sorted(slice_values.items())]


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One golden case as answered and scored: the case, the trace, the checks and the verdict."""

    id: str
    question: str
    expected_answer: str = ""
    expected_sections: tuple[str, ...] = ()
    slice: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    out_of_scope: bool = False
    answer: str | None = None
    retrieved: tuple[Retrieved, ...] | None = None
    context_tokens: int | None = None
    first_relevant_rank: int | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    checks: Mapping[str, CheckResult] = field(default_factory=dict)
    passed: bool | None = None
    failures: tuple[str, ...] = ()
    error: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)
    latency_ms: float | None = None

    @property
    def holdout(self) -> bool:
        return HOLDOUT_TAG in self.tags

    @property
    def slice_labels(self) -> list[str]:
        return slice_labels(self.slice)

    def replace(self, **changes: Any) -> CaseResult:
        return replace(self, **changes)

    def status(self, check: str) -> str | None:
        """The status of check ``check``, None when the case has no such check."""
        found = self.checks.get(check)
        return None if found is None else found.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "question": self.question, "expected_answer": self.expected_answer,
            "expected_sections": list(self.expected_sections), "slice": dict(self.slice), "tags": list(self.tags),
            "out_of_scope": self.out_of_scope, "answer": self.answer,
            "retrieved": None if self.retrieved is None else [x.to_dict() for x in self.retrieved],
            "context_tokens": self.context_tokens, "first_relevant_rank": self.first_relevant_rank,
            "metrics": dict(self.metrics), "checks": {n: c.to_dict() for n, c in self.checks.items()},
            "passed": self.passed, "failures": list(self.failures), "error": self.error,
            "usage": dict(self.usage), "latency_ms": self.latency_ms,
        }

    @classmethod
    def from_dict(cls, data: Any, key: str, r: Reader) -> CaseResult:
        fast = _fast_case(data)
        if fast is not None:
            return fast
        data = r.obj(data, key)
        r.keys(data, CASE_KEYS, key)
        for name in CASE_REQUIRED:
            r.req(data, name, key)
        case_id = r.str_(data["id"], f"{key}.id")
        key = f"cases[{case_id}]"
        retrieved = data.get("retrieved")
        slice_ = r.obj(data.get("slice") or {}, f"{key}.slice")
        for name, value in slice_.items():
            if not isinstance(value, str | int | float | bool) or (isinstance(value, float) and not math.isfinite(value)):
                raise r.fail(f"{key}.slice.{name}", f"expected a string, number or boolean, got {value!r}")
        passed = data.get("passed")
        if passed is not None:
            r.bool_(passed, f"{key}.passed")
        return cls(
            id=case_id,  # type: ignore[arg-type]
            question=r.str_(data["question"], f"{key}.question"),  # type: ignore[arg-type]
            expected_answer=r.str_(data.get("expected_answer") or "", f"{key}.expected_answer"),  # type: ignore[arg-type]
            expected_sections=r.strs(data.get("expected_sections") or [], f"{key}.expected_sections"),
            slice=dict(slice_), tags=r.strs(data.get("tags") or [], f"{key}.tags"),
            out_of_scope=r.bool_(data.get("out_of_scope", False), f"{key}.out_of_scope"),
            answer=r.str_(data.get("answer"), f"{key}.answer", optional=True),
            retrieved=None if retrieved is None else tuple(
                Retrieved.from_dict(x, f"{key}.retrieved[{i}]", r) for i, x in enumerate(r.lst(retrieved, f"{key}.retrieved"))),
            context_tokens=r.int_(data.get("context_tokens"), f"{key}.context_tokens", optional=True),
            first_relevant_rank=r.int_(data.get("first_relevant_rank"), f"{key}.first_relevant_rank",
                                       optional=True, minimum=1),
            metrics=r.numbers(data.get("metrics") or {}, f"{key}.metrics", optional=False, bounds=rate_bounds),
            checks={str(n): CheckResult.from_dict(c, f"{key}.checks.{n}", reader=r)
                    for n, c in r.obj(data.get("checks") or {}, f"{key}.checks").items()},
            passed=passed,
            failures=r.strs(data.get("failures") or [], f"{key}.failures"),
            error=r.str_(data.get("error"), f"{key}.error", optional=True),
            usage={str(k): r.int_(v, f"{key}.usage.{k}") for k, v in r.obj(data.get("usage") or {}, f"{key}.usage").items()},
            latency_ms=r.num(data.get("latency_ms"), f"{key}.latency_ms", optional=True),
        )


CASE_KEYS = tuple(f.name for f in fields(CaseResult))
CASE_REQUIRED = ("id", "question", "checks", "passed", "error")


# --- the common, valid case at once ----------------------------------------------------------
# ``from_dict`` above is the strict reader: every value checked through the Reader, which names the
# key of the first problem. A results file holds thousands of cases, nearly all of them plain and
# valid, so each record first tries these readers: exact JSON types checked with ``type() is``, no
# key path built. Whatever they do not accept at once (a wrong or unusual value, a subclass, a
# nested detail) they hand back as None, and the strict reader reads it and gives its message, so
# what a file may hold and what a bad one is told are the same as before. What they build equals
# what the strict reader builds from the same value.

_CASE_KEYS, _CASE_REQUIRED = frozenset(CASE_KEYS), frozenset(CASE_REQUIRED)
_CHECK_FIELDS = frozenset(("status", "passed", "score", "reason"))
_STR, _NUMBERS = frozenset((str,)), frozenset((float, int))


def _number(value: Any) -> bool:
    """A finite number, not a bool (``Reader.num``'s common case)."""
    kind = type(value)
    return (kind is float and math.isfinite(value)) or (kind is int and -1e300 < value < 1e300)


def _strings(value: Any) -> tuple[str, ...] | None:
    """A list of strings as a tuple; None for anything else."""
    if type(value) is list and {*map(type, value)} <= _STR:
        return tuple(value)
    return None


def _fast_check(data: Any) -> CheckResult | None:
    if type(data) is not dict:
        return None
    status, score, reason = data.get("status"), data.get("score"), data.get("reason", "")
    if type(status) is not str or status not in STATUSES or type(reason) is not str or not (
            score is None or _number(score)):
        return None
    details = {}
    for name, value in data.items():
        if name in _CHECK_FIELDS:
            continue
        kind = type(value)
        if kind is str or kind is bool or value is None or _number(value):
            details[name] = value
        elif kind is list and {*map(type, value)} <= _STR:
            details[name] = list(value)
        else:
            return None
    return CheckResult(status, score, reason, details)


def _fast_retrieved(data: Any) -> Retrieved | None:
    if type(data) is not dict:
        return None
    chunk_id, sections = data.get("chunk_id"), _strings(data.get("sections", []))
    text, score, tokens = data.get("text") or "", data.get("score"), data.get("tokens")
    if type(chunk_id) is not str or sections is None or type(text) is not str or not (
            score is None or _number(score)) or not (tokens is None or (type(tokens) is int and tokens >= 0)):
        return None
    return Retrieved(chunk_id, sections, text, score, tokens)


def _fast_mapping(value: Any, ok: Callable[[Any], bool]) -> dict[str, Any] | None:
    """An object (a falsy value: empty) whose every value is ``ok``, as a new dict; None otherwise."""
    value = value or {}
    if type(value) is not dict or not {*map(type, value)} <= _STR or not all(map(ok, value.values())):
        return None
    return dict(value)


def _rates(value: Any) -> dict[str, Any] | None:
    """``_fast_mapping(value, _rate)`` for a case's metrics, a dozen numbers a case, in bulk: a NaN
    passes ``min`` and ``max`` but makes the sum NaN."""
    value = value or {}
    if type(value) is not dict or not {*map(type, value)} <= _STR:
        return None
    numbers = value.values()
    if numbers and not ({*map(type, numbers)} <= _NUMBERS and 0 <= min(numbers) and max(numbers) <= 1
                        and math.isfinite(sum(numbers))):
        return None
    return dict(value)


def _slice_value(value: Any) -> bool:
    kind = type(value)
    return kind is str or kind is bool or kind is int or (kind is float and math.isfinite(value))


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _optional(value: Any, kind: type) -> bool:
    return value is None or type(value) is kind


def _fast_case(data: Any) -> CaseResult | None:
    if type(data) is not dict or not data.keys() <= _CASE_KEYS or not _CASE_REQUIRED <= data.keys():
        return None
    get = data.get
    case_id, question, expected_answer = data["id"], data["question"], get("expected_answer") or ""
    answer, error, passed, out_of_scope = get("answer"), get("error"), get("passed"), get("out_of_scope", False)
    context_tokens, rank, latency = get("context_tokens"), get("first_relevant_rank"), get("latency_ms")
    if not (type(case_id) is str and type(question) is str and type(expected_answer) is str
            and _optional(answer, str) and _optional(error, str) and _optional(passed, bool)
            and type(out_of_scope) is bool and (context_tokens is None or _count(context_tokens))
            and (rank is None or (type(rank) is int and rank >= 1)) and (latency is None or _number(latency))):
        return None
    lists = [_strings(get(name) or []) for name in ("expected_sections", "tags", "failures")]
    maps = [_fast_mapping(get("slice"), _slice_value), _rates(get("metrics")), _fast_mapping(get("usage"), _count)]
    checks = get("checks") or {}
    if None in lists or None in maps or type(checks) is not dict:
        return None
    checks = {name: _fast_check(check) for name, check in checks.items()}
    if None in checks.values() or not all(type(name) is str for name in checks):
        return None
    retrieved = get("retrieved")
    if retrieved is not None:
        if type(retrieved) is not list:
            return None
        retrieved = tuple(_fast_retrieved(item) for item in retrieved)
        if None in retrieved:
            return None
    (expected_sections, tags, failures), (slice_, metrics, usage) = lists, maps
    return CaseResult(id=case_id, question=question, expected_answer=expected_answer,
                      expected_sections=expected_sections, slice=slice_, tags=tags,  # type: ignore[arg-type]
                      out_of_scope=out_of_scope, answer=answer, retrieved=retrieved,  # type: ignore[arg-type]
                      context_tokens=context_tokens, first_relevant_rank=rank, metrics=metrics,  # type: ignore[arg-type]
                      checks=checks, passed=passed, failures=failures, error=error,  # type: ignore[arg-type]
                      usage=usage, latency_ms=latency)  # type: ignore[arg-type]

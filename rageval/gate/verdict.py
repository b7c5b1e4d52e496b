"""The gate's records: :class:`Reason` (why) and :class:`Verdict` (the decision and everything the
report shows), with ``to_dict`` and a strict ``from_dict`` (what ``rageval gate --out`` writes and
``rageval report --verdict`` reads back).

``verdict`` is ``fail`` iff some reason is blocking. ``state`` is ``not_comparable`` when there was
no comparable baseline, else ``insufficient_data`` when a gated slice had too few cases, else equal
to ``verdict``; so ``not_comparable`` and ``insufficient_data`` coexist with either verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from rageval.errors import RagevalError, ResultError
from rageval.files import Reader, parse_result_json

VERDICTS = ("pass", "fail")
STATES = ("pass", "fail", "not_comparable", "insufficient_data")
ROW_STATUSES = ("pass", "fail", "warn", "n/a", "insufficient_data")

#: rule -> the short label shown after a reason in the report's first line
RULE_LABELS: dict[str, str] = {
    "missing_baseline": "no baseline",
    "not_comparable": "not comparable",
    "floor": "floor",
    "max_drop": "max drop",
    "slice_floor": "slice floor",
    "slice_max_drop": "slice max drop",
    "slice_insufficient_data": "insufficient data",
    "zero_tolerance": "zero tolerance",
    "errors": "errors",
    "missing_cases": "missing cases",
    "policy_drift": "policy drift",
    "golden_version": "golden set version",
    "leak": "golden leak",
    "golden_changes": "golden set changed",
    "metrics_compared": "metrics compared",
    "judge_changed": "judge changed",
}
#: Verdict keys a verdict file may leave out
OPTIONAL = ("attribution",)
#: rules that explain a state rather than block
STATE_RULES = ("not_comparable", "missing_baseline", "slice_insufficient_data")


@dataclass(frozen=True)
class Reason:
    """Why the gate decided what it did. ``metric`` is set for aggregate rules, ``case`` for a
    per-case rule, ``slice`` for slice gates; ``blocking`` False means "reported, not blocking"."""

    rule: str
    message: str
    blocking: bool
    metric: str | None = None
    case: str | None = None
    slice: str | None = None
    value: Any = None
    threshold: Any = None

    @property
    def label(self) -> str:
        return RULE_LABELS.get(self.rule, self.rule)

    @property
    def moved_metric(self) -> str | None:
        """The aggregate metric this reason's change shows in (a zero-tolerance number rule: numbers_pass)."""
        return "numbers_pass" if self.rule == "zero_tolerance" else self.metric

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "metric": self.metric, "case": self.case, "slice": self.slice,
                "value": _thaw(self.value), "threshold": _thaw(self.threshold), "message": self.message,
                "blocking": self.blocking}

    @classmethod
    def from_dict(cls, data: Any, key: str = "reason", r: Reader | None = None) -> Reason:
        r = r or Reader("verdict")
        data = r.obj(data, key)
        r.keys(data, ("rule", "metric", "case", "slice", "value", "threshold", "message", "blocking"), key)
        return cls(rule=r.str_(r.req(data, "rule", key), f"{key}.rule"),  # type: ignore[arg-type]
                   message=r.str_(r.req(data, "message", key), f"{key}.message"),  # type: ignore[arg-type]
                   blocking=r.bool_(r.req(data, "blocking", key), f"{key}.blocking"),
                   metric=r.str_(data.get("metric"), f"{key}.metric", optional=True),
                   case=r.str_(data.get("case"), f"{key}.case", optional=True),
                   slice=r.str_(data.get("slice"), f"{key}.slice", optional=True),
                   value=_freeze(r.json(data.get("value"), f"{key}.value")),
                   threshold=_freeze(r.json(data.get("threshold"), f"{key}.threshold")))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Reason):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    return value


freeze = _freeze
thaw = _thaw


@dataclass(frozen=True)
class Verdict:
    """The gate's decision and everything the report shows. Immutable: lists are tuples and
    mappings are read-only; ``to_dict`` gives plain JSON with exactly these keys."""

    verdict: str                        # pass | fail
    state: str                          # pass | fail | not_comparable | insufficient_data
    comparable: bool
    reasons: tuple[Reason, ...]
    pass_to_fail: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    rank_drops: tuple[Mapping[str, Any], ...]     # {id, before, after}
    config_diff: tuple[Mapping[str, Any], ...]    # {key, before, after}
    reran: Mapping[str, Any]                      # {targeted: [ids], full: bool, runs: {metric: [v…]}}
    stats: Mapping[str, Any]                      # {mcnemar: {b, c, p} | None, bootstrap: {metric: {delta, low, high}}}
    metrics: tuple[Mapping[str, Any], ...]        # {metric, baseline, candidate, delta, threshold, status}
    by_slice: tuple[Mapping[str, Any], ...]       # {slice, metric, n_baseline, n_candidate, baseline, candidate, delta, threshold, gated, status}
    cases_added: tuple[str, ...]
    cases_removed: tuple[str, ...]
    golden: Mapping[str, Any]                     # {name, baseline_version, candidate_version, diff, …}
    noise: Mapping[str, Any]                      # metric -> {sigma_baseline, sigma_candidate, sigma_diff, band}
    attribution: Mapping[str, Any] | None = None  # which changed knob caused a drop (rageval/attribution.py)

    @property
    def blocked(self) -> bool:
        return self.verdict == "fail"

    @property
    def blocking_reasons(self) -> tuple[Reason, ...]:
        return tuple(r for r in self.reasons if r.blocking)

    @property
    def main_reason(self) -> Reason | None:
        """The first blocking reason; otherwise the first reason that explains the state."""
        if self.blocking_reasons:
            return self.blocking_reasons[0]
        return next((r for r in self.reasons if r.rule in STATE_RULES), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON; ``attribution`` only when there is one (verdicts of 0.1.0 have none)."""
        return {f.name: _thaw(getattr(self, f.name)) for f in fields(self)
                if not (f.name in OPTIONAL and getattr(self, f.name) is None)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "verdict", *, error: type[RagevalError] = ResultError) -> Verdict:
        """Validate and build (the verdict JSON of ``rageval gate --out``); raises ``error``
        naming ``where`` and the key of the first problem."""
        r = Reader(where, error)
        data = r.obj(data, "(top level)")
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data and n not in OPTIONAL]
        if missing:
            raise error(f"{where}: missing keys {', '.join(missing)}; it was not written by this rageval "
                        "version's `rageval gate --out` — regenerate it.")
        r.keys(data, names, "")
        if data["verdict"] not in VERDICTS:
            raise r.fail("verdict", f"expected 'pass' or 'fail', got {data['verdict']!r}")
        if data["state"] not in STATES:
            raise r.fail("state", f"expected one of {', '.join(STATES)}, got {data['state']!r}")
        values: dict[str, Any] = {n: _freeze(r.json(data.get(n), n)) for n in names}
        values["comparable"] = r.bool_(data["comparable"], "comparable")
        values["reasons"] = tuple(Reason.from_dict(x, f"reasons[{i}]", r) for i, x in enumerate(r.lst(data["reasons"], "reasons")))
        for name in ("pass_to_fail", "fail_to_pass", "flaky", "cases_added", "cases_removed"):
            values[name] = r.strs(data[name], name)
        for name in ("reran", "stats", "golden", "noise"):
            r.obj(data[name], name)
        for name in ("rank_drops", "config_diff"):
            for i, item in enumerate(r.lst(data[name], name)):
                r.obj(item, f"{name}[{i}]")
        _check_rows(r, data["metrics"], "metrics", ("metric", "baseline", "candidate", "delta", "threshold", "status"))
        _check_rows(r, data["by_slice"], "by_slice", ("slice", "metric", "n_baseline", "n_candidate", "baseline",
                                                      "candidate", "delta", "threshold", "gated", "status"))
        return cls(**values)

    @classmethod
    def from_json(cls, data: bytes, where: str, *, error: type[RagevalError] = ResultError) -> Verdict:
        """A verdict file's bytes (``rageval report --verdict``), read as strictly as a RunResult:
        ``rageval.files.parse_result_json`` (size bound, strict JSON), then ``from_dict``."""
        return cls.from_dict(parse_result_json(data, where, error), where, error=error)


def _check_rows(r: Reader, rows: Any, key: str, required: tuple[str, ...]) -> None:
    """A table of the verdict: every row has its keys, numbers where numbers belong."""
    for i, row in enumerate(r.lst(rows, key)):
        where = f"{key}[{i}]"
        row = r.obj(row, where)
        for name in required:
            r.req(row, name, where)
        r.str_(row["metric"], f"{where}.metric")
        for name in ("baseline", "candidate", "delta"):
            r.num(row[name], f"{where}.{name}", optional=True)
        if row["status"] not in ROW_STATUSES:
            raise r.fail(f"{where}.status", f"expected one of {', '.join(ROW_STATUSES)}, got {row['status']!r}")
        if row["threshold"] is not None:
            for name, value in r.obj(row["threshold"], f"{where}.threshold").items():
                r.num(value, f"{where}.threshold.{name}")

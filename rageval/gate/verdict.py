"""The gate's records: :class:`Reason` (why) and :class:`Verdict` (the decision and everything the
report shows), with ``to_dict`` and a strict ``from_dict`` (what ``rageval gate --out`` writes and
``rageval report --verdict`` reads back).

``verdict`` is ``fail`` iff some reason is blocking. ``state`` is ``not_comparable`` when there was
no comparable baseline, else ``insufficient_data`` when a gated slice had too few cases, else equal
to ``verdict``; so ``not_comparable`` and ``insufficient_data`` coexist with either verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from rageval.cost import Cost
from rageval.errors import RagevalError, ResultError
from rageval.files import Reader, parse_result_json
from rageval.gate.ablation import Attribution
from rageval.gate.policy import PolicyReport
from rageval.gate.stats import BootstrapCI, McNemar
from rageval.golden.lifecycle import Coverage, GoldenDiff, Leak, SectionChange
from rageval.metrics.registry import metrics_fed_by
from rageval.records import Record, rounded

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
    "known_failures": "known failures",
    "policy_loosened": "policy from main",
    "policy_unreadable": "policy from main",
}
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
        """The aggregate metric this reason's change shows in (a zero-tolerance check: the metric it feeds)."""
        if self.rule == "zero_tolerance":
            return next(iter(metrics_fed_by(self.metric or "")), None)
        return self.metric

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
    """A reason's value as JSON, floats ``rounded`` as every record's are."""
    if isinstance(value, Reason):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_thaw(v) for v in value]
    if isinstance(value, float):
        return rounded(value)
    return value



# --- the tables a verdict carries ------------------------------------------------------------

@dataclass(frozen=True)
class Threshold(Record):
    """What a metric is gated by: a floor, an allowed drop, or both."""

    floor: float | None = None
    max_drop: float | None = None
    OMIT_NONE = ("floor", "max_drop")


@dataclass(frozen=True)
class MetricRow(Record):
    """One row of the metric table: the baseline's and the PR's values, Δ, threshold, status."""

    metric: str
    baseline: float | None
    candidate: float | None
    delta: float | None
    threshold: Threshold | None
    status: str = field(metadata={"choices": ROW_STATUSES})

    @property
    def gated(self) -> bool:
        return self.threshold is not None


@dataclass(frozen=True)
class SliceRow(Record):
    """One (slice, metric) row of the by-slice table, with both runs' case counts."""

    slice: str
    metric: str
    n_baseline: int | None
    n_candidate: int
    baseline: float | None
    candidate: float | None
    delta: float | None
    threshold: Threshold | None
    gated: bool
    status: str = field(metadata={"choices": ROW_STATUSES})


@dataclass(frozen=True)
class RankDrop(Record):
    """A case whose first relevant chunk ranks lower (None: not retrieved)."""

    id: str
    before: int | None
    after: int | None


@dataclass(frozen=True)
class ConfigChange(Record):
    """A dotted config key whose value differs (None: absent on that side); or a file the key points
    to whose content changed in place (``note``: "prompt.j2 content changed, +3 −1 lines", ``diff``:
    the unified diff, when the baseline's content was at hand)."""

    key: str
    before: Any
    after: Any
    note: str | None = None
    diff: str | None = None

    OMIT_NONE = ("note", "diff")              # verdicts before issue 20 have neither


@dataclass(frozen=True)
class Reruns(Record):
    """The re-runs that confirmed the decision: the cases re-checked one by one, whether the whole
    subset was re-run, each gated metric's value per run, and what the re-runs cost."""

    targeted: tuple[str, ...] = ()
    full: bool = False
    runs: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    cost: Cost | None = None
    OMIT_NONE = ("cost",)


@dataclass(frozen=True)
class Statistics(Record):
    """McNemar on the pass/fail flips, and the paired bootstrap CI of Δ per metric."""

    mcnemar: McNemar | None = None
    bootstrap: Mapping[str, BootstrapCI] = field(default_factory=dict)


@dataclass(frozen=True)
class NoiseBand(Record):
    """σ of a metric in each run, of their difference, and the band (noise_k · σ_diff)."""

    sigma_baseline: float
    sigma_candidate: float
    sigma_diff: float
    band: float


@dataclass(frozen=True)
class GoldenReport(Record):
    """The golden sets compared: names, versions, how many cases were compared, and what the
    report shows about them (the diff, the changelog line, sections whose numbers changed, leaks,
    coverage)."""

    name: str
    baseline_version: int | str | None
    candidate_version: int | str
    compared_cases: int | None = None
    diff: GoldenDiff | None = None
    changelog: str = ""
    section_changes: tuple[SectionChange, ...] = ()
    leaks: tuple[Leak, ...] = ()
    coverage: Coverage | None = None
    OMIT_NONE = ("compared_cases",)        # verdicts of 0.1.0 did not record it


@dataclass(frozen=True)
class Verdict(Record):
    """The gate's decision and everything the report shows, as typed, immutable records;
    ``to_dict`` gives the verdict JSON (docs/verdict.md) and ``from_dict`` reads it back strictly."""

    verdict: str = field(metadata={"choices": VERDICTS})
    state: str = field(metadata={"choices": STATES})
    comparable: bool
    reasons: tuple[Reason, ...]
    pass_to_fail: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    rank_drops: tuple[RankDrop, ...]
    config_diff: tuple[ConfigChange, ...]
    reran: Reruns
    stats: Statistics
    metrics: tuple[MetricRow, ...]
    by_slice: tuple[SliceRow, ...]
    cases_added: tuple[str, ...]
    cases_removed: tuple[str, ...]
    golden: GoldenReport
    noise: Mapping[str, NoiseBand]
    attribution: Attribution | None = None  # which changed knob caused a drop (rageval/attribution.py)
    known_failures: tuple[str, ...] = ()    # cases failing a zero-tolerance check on main too (gate/cases.py)
    policy: PolicyReport | None = None      # what the PR loosened or tightened (gate/policy.py)
    OMIT_NONE = ("attribution", "policy")   # verdicts of 0.1.0 have neither

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

    def replace(self, **changes: Any) -> Verdict:
        return replace(self, **changes)

    @classmethod
    def read(cls, data: Any, where: str = "verdict", *, error: type[RagevalError] = ResultError) -> Verdict:
        """Validate and build (the verdict JSON of ``rageval gate --out``); raises ``error``
        naming ``where`` and the key of the first problem."""
        r = Reader(where, error)
        data = r.obj(data, "(top level)")
        missing = [f.name for f in fields(cls) if f.name not in data and f.default is MISSING]
        if missing:
            raise error(f"{where}: missing keys {', '.join(missing)}; it was not written by this rageval "
                        "version's `rageval gate --out` — regenerate it.")
        return cls.from_dict(data, "", r)

    @classmethod
    def from_json(cls, data: bytes, where: str, *, error: type[RagevalError] = ResultError) -> Verdict:
        """A verdict file's bytes (``rageval report --verdict``), read as strictly as a RunResult:
        ``rageval.files.parse_result_json`` (size bound, strict JSON), then :meth:`read`."""
        return cls.read(parse_result_json(data, where, error), where, error=error)

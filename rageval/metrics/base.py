"""Records and the metric-name grammar shared by every metric.

A check answers "did this case pass this rule" (``passed``) and may carry a ``score`` that ranks;
the two are kept apart: one gates, the other ranks. A check that could not apply is ``skipped``;
one whose model call failed is ``error`` — never NaN, never a silent pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, SKIPPED, ERROR = "pass", "fail", "skipped", "error"
STATUSES = (PASS, FAIL, SKIPPED, ERROR)


@dataclass(frozen=True)
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
        return {PASS: True, FAIL: False}.get(self.status)

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
        out: dict[str, Any] = {"status": self.status, "passed": self.passed, "score": self.score,
                               "reason": self.reason}
        for key, value in self.details.items():
            if key in out:
                raise ValueError(f"check detail {key!r} collides with a record field")
            out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        details = {k: v for k, v in data.items() if k not in ("status", "passed", "score", "reason")}
        return cls(data["status"], data.get("score"), data.get("reason", ""), details)


# --- metric names --------------------------------------------------------------------------

RETRIEVAL_FAMILIES = ("hit", "recall", "mrr", "ndcg")
_RETRIEVAL_NAME = re.compile(r"^(hit|recall|mrr|ndcg)@(\d+)(tok)?$")

#: Aggregate generation metrics: name -> one-line description. Each is a rate over the cases where
#: the underlying check applied (skipped cases are left out, errors count as not passing).
GENERATION_METRICS: dict[str, str] = {
    "pass_rate": "share of cases whose every applicable check passed",
    "numbers_pass": "share of cases with numbers that pass the number rule (both directions)",
    "rules_pass": "share of cases passing must_include / must_not_include",
    "refusal_pass": "share of cases that decline exactly when out of scope (and answer otherwise)",
    "judge_pass": "share of cases the LLM judge marks correct",
    "faithfulness": "mean share of answer claims supported by the expected sections (correctness)",
    "groundedness": "mean share of answer claims supported by the retrieved context",
}

#: Other per-run numbers reported but not rates.
OTHER_METRICS: dict[str, str] = {
    "context_tokens": "mean tokens of retrieved context handed to the generator",
}


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name: ``hit@3`` is (hit, 3, budget=False); ``recall@600tok`` is a
    cut-off by context tokens rather than by rank."""

    family: str
    k: int | None = None
    budget: bool = False

    def __str__(self) -> str:
        if self.k is None:
            return self.family
        return f"{self.family}@{self.k}{'tok' if self.budget else ''}"

    @property
    def is_retrieval(self) -> bool:
        return self.family in RETRIEVAL_FAMILIES


def parse_metric(name: str) -> MetricName:
    """Parse one metric's string form; raise ValueError listing the valid forms otherwise."""
    if not isinstance(name, str):
        raise ValueError(f"metric name must be a string, got {type(name).__name__}")
    m = _RETRIEVAL_NAME.match(name)
    if m:
        k = int(m.group(2))
        if k < 1:
            raise ValueError(f"metric {name!r}: the cut-off must be at least 1")
        return MetricName(m.group(1), k, bool(m.group(3)))
    if name in GENERATION_METRICS or name in OTHER_METRICS:
        return MetricName(name)
    valid = ", ".join([f"{f}@K" for f in RETRIEVAL_FAMILIES] + [f"{f}@Ntok" for f in RETRIEVAL_FAMILIES]
                      + sorted(GENERATION_METRICS) + sorted(OTHER_METRICS))
    raise ValueError(f"unknown metric {name!r}; valid metrics are: {valid}")


def metrics_table_markdown() -> str:
    """The README's metric table, generated from the registries so the two cannot drift."""
    from rageval.metrics.retrieval import REGISTRY

    rows = ["| Metric | What it measures | Definition |", "|---|---|---|"]
    for family, m in REGISTRY.items():
        rows.append(f"| `{family}@K` | {m.description} | {m.formula.replace('|', chr(92) + '|')} |")
    for family, m in REGISTRY.items():
        rows.append(f"| `{family}@Ntok` | {family}@K over the longest prefix of ≤ N context tokens | equal-budget comparison |")
    for name, description in {**GENERATION_METRICS, **OTHER_METRICS}.items():
        rows.append(f"| `{name}` | {description} | |")
    return "\n".join(rows) + "\n"

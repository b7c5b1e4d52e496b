"""Records and the metric-name grammar shared by every metric.

A check answers "did this case pass this rule" (``passed``) and may carry a ``score`` that ranks;
the two are kept apart: one gates, the other ranks. A check that could not apply is ``skipped``;
one whose model call failed is ``error`` — never NaN, never a silent pass.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rageval.results import ERROR, FAIL, PASS, SKIPPED, STATUSES, CheckResult

#: CheckResult is a result record: it lives in rageval/results.py and is re-exported here, where
#: every metric imports it from.
__all__ = ["CheckResult", "ERROR", "FAIL", "GENERATION_METRICS", "OTHER_METRICS", "PASS", "RETRIEVAL_FAMILIES",
           "SKIPPED", "STATUSES", "MetricName", "parse_metric"]


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


@functools.lru_cache(maxsize=1024)
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

"""A case's value of a summary metric: the number its summary is the mean of.

``case_value(case, metric)`` is the value ``case`` contributes to ``metric`` (None: left out of the
mean); ``value_reader(metric)`` is the same, the metric looked up once, for reading it off many
cases (``RunResult.values_of``, ``rageval.metrics.aggregate.summarize``). What each metric's value
is, is declared in ``rageval.metrics.registry``: a retrieval metric is the case's own value, a
declared metric its ``value(case)``; a metric without one is the 1/0 rate of the checks that feed
it — 1 when every one that applied passed, 0 when one failed or errored, None when none applied
(skipped) or the case errored. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rageval.metrics.registry import REGISTRY, is_retrieval_metric
from rageval.records import ERROR, FAIL, PASS, CaseResult

_APPLIED = (PASS, FAIL, ERROR)


def _rate_of_checks(case: CaseResult, checks: Sequence[str]) -> float | None:
    if case.error:
        return None
    found = case.checks
    applied = [s for s in (found[name].status for name in checks if name in found) if s in _APPLIED]
    return (1.0 if all(s == PASS for s in applied) else 0.0) if applied else None


def value_reader(metric: str) -> Callable[[CaseResult], float | None]:
    """:func:`case_value` for one metric, the metric looked up once."""
    declared = REGISTRY.metrics.get(metric)
    if declared is not None and declared.value is not None:
        return declared.value
    if declared is not None:
        feeders = tuple(c.name for c in REGISTRY.feeders(metric))
        return lambda case: _rate_of_checks(case, feeders)
    if not is_retrieval_metric(metric):
        return lambda case: None

    def retrieval_value(case: CaseResult) -> float | None:
        value = case.metrics.get(metric)
        return None if value is None else float(value)
    return retrieval_value


def case_value(case: CaseResult, metric: str) -> float | None:
    """The value ``case`` contributes to the summary metric ``metric`` (None: left out of its mean)."""
    return value_reader(metric)(case)

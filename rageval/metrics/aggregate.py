"""Per-case values and the summary of a run: one definition for the runner, the gate and the stats.

``case_value(case, metric)`` is the number one case contributes to a summary metric (None when the
case is left out of that metric's mean); ``summarize`` is the mean of those values. So a summary
can always be recomputed from the cases, and a paired comparison of two runs uses exactly the
values the summaries were made of.

Rules (docs/runresult.md):

* retrieval metrics (``hit@3``, ``mrr@5``, …): the case's own value; cases without one (out of
  scope, no retrieval list) are left out;
* ``context_tokens``: the tokens handed to the generator, errored cases left out;
* ``pass_rate``: 1 when every applicable check passed, else 0 — an errored case counts as not
  passing (the gate's ``errors`` policy decides what an error means);
* check rates (``numbers_pass``, ``refusal_pass``, ``judge_pass``, ``rules_pass``): 1/0 over the
  cases where the check applied; skipped checks and errored cases are left out;
* ``faithfulness`` / ``groundedness``: the faithfulness check's share of supported claims.

An aggregate over nothing is None ("n/a"), never NaN. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rageval.metrics.base import parse_metric
from rageval.results import ERROR, FAIL, PASS, CaseResult, CheckResult, RunResult, Summary

#: summary rate -> the checks whose statuses give its per-case 1/0 value
CHECK_RATES: dict[str, tuple[str, ...]] = {
    "numbers_pass": ("numbers",),
    "refusal_pass": ("refusal",),
    "judge_pass": ("judge",),
    "rules_pass": ("must_include", "must_not_include"),
}
#: the summary metrics every run has besides its retrieval metrics, in report order
GENERATION_SUMMARY = ("context_tokens", "pass_rate", "numbers_pass", "refusal_pass", "judge_pass", "rules_pass",
                      "faithfulness", "groundedness")


def verdict_of(checks: Mapping[str, CheckResult], app_error: str | None = None
               ) -> tuple[bool | None, tuple[str, ...], str | None]:
    """(passed, failures, error) of a case from its checks: an App error or a check that errored
    makes the case an error (``passed`` None), not a fail; otherwise it passes when no applicable
    check failed. The one rule for the runner and for the gate, which re-derives every verdict
    from the checks rather than trusting a file's ``passed``."""
    if app_error:
        return None, (), app_error
    errors = [f"{name}: {c.reason}" for name, c in checks.items() if c.status == ERROR]
    if errors:
        return None, (), "; ".join(errors)
    failures = tuple(f"{name}: {c.reason}" for name, c in checks.items() if c.status == FAIL)
    return not failures, failures, None


def rederived(case: CaseResult) -> CaseResult:
    """``case`` with its verdict derived from its checks (see :func:`verdict_of`). A case with no
    checks and no error has been scored by nothing: it is an error, never a pass."""
    app_error = case.error if not any(c.status == ERROR for c in case.checks.values()) else None
    if not case.checks and not app_error:
        app_error = "the case has no checks and no error: it was not scored"
    passed, failures, error = verdict_of(case.checks, app_error)
    if (passed, failures, error) == (case.passed, case.failures, case.error):
        return case
    return case.replace(passed=passed, failures=failures, error=error)


def recomputed(run: RunResult) -> RunResult:
    """``run`` with every case verdict re-derived from its checks and the summary recomputed from
    the cases: what the gate compares, whatever a results file claims."""
    cases = tuple(rederived(c) for c in run.cases)
    return run.replace(cases=cases, summary=summarize(cases, run.metric_names))


def _check_rate(case: CaseResult, names: tuple[str, ...]) -> float | None:
    if case.error:
        return None
    statuses = [case.status(n) for n in names]
    applied = [s for s in statuses if s in (PASS, FAIL, ERROR)]
    if not applied:
        return None
    return 1.0 if all(s == PASS for s in applied) else 0.0


def is_retrieval_metric(metric: str) -> bool:
    """Whether ``metric`` names a retrieval metric (``mrr@5``, ``recall@800tok``, …)."""
    try:
        return parse_metric(metric).is_retrieval
    except ValueError:
        return False


def case_value(case: CaseResult, metric: str) -> float | None:
    """The value ``case`` contributes to the summary metric ``metric`` (see the module docstring)."""
    if metric == "pass_rate":
        return 1.0 if case.passed is True else 0.0
    if metric in CHECK_RATES:
        return _check_rate(case, CHECK_RATES[metric])
    if metric == "context_tokens":
        return None if case.error or case.context_tokens is None else float(case.context_tokens)
    if metric in ("faithfulness", "groundedness"):
        check = case.checks.get("faithfulness")
        value = None if check is None else check.details.get(metric)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if not is_retrieval_metric(metric):
        return None
    value = case.metrics.get(metric)
    return None if value is None else float(value)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-null values rounded to 6 decimals; None for none."""
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 6) if kept else None


def summarize_cases(cases: Sequence[CaseResult], metric_names: Sequence[str]) -> Summary:
    """Counts and summary metrics of ``cases`` (no by-slice part)."""
    names = [*metric_names, *(m for m in GENERATION_SUMMARY if m not in metric_names)]
    metrics = {name: mean(case_value(c, name) for c in cases) for name in names}
    return Summary(n_cases=len(cases), n_passed=sum(1 for c in cases if c.passed is True),
                   n_failed=sum(1 for c in cases if c.passed is False),
                   n_errors=sum(1 for c in cases if c.error), metrics=metrics)


def summarize(cases: Sequence[CaseResult], metric_names: Sequence[str]) -> Summary:
    """The run's Summary: overall and one per slice label (``type=lookup``), labels sorted."""
    groups: dict[str, list[CaseResult]] = {}
    for case in cases:
        for label in case.slice_labels:
            groups.setdefault(label, []).append(case)
    overall = summarize_cases(cases, metric_names)
    return Summary(overall.n_cases, overall.n_passed, overall.n_failed, overall.n_errors, overall.metrics,
                   by_slice={label: summarize_cases(group, metric_names) for label, group in sorted(groups.items())})

"""The summary of a run: one definition for the runner, the gate and the stats.

``summarize`` is the mean of each summary metric's per-case values (``values.case_value``: the
case's own retrieval value, or what its declaration says — a check rate, a count, a detail), so a
summary can always be recomputed from the cases, and a paired comparison of two runs uses exactly
the values the summaries were made of. ``verdict_of`` is the one rule that turns a case's checks
into its verdict. Which metrics there are, and how each per-case value is made, is declared in
``rageval.metrics.registry`` (docs/runresult.md lists them).

An aggregate over nothing is None ("n/a"), never NaN. Pure functions, no I/O.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rageval.metrics.registry import parse_metric, summary_metric_names
from rageval.metrics.values import case_value, value_reader
from rageval.records import ERROR, FAIL, CaseResult, CheckResult
from rageval.results import RunResult, Summary


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
    if all(map(operator.is_, cases, run.cases)):     # every verdict as the file says: the same cases
        cases = run.cases
    run = run.replace(cases=cases)
    return run.replace(summary=summarize(cases, run.metric_names, run.values_of))


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-null values rounded to 6 decimals; None for none."""
    kept = [v for v in values if v is not None]
    return round(sum(kept) / len(kept), 6) if kept else None


def summarize_cases(cases: Sequence[CaseResult], metric_names: Sequence[str],
                    values: Mapping[str, Sequence[float | None]] | None = None) -> Summary:
    """Counts and summary metrics of ``cases`` (no by-slice part); ``values``: each metric's value
    per case of ``cases``, when the caller has them (:func:`summarize` reads them once for every slice)."""
    names = [*metric_names, *(m for m in summary_metric_names() if m not in metric_names)]
    metrics = {name: mean(values[name] if values is not None else (case_value(c, name) for c in cases))
               for name in names}
    return Summary(n_cases=len(cases), n_passed=sum(1 for c in cases if c.passed is True),
                   n_failed=sum(1 for c in cases if c.passed is False),
                   n_errors=sum(1 for c in cases if c.error), metrics=metrics)


def summarize(cases: Sequence[CaseResult], metric_names: Sequence[str],
              values_of: Callable[[str], Sequence[float | None]] | None = None) -> Summary:
    """The run's Summary: overall and one per slice label (``type=lookup``), labels sorted.
    ``values_of(metric)``: each case's value of ``metric``, when the caller has them
    (``RunResult.values_of``); otherwise read here."""
    groups: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        for label in case.slice_labels:
            groups.setdefault(label, []).append(i)
    names = [*metric_names, *(m for m in summary_metric_names() if m not in metric_names)]
    if values_of is None:                   # each case's values, read once
        table = {name: list(map(value_reader(name), cases)) for name in names}
    else:
        table = {name: values_of(name) for name in names}
    overall = summarize_cases(cases, metric_names, table)
    by_slice = {label: summarize_cases([cases[i] for i in rows], metric_names,
                                       {name: [column[i] for i in rows] for name, column in table.items()})
                for label, rows in sorted(groups.items())}
    return Summary(overall.n_cases, overall.n_passed, overall.n_failed, overall.n_errors, overall.metrics,
                   by_slice=by_slice)


# --- what makes a run say little -----------------------------------------------------------------

MSG_SMALL_INDEX = ("the index has {n} chunk{s} and retrieval.top_k is {k}: every question retrieves {share} of the "
                   "corpus, so hit@k and recall@k say little; use smaller chunks or a smaller top_k")
MSG_CONSTANT = ("{metric} is {value:g} for every one of the {n} cases, even at its smallest cut-off: retrieval "
                "cannot show a better or a worse configuration here (check the labels and the index size)")
#: fewer cases than this with a value, and a constant metric is not worth a warning
MIN_CASES_CONSTANT = 5


def index_warnings(n_chunks: int, top_k: int) -> list[str]:
    """An index of fewer than twice top_k chunks: retrieval cannot miss, so it is not measured."""
    if n_chunks >= 2 * top_k:
        return []
    share = "all" if n_chunks <= top_k else "most"
    return [MSG_SMALL_INDEX.format(n=n_chunks, s="s" if n_chunks != 1 else "", k=top_k, share=share)]


def run_warnings(run: RunResult) -> list[str]:
    """What makes ``run`` say little: an index smaller than twice top_k (when the app says how big its
    index is), and retrieval metrics with one value for every case."""
    out: list[str] = []
    chunks, top_k = run.app.get("chunks"), (run.config.get("retrieval") or {}).get("top_k")
    if isinstance(chunks, int) and isinstance(top_k, int):
        out += index_warnings(chunks, top_k)
    smallest: dict[str, str] = {}                 # family -> its metric at the smallest rank cut-off
    for metric in run.metric_names:
        name = parse_metric(metric)
        if name.is_retrieval and not name.budget and (name.family not in smallest or
                                                      name.k < parse_metric(smallest[name.family]).k):  # type: ignore[operator]
            smallest[name.family] = metric
    for metric in smallest.values():
        values = {c.metrics[metric] for c in run.cases if metric in c.metrics}
        n = sum(1 for c in run.cases if metric in c.metrics)
        if n >= MIN_CASES_CONSTANT and len(values) == 1 and next(iter(values)) in (0.0, 1.0):
            out.append(MSG_CONSTANT.format(metric=metric, value=next(iter(values)), n=n))
    return out
def totals(cases: Sequence[CaseResult], metric_names: Sequence[str]) -> dict[str, list[float]]:
    """Metric → [sum, count] of the cases' values (unrounded): what one part of a run contributes,
    so the parts of a sharded run add up to the whole's means (``rageval.shards``)."""
    names = [*metric_names, *(m for m in summary_metric_names() if m not in metric_names)]
    out: dict[str, list[float]] = {}
    for name in names:
        kept = [v for v in (case_value(c, name) for c in cases) if v is not None]
        out[name] = [round(float(sum(kept)), 9), len(kept)]
    return out


def run_totals(cases: Sequence[CaseResult], metric_names: Sequence[str]) -> dict[str, Any]:
    """Totals overall and per slice label (see :func:`totals`)."""
    groups: dict[str, list[CaseResult]] = {}
    for case in cases:
        for label in case.slice_labels:
            groups.setdefault(label, []).append(case)
    return {"metrics": totals(cases, metric_names),
            "by_slice": {label: totals(group, metric_names) for label, group in sorted(groups.items())}}


def add_totals(parts: Iterable[Mapping[str, Sequence[float]]]) -> dict[str, list[float]]:
    """Metric → the [sum, count] of several parts' [sum, count] totals (sums rounded to 9 decimals)."""
    sums: dict[str, list[float]] = {}
    for part in parts:
        for name, (total, count) in part.items():
            into = sums.setdefault(name, [0.0, 0])
            into[0] = round(into[0] + total, 9)
            into[1] += count
    return sums


def mean_of_totals(parts: Iterable[Mapping[str, Sequence[float]]]) -> dict[str, float | None]:
    """Metric → the mean over several parts' [sum, count] totals, rounded as :func:`mean` rounds."""
    return {name: round(total / count, 6) if count else None for name, (total, count) in add_totals(parts).items()}

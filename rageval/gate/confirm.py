"""Re-runs that confirm a blocking decision before it blocks (the caller executes; the gate decides what).

``rerun(None)`` re-runs the whole subset, ``rerun([ids])`` just those cases; both return a
RunResult made with caches bypassed.

* *near a threshold*: when a blocking floor / max_drop decision fails by at most
  ``rerun.margin``, the whole subset is re-run and the decision is taken again on the mean of the
  runs' values, up to ``rerun.times`` times. Only failing decisions are confirmed — a decision
  that passes is not re-run. A retrieval metric (and ``context_tokens``) is not re-run when the
  candidate's embedder is deterministic (``embedding.provider`` local or e5); a generation metric
  is not re-run when retrieval and generation are both deterministic (generation provider
  extractive or none, and no judge model).
* *targeted*: every pass→fail case and every zero-tolerance failure is re-checked once: with the
  full re-run's results when one was made, otherwise by ``rerun([ids])`` (at most
  ``rerun.times`` calls, each on the cases still failing). A case that passes in a re-run moves
  to ``flaky`` and stops blocking. Nothing is re-run when the whole pipeline is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rageval.gate.thresholds import EPS, Context, RerunFn, ThresholdResult, threshold_results
from rageval.gate.verdict import Reason
from rageval.results import RunResult


def aggregate_with_reruns(ctx: Context, rerun: RerunFn | None) -> tuple[list[RunResult], list[ThresholdResult], list[Reason]]:
    """The aggregate decisions, re-running the whole subset while a blocking decision sits
    within ``rerun.margin`` of its threshold. Returns (candidate and re-runs, checks, notes)."""
    cfg = ctx.cfg
    runs: list[RunResult] = [ctx.candidate]
    while True:
        checks, notes = threshold_results(ctx, runs)
        near = [c for c in checks if c.blocking and c.rerunnable and c.breach <= cfg.rerun.margin + EPS]
        if not near or rerun is None or len(runs) - 1 >= cfg.rerun.times:
            return runs, checks, notes
        runs.append(rerun(None))


def rerun_values(runs: Sequence[RunResult], checks: Sequence[ThresholdResult]) -> dict[str, tuple[float | None, ...]]:
    """Per gated metric (slice metrics keyed ``type=injection:judge_pass``), its value in each run;
    empty when there was no full re-run."""
    if len(runs) < 2:
        return {}
    return {c.key: tuple(r.summary.value(c.metric, c.slice) for r in runs) for c in checks}


@dataclass(frozen=True)
class Confirmed:
    """What is still failing after the re-checks, what was re-checked, and what turned out flaky."""

    pass_to_fail: list[str]
    zero_tolerance: dict[str, list[str]]
    rechecked: list[str]
    flaky: list[str]


def _still_failing(case_id: str, run: RunResult, pass_to_fail: list[str],
                   zt: Mapping[str, list[str]]) -> tuple[bool, list[str]]:
    """(still pass→fail, zero-tolerance checks still failing) of one case in one re-run."""
    case = run.case_map.get(case_id)
    was_p2f = case_id in pass_to_fail
    failing = list(zt.get(case_id, ()))
    if case is None:
        return was_p2f, failing                     # not answered again: still failing
    return was_p2f and case.passed is not True, [n for n in failing if case.status(n) == "fail"]


def _apply(run: RunResult, ids: Sequence[str], pass_to_fail: list[str],
           zt: dict[str, list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    new_p2f = [i for i in pass_to_fail if i not in ids]
    new_zt = {i: names for i, names in zt.items() if i not in ids}
    for case_id in ids:
        p2f, failing = _still_failing(case_id, run, pass_to_fail, zt)
        if p2f:
            new_p2f.append(case_id)
        if failing:
            new_zt[case_id] = failing
    order = {i: n for n, i in enumerate(pass_to_fail)}
    zorder = {i: n for n, i in enumerate(zt)}
    return sorted(new_p2f, key=order.__getitem__), dict(sorted(new_zt.items(), key=lambda kv: zorder[kv[0]]))


def confirm_cases(pass_to_fail: Sequence[str], zt: Mapping[str, list[str]], reruns: Sequence[RunResult],
                  rerun: RerunFn | None, times: int, pipeline: tuple[bool, bool]) -> Confirmed:
    """Re-check every pass→fail and zero-tolerance case: against the full re-runs when there were
    any, else by ``rerun(ids)`` (at most ``times`` calls, each on the cases still failing).
    Returns new lists; the inputs are not changed."""
    p2f, still = list(pass_to_fail), {k: list(v) for k, v in zt.items()}
    targets = list(dict.fromkeys([*p2f, *still]))
    if not targets or rerun is None or times <= 0 or pipeline == (True, True):
        return Confirmed(p2f, still, [], [])
    if reruns:
        for run in reruns:
            p2f, still = _apply(run, targets, p2f, still)
    else:
        remaining, calls = list(targets), 0
        while remaining and calls < times:
            result = rerun(list(remaining))
            calls += 1
            p2f, still = _apply(result, remaining, p2f, still)
            remaining = [i for i in remaining if i in p2f or i in still]
    return Confirmed(p2f, still, targets, [i for i in targets if i not in p2f and i not in still])

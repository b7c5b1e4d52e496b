"""The gate: compare a candidate RunResult with a baseline and decide pass or fail.

``decide(cfg, baseline, candidate, expected=…)`` is what `rageval gate` and the Action call: it
completes the candidate (a golden case it lacks is a failing case), narrows main's baseline to the
PR's cases, and calls ``verdict_on``, then adds the golden set's own rules
(``rageval.gate.golden_rules``: version discipline, policy drift, leaks).

``verdict_on(baseline, candidate, cfg, rerun=None) -> Verdict`` first re-derives every case verdict
from its checks and every summary from the cases (nothing a results file claims is trusted), then
applies, in this order:

* **comparability** (``rageval.gate.compare``) — no baseline: ``gate.missing_baseline``. After a
  golden-set change, drops, pass→fail and statistics are compared on the cases both sets hold
  unchanged; with too few of those the run is *not comparable* (floors, zero tolerance and the
  errors policy only; blocking with ``gate.not_comparable: fail``). Metrics only one run has, and
  judge metrics under another judge, are reported, not compared.
* **floors, max_drop, significance, slices** (``rageval.gate.thresholds``), with re-runs near a
  threshold (``rageval.gate.confirm``).
* **zero_tolerance** — every case whose check (``numbers``) has status ``fail`` blocks.
* **errors** — cases whose App call errored: ``fail`` blocks and lists them, ``ignore`` lists them.
* **missing cases** — a baseline case that passed and that the candidate did not answer is a
  pass→fail case ("missing in candidate") and blocks.

Pass→fail cases and zero-tolerance failures are confirmed by a re-run unless the pipeline is
deterministic; a case that passes again is flaky. Reasons about cases tagged ``holdout`` never
quote them: they are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rageval.gate import confirm, stats, tables
from rageval.gate.cases import case_diff, case_reasons, known_reason, split_known, zero_tolerance
from rageval.gate.compare import Comparison, case_contents, check_noise, compare
from rageval.gate.golden_rules import with_golden_rules
from rageval.gate.policy import PolicyReport
from rageval.gate.policy import effective as effective_policy
from rageval.gate.thresholds import Context, RerunFn, pipeline_of
from rageval.gate.verdict import ConfigChange, GoldenReport, RankDrop, Reason, Reruns, Statistics, Verdict
from rageval.golden.set import Case
from rageval.metrics.aggregate import recomputed, summarize
from rageval.metrics.registry import metrics_fed_by
from rageval.records import CaseResult, CheckResult
from rageval.results import RunResult
from rageval.settings import Config, GateConfig, SliceGate, flatten


def config_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                files_before: Mapping[str, Mapping[str, str]] | None = None,
                files_after: Mapping[str, Mapping[str, str]] | None = None) -> list[ConfigChange]:
    """Dotted keys whose values differ, sorted (absent -> None); and, when both runs recorded the
    files their config points to (``RunResult.files``), each key whose paths are the same but whose
    content is not: "prompt.j2 content changed"."""
    a, b = flatten(before or {}), flatten(after or {})
    out = [ConfigChange(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    if files_before is not None and files_after is not None:
        for key in sorted(set(files_before) & set(files_after)):
            old, new = files_before[key], files_after[key]
            if a.get(key) == b.get(key) and old.keys() == new.keys() and dict(old) != dict(new):
                changed = ", ".join(p for p in new if old[p] != new[p])
                out.append(ConfigChange(key, a.get(key), b.get(key), note=f"{changed} content changed"))
    return sorted(out, key=lambda d: d.key)


def statistics(baseline: RunResult, candidate: RunResult, cfg: GateConfig, common: list[str],
               compared: Mapping[str, CaseResult] | None = None
               ) -> tuple[dict[str | None, stats.McNemar], dict[str, stats.BootstrapCI]]:
    """McNemar overall (key None) and per gated slice over the baseline's ``compared`` cases (default:
    all); bootstrap CI per summary / gated metric over the ``common`` cases. With
    ``gate.significance`` the CI is at confidence 1 − significance, else 95%."""
    compared = baseline.case_map if compared is None else compared
    before = {i: c.passed for i, c in compared.items()}
    after = {i: c.passed for i, c in candidate.case_map.items()}
    tests: dict[str | None, stats.McNemar] = {None: stats.mcnemar(before, after)}
    for slice_key in cfg.slices:
        ids = [i for i, c in compared.items() if slice_key in c.slice_labels]
        tests[slice_key] = stats.mcnemar({i: before[i] for i in ids}, {i: after[i] for i in ids if i in after})
    names = list(dict.fromkeys([*candidate.summary.metrics, *cfg.floors, *cfg.max_drop]))
    confidence = 1.0 - cfg.significance if cfg.significance is not None else stats.DEFAULT_CONFIDENCE
    return tests, stats.bootstrap_deltas(baseline, candidate, names, ids=common, confidence=confidence)


# --- verdict_on --------------------------------------------------------------------------------

def _recomputing(rerun: RerunFn | None) -> RerunFn | None:
    """Re-runs are judged like the candidate: verdicts from checks, summaries from cases."""
    if rerun is None:
        return None
    return lambda ids: recomputed(rerun(ids))


@dataclass(frozen=True)
class _PerCase:
    pass_to_fail: list[str]
    fail_to_pass: list[str]
    rank_drops: list[RankDrop]
    tests: dict[str | None, stats.McNemar]
    bootstrap: dict[str, stats.BootstrapCI]


def _per_case(baseline: RunResult | None, candidate: RunResult, cmp: Comparison, cfg: GateConfig) -> _PerCase:
    """Pass→fail and fail→pass over the unchanged cases (and passing baseline cases the candidate
    did not answer: missing), rank drops, McNemar and bootstrap over the unchanged cases."""
    if not cmp.comparable or baseline is None:
        return _PerCase([], [], [], {}, {})
    cand = candidate.case_map
    removed, common = set(cmp.removed), set(cmp.common)
    base = {i: c for i, c in baseline.case_map.items() if i in common or (i not in cand and i not in removed)}
    pass_to_fail, fail_to_pass, rank_drops = case_diff(base, cand)
    tests, bootstrap = statistics(baseline, candidate, cfg, list(cmp.common), base)
    return _PerCase(pass_to_fail, fail_to_pass, rank_drops, tests, bootstrap)


def verdict_on(baseline: RunResult | None, candidate: RunResult, cfg: GateConfig,
             rerun: RerunFn | None = None) -> Verdict:
    """Apply the gate (see the module docstring) and return the Verdict. ``rerun`` re-executes
    cases with caches bypassed: ``rerun(None)`` the whole subset, ``rerun(ids)`` those cases.
    Every case verdict is re-derived from its checks and every summary from the cases first."""
    candidate = recomputed(candidate)
    baseline = None if baseline is None else recomputed(baseline)
    return _evaluate(baseline, candidate, cfg, rerun, compare(baseline, candidate, cfg))


def _own_reasons(cfg: GateConfig, baseline: RunResult | None, candidate: RunResult, own: RunResult) -> list[Reason]:
    """Zero tolerance and errors on the cases of the PR's own golden set that main does not have as
    they are (added, or changed): each is new, so each failure blocks."""
    main = case_contents(candidate, snapshot=False)
    mine = case_contents(own, snapshot=False)
    only = {i: c for i, c in own.case_map.items() if main.get(i) != mine.get(i)}
    reasons = case_reasons(cfg, {}, only, zero_tolerance(only, cfg.zero_tolerance), [])
    return [replace(r, message=r.message + OWN_CASE) for r in reasons]


def _evaluate(baseline: RunResult | None, candidate: RunResult, cfg: GateConfig, rerun: RerunFn | None,
              cmp: Comparison, own: RunResult | None = None) -> Verdict:
    """:func:`verdict_on` on runs already re-derived, compared as ``cmp`` says; ``own``: the PR's
    own golden set's run, when ``candidate`` is the PR's pipeline on main's cases (floors, and the
    per-case rules of the cases only the PR has, apply to it)."""
    rerun = _recomputing(rerun)
    cand_cases = candidate.case_map
    base_cases = baseline.case_map if baseline is not None else {}
    per = _per_case(baseline, candidate, cmp, cfg)
    same = set(cmp.common) == set(cand_cases) == set(base_cases)
    skip = (set(baseline.summary.metrics) & set(candidate.summary.metrics)) - cmp.metrics if baseline else set()
    ctx = Context(baseline, candidate, cfg, cmp.comparable, same_cases=same, common=list(cmp.common),
                  pipeline=pipeline_of(candidate), mcnemar_by_slice=per.tests,
                  ci={(None, m): ci for m, ci in per.bootstrap.items()}, skip_drops=frozenset(skip), own=own)
    runs, checks, slice_notes = confirm.aggregate_with_reruns(ctx, rerun)
    new, known = split_known(zero_tolerance(cand_cases, cfg.zero_tolerance), base_cases, set(cmp.common))
    report_known = cfg.known_failures != "block"
    blocking_zt = new if report_known else {i: [*new.get(i, ()), *known.get(i, ())] for i in dict.fromkeys([*new, *known])}
    confirmed = confirm.confirm_cases(per.pass_to_fail, blocking_zt, runs[1:], rerun, cfg.rerun.times, ctx.pipeline)
    reasons = [*cmp.reasons, *(Reason(c.rule, c.message, c.blocking, metric=c.metric, slice=c.slice, value=c.value,
                                      threshold=c.threshold) for c in checks if c.failed), *slice_notes,
               *case_reasons(cfg, base_cases, cand_cases, confirmed.zero_tolerance, confirmed.pass_to_fail,
                             known=None if report_known else known),
               *([known_reason(cfg, cand_cases, known)] if known and report_known else []),
               *(_own_reasons(cfg, baseline, candidate, own) if own is not None else [])]
    verdict = "fail" if any(r.blocking for r in reasons) else "pass"
    state = "not_comparable" if not cmp.comparable else "insufficient_data" if slice_notes else verdict
    metric_rows = tables.metric_rows(ctx, runs, checks, reasons)
    return Verdict(
        verdict=verdict, state=state, comparable=cmp.comparable, reasons=tuple(reasons),
        pass_to_fail=tuple(confirmed.pass_to_fail), fail_to_pass=tuple(per.fail_to_pass), known_failures=tuple(known),
        flaky=tuple(confirmed.flaky), rank_drops=tuple(per.rank_drops),
        config_diff=tuple(config_diff(baseline.config, candidate.config, baseline.files, candidate.files))
        if baseline is not None else (),
        reran=Reruns(tuple(confirmed.rechecked), len(runs) > 1, confirm.rerun_values(runs, checks)),
        stats=Statistics(per.tests.get(None), per.bootstrap),
        metrics=tuple(metric_rows), by_slice=tuple(tables.slice_rows(ctx, runs, checks, reasons)),
        cases_added=tuple(i for i in cand_cases if baseline is not None and i not in base_cases),
        cases_removed=tuple(i for i in base_cases if i not in cand_cases),
        golden=GoldenReport(candidate.golden.name, None if baseline is None else baseline.golden.version,
                            candidate.golden.version, len(cmp.common)),
        noise=tables.noise_rows(ctx, [row.metric for row in metric_rows]))


# --- the decision as `rageval gate` and the Action make it ------------------------------------

def without_judge(cfg: GateConfig) -> GateConfig:
    """``cfg`` minus every threshold on the judge's verdict metric (judge_pass; overall and per slice)."""
    verdicts = set(metrics_fed_by("judge"))

    def drop(thresholds: Mapping[str, float]) -> dict[str, float]:
        return {k: v for k, v in thresholds.items() if k not in verdicts}
    return replace(cfg, floors=drop(cfg.floors), max_drop=drop(cfg.max_drop),
                   slices={k: SliceGate(drop(s.floors), drop(s.max_drop)) for k, s in cfg.slices.items()})


def narrow_baseline(baseline: RunResult, case_ids: Sequence[str]) -> RunResult:
    """The baseline restricted to ``case_ids`` (the candidate's subset), summary recomputed.

    A PR runs the ``pr`` subset while main's baseline covers the whole golden set; the gate counts
    a baseline case the candidate did not answer as pass→fail, so the cases outside the subset
    are dropped first. Cases of the subset that the candidate failed to answer still count.
    """
    wanted = set(case_ids)
    if all(c.id in wanted for c in baseline.cases):
        return baseline
    kept = tuple(c for c in baseline.cases if c.id in wanted)
    return baseline.replace(cases=kept, summary=summarize(kept, baseline.metric_names),
                            golden=replace(baseline.golden, narrowed_to=len(kept)))


MSG_MOSTLY_ERRORS = "{n} of {total} cases errored: {error} (the first: {which}; gate.errors: {policy})"
OWN_CASE = " (a case as this PR's golden set has it)"
MSG_MAIN_CASES = ("this PR changes {what} of main's {n} cases in its golden set: drops, pass→fail and zero tolerance "
                  "are compared on main's {n} cases as main asks them, run with this PR's pipeline; floors apply to "
                  "the PR's {k} cases")
MSG_UNANSWERED = "the candidate has no result for this case (it is in the golden set the PR runs)"


def completed(candidate: RunResult, expected: Sequence[Case]) -> RunResult:
    """``candidate`` plus a failing case for every expected golden case it lacks: a case the
    candidate does not answer is a failure — and retrieved nothing (every retrieval metric 0) —
    never a case less."""
    have = candidate.case_map
    missing = [CaseResult(id=c.id, question=c.question, expected_answer=c.expected_answer,
                          expected_sections=tuple(c.expected_sections), slice=dict(c.slice), tags=tuple(c.tags),
                          out_of_scope=c.out_of_scope, retrieved=(),
                          metrics={m: 0.0 for m in candidate.metric_names} if c.expected_sections else {},
                          checks={"answered": CheckResult.fail(MSG_UNANSWERED)})
               for c in expected if c.id not in have]
    if not missing:
        return candidate
    return candidate.replace(cases=candidate.cases + tuple(missing))


@dataclass(frozen=True)
class Decision:
    """The verdict, and the two runs exactly as compared (completed, narrowed, re-derived)."""

    verdict: Verdict
    baseline: RunResult | None
    candidate: RunResult
    compared: tuple[str, ...]            # the unchanged cases both runs answered: the ones compared


def decide(cfg: Config, baseline: RunResult | None, candidate: RunResult, *, expected: Sequence[Case],
           rerun: RerunFn | None = None, gate_judge: bool = True, known_failures: str = "report",
           own: RunResult | None = None, own_expected: Sequence[Case] = (), changed: int = 0) -> Decision:
    """Gate ``candidate`` the way both `rageval gate` and the Action do.

    The policy is the stricter of main's (recorded in ``baseline``) and the PR's, key by key
    (``rageval.gate.policy``); ``known_failures`` is the mode's default for
    ``gate.known_failures``. ``expected`` are the golden cases ``candidate`` runs: any it lacks
    count as failing cases, and main's baseline (which may cover the whole golden set) is narrowed
    to them. When the PR's golden set changed ``changed`` of main's cases, ``candidate`` is the PR's
    pipeline on main's cases (``expected`` = main's subset, from the baseline's snapshot) and ``own``
    the run of the PR's own set (``own_expected``): floors, the golden set's rules and the per-case
    rules of the cases only the PR has apply to ``own``. Verdicts are re-derived from the checks and
    summaries from the cases. ``gate_judge=False`` leaves judge_pass ungated (the judge's measured
    agreement is too low).
    """
    if baseline is not None:
        check_noise(baseline)
    policy = effective_policy(cfg, baseline, known_failures=known_failures)
    cfg = policy.applied_to(cfg)
    ids = [c.id for c in expected]
    candidate = recomputed(completed(candidate, expected))
    own = None if own is None else recomputed(completed(own, own_expected))
    if baseline is not None:
        baseline = recomputed(narrow_baseline(baseline, ids))
    gate_cfg = cfg.gate if gate_judge else without_judge(cfg.gate)
    cmp = compare(baseline, candidate, gate_cfg)
    if own is not None:
        cmp = replace(cmp, reasons=(Reason("golden_changes", MSG_MAIN_CASES.format(
            what=changed, n=len(candidate.cases), k=len(own.cases)), False, value=changed), *cmp.reasons))
    verdict = _evaluate(baseline, candidate, gate_cfg, rerun, cmp, own)
    if own is not None:       # the PR's golden set is its own, whatever main's cases were run
        verdict = replace(verdict, golden=replace(verdict.golden, candidate_version=own.golden.version))
    verdict = with_policy(with_golden_rules(verdict, cfg, baseline, own or candidate), policy.report)
    return Decision(errors_first(verdict, own or candidate, cfg), baseline, candidate, cmp.common)


def errors_first(verdict: Verdict, candidate: RunResult, cfg: Config) -> Verdict:
    """When more than ``max_error_rate`` of the cases errored, the errors are the headline, with the
    first error's text (a floor on "n/a" is a symptom; the app crashing is the cause)."""
    errored = [c for c in candidate.cases if c.error]
    if not candidate.cases or len(errored) / len(candidate.cases) <= cfg.run.max_error_rate:
        return verdict
    first = next((r for r in verdict.reasons if r.rule == "errors"), None)
    if first is None:
        return verdict
    case = errored[0]
    head = replace(first, message=MSG_MOSTLY_ERRORS.format(
        n=len(errored), total=len(candidate.cases), error=case.error,
        which="a holdout case" if case.holdout else case.id, policy=cfg.gate.errors))
    return replace(verdict, reasons=(head, *(r for r in verdict.reasons if r is not first)))


def with_policy(verdict: Verdict, report: PolicyReport) -> Verdict:
    """``verdict`` with the policy report, its reason first: main's policy unreadable blocks; a
    loosened policy is said (main's values applied)."""
    first = []
    if report.unreadable:
        first.append(Reason("policy_unreadable", report.unreadable, True))
    if report.message:
        first.append(Reason("policy_loosened", report.message, False,
                            value=tuple(c.key for c in report.loosened)))
    reasons = (*first, *verdict.reasons)
    blocked = any(r.blocking for r in reasons)
    state = "fail" if blocked and verdict.state == "pass" else verdict.state
    return replace(verdict, reasons=reasons, verdict="fail" if blocked else "pass", state=state, policy=report)

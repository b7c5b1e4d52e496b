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
from rageval.gate.compare import Comparison, compare
from rageval.gate.golden_rules import with_golden_rules
from rageval.gate.thresholds import Context, RerunFn, pipeline_of
from rageval.gate.verdict import ConfigChange, GoldenReport, RankDrop, Reason, Reruns, Statistics, Verdict
from rageval.golden.set import Case
from rageval.metrics.aggregate import recomputed, summarize
from rageval.metrics.registry import metrics_fed_by
from rageval.records import CaseResult, CheckResult
from rageval.results import RunResult
from rageval.settings import Config, GateConfig, SliceGate

MAX_IDS_IN_MESSAGE = 10

MSG_ERRORS = "{n} case{s} errored: {ids} (gate.errors: {policy})"
MSG_MISSING = "{ids} passed in the baseline and {verb} missing in the candidate"
MSG_ZT_HOLDOUT = "{check}: {n} holdout case{s} fail{v} the rule (details hidden)"


# --- small helpers ---------------------------------------------------------------------------

def id_list(ids: Sequence[str], hidden: int = 0) -> str:
    """``q1, q2 and 3 more and 1 holdout case``: at most MAX_IDS_IN_MESSAGE ids by name."""
    shown = list(ids[:MAX_IDS_IN_MESSAGE])
    text = ", ".join(shown)
    if len(ids) > len(shown):
        text += f" and {len(ids) - len(shown)} more"
    if hidden:
        text += (" and " if text else "") + f"{hidden} holdout case{'s' if hidden != 1 else ''}"
    return text


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"chunking": {"size": 200}}`` -> ``{"chunking.size": 200}``; lists are leaf values."""
    out: dict[str, Any] = {}
    if isinstance(config, Mapping) and (config or not prefix):
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    else:
        out[prefix] = config
    return out


def config_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[ConfigChange]:
    """Dotted keys whose values differ, sorted (absent -> None)."""
    a, b = flatten(before or {}), flatten(after or {})
    return [ConfigChange(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _rank_worse(before: int | None, after: int | None) -> bool:
    """None means "not retrieved", worse than any rank."""
    if after is None:
        return before is not None
    return before is not None and after > before


# --- case decisions --------------------------------------------------------------------------

def _numbers_message(check_name: str, case_id: str, case: CaseResult) -> str:
    check = case.checks[check_name]
    parts = []
    if check.details.get("missing"):
        parts.append("missing " + ", ".join(str(x) for x in check.details["missing"]))
    if check.details.get("outside_source"):
        parts.append("outside source " + ", ".join(str(x) for x in check.details["outside_source"]))
    detail = "; ".join(parts) or check.reason or "failed"
    return f"{check_name} {case_id}: {detail}"


def case_diff(base_cases: Mapping[str, CaseResult], cand_cases: Mapping[str, CaseResult]
              ) -> tuple[list[str], list[str], list[RankDrop]]:
    """(pass→fail ids incl. passing cases missing in the candidate, fail→pass ids, rank drops)."""
    pass_to_fail, fail_to_pass, rank_drops = [], [], []
    for case_id, before in base_cases.items():
        after = cand_cases.get(case_id)
        if before.passed is True and (after is None or after.passed is False):
            pass_to_fail.append(case_id)
        elif before.passed is False and after is not None and after.passed is True:
            fail_to_pass.append(case_id)
        if after is not None and _rank_worse(before.first_relevant_rank, after.first_relevant_rank):
            rank_drops.append(RankDrop(case_id, before.first_relevant_rank, after.first_relevant_rank))
    order = {case_id: n for n, case_id in enumerate(cand_cases)}
    rank_drops.sort(key=lambda r: order[r.id])
    return pass_to_fail, fail_to_pass, rank_drops


def statistics(baseline: RunResult, candidate: RunResult, cfg: GateConfig, common: list[str]
               ) -> tuple[dict[str | None, stats.McNemar], dict[str, stats.BootstrapCI]]:
    """McNemar overall (key None) and per gated slice; bootstrap CI per summary / gated metric.
    With ``gate.significance`` the CI is at confidence 1 − significance, else 95%."""
    before = {i: c.passed for i, c in baseline.case_map.items()}
    after = {i: c.passed for i, c in candidate.case_map.items()}
    tests: dict[str | None, stats.McNemar] = {None: stats.mcnemar(before, after)}
    for slice_key in cfg.slices:
        ids = [i for i, c in baseline.case_map.items() if slice_key in c.slice_labels]
        tests[slice_key] = stats.mcnemar({i: before[i] for i in ids}, {i: after[i] for i in ids if i in after})
    names = list(dict.fromkeys([*candidate.summary.metrics, *cfg.floors, *cfg.max_drop]))
    confidence = 1.0 - cfg.significance if cfg.significance is not None else stats.DEFAULT_CONFIDENCE
    return tests, stats.bootstrap_deltas(baseline, candidate, names, ids=common, confidence=confidence)


def zero_tolerance(cases: Mapping[str, CaseResult], names: Sequence[str]) -> dict[str, list[str]]:
    """Case id -> the zero-tolerance checks it fails."""
    out: dict[str, list[str]] = {}
    for case_id, case in cases.items():
        failing = [n for n in names if case.status(n) == "fail"]
        if failing:
            out[case_id] = failing
    return out


def case_reasons(cfg: GateConfig, base_cases: Mapping[str, CaseResult], cand_cases: Mapping[str, CaseResult],
                 zt: Mapping[str, list[str]], pass_to_fail: Sequence[str]) -> list[Reason]:
    """Zero-tolerance (holdout cases counted, never described), errors, missing cases."""
    reasons: list[Reason] = []
    hidden: dict[str, int] = {}
    for case_id, names in zt.items():
        case = cand_cases[case_id]
        for name in names:
            if case.holdout:
                hidden[name] = hidden.get(name, 0) + 1
                continue
            reasons.append(Reason("zero_tolerance", _numbers_message(name, case_id, case), True,
                                  metric=name, case=case_id))
    for name, n in hidden.items():
        reasons.append(Reason("zero_tolerance", MSG_ZT_HOLDOUT.format(
            check=name, n=n, s="s" if n != 1 else "", v="" if n != 1 else "s"), True, metric=name, value=n))
    errored = [i for i, c in cand_cases.items() if c.error]
    if errored:
        shown = [i for i in errored if not cand_cases[i].holdout]
        reasons.append(Reason("errors", MSG_ERRORS.format(
            n=len(errored), s="s" if len(errored) != 1 else "", ids=id_list(shown, len(errored) - len(shown)),
            policy=cfg.errors), cfg.errors == "fail", value=len(errored)))
    missing = [i for i in pass_to_fail if i not in cand_cases]
    if missing:
        shown = [i for i in missing if not base_cases[i].holdout]
        reasons.append(Reason("missing_cases", MSG_MISSING.format(
            ids=id_list(shown, len(missing) - len(shown)), verb="are" if len(missing) != 1 else "is"),
            True, value=len(missing)))
    return reasons


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
    tests, bootstrap = statistics(baseline.replace(cases=tuple(base.values())), candidate, cfg, list(cmp.common))
    return _PerCase(pass_to_fail, fail_to_pass, rank_drops, tests, bootstrap)


def verdict_on(baseline: RunResult | None, candidate: RunResult, cfg: GateConfig,
             rerun: RerunFn | None = None) -> Verdict:
    """Apply the gate (see the module docstring) and return the Verdict. ``rerun`` re-executes
    cases with caches bypassed: ``rerun(None)`` the whole subset, ``rerun(ids)`` those cases.
    Every case verdict is re-derived from its checks and every summary from the cases first."""
    candidate = recomputed(candidate)
    baseline = None if baseline is None else recomputed(baseline)
    return _evaluate(baseline, candidate, cfg, rerun, compare(baseline, candidate, cfg))


def _evaluate(baseline: RunResult | None, candidate: RunResult, cfg: GateConfig, rerun: RerunFn | None,
              cmp: Comparison) -> Verdict:
    """:func:`verdict_on` on runs already re-derived, compared as ``cmp`` says."""
    rerun = _recomputing(rerun)
    cand_cases = candidate.case_map
    base_cases = baseline.case_map if baseline is not None else {}
    per = _per_case(baseline, candidate, cmp, cfg)
    same = set(cmp.common) == set(cand_cases) == set(base_cases)
    skip = (set(baseline.summary.metrics) & set(candidate.summary.metrics)) - cmp.metrics if baseline else set()
    ctx = Context(baseline, candidate, cfg, cmp.comparable, same_cases=same, common=list(cmp.common),
                  pipeline=pipeline_of(candidate), mcnemar_by_slice=per.tests,
                  ci={(None, m): ci for m, ci in per.bootstrap.items()}, skip_drops=frozenset(skip))
    runs, checks, slice_notes = confirm.aggregate_with_reruns(ctx, rerun)
    zt = zero_tolerance(cand_cases, cfg.zero_tolerance)
    confirmed = confirm.confirm_cases(per.pass_to_fail, zt, runs[1:], rerun, cfg.rerun.times, ctx.pipeline)
    reasons = [*cmp.reasons, *(Reason(c.rule, c.message, c.blocking, metric=c.metric, slice=c.slice, value=c.value,
                                      threshold=c.threshold) for c in checks if c.failed), *slice_notes,
               *case_reasons(cfg, base_cases, cand_cases, confirmed.zero_tolerance, confirmed.pass_to_fail)]
    verdict = "fail" if any(r.blocking for r in reasons) else "pass"
    state = "not_comparable" if not cmp.comparable else "insufficient_data" if slice_notes else verdict
    metric_rows = tables.metric_rows(ctx, runs, checks, reasons)
    return Verdict(
        verdict=verdict, state=state, comparable=cmp.comparable, reasons=tuple(reasons),
        pass_to_fail=tuple(confirmed.pass_to_fail), fail_to_pass=tuple(per.fail_to_pass),
        flaky=tuple(confirmed.flaky), rank_drops=tuple(per.rank_drops),
        config_diff=tuple(config_diff(baseline.config, candidate.config)) if baseline is not None else (),
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
           rerun: RerunFn | None = None, gate_judge: bool = True) -> Decision:
    """Gate ``candidate`` the way both `rageval gate` and the Action do.

    ``expected`` are the golden cases the PR runs: any the candidate lacks count as failing cases,
    and main's baseline (which may cover the whole golden set) is narrowed to them. Verdicts are
    re-derived from the checks and summaries from the cases. ``gate_judge=False`` leaves
    judge_pass ungated (the judge's measured agreement is too low).
    """
    ids = [c.id for c in expected]
    candidate = recomputed(completed(candidate, expected))
    if baseline is not None:
        baseline = recomputed(narrow_baseline(baseline, ids))
    gate_cfg = cfg.gate if gate_judge else without_judge(cfg.gate)
    cmp = compare(baseline, candidate, gate_cfg)
    verdict = _evaluate(baseline, candidate, gate_cfg, rerun, cmp)
    return Decision(with_golden_rules(verdict, cfg, baseline, candidate), baseline, candidate, cmp.common)

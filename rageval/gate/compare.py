"""What a candidate can be compared with its baseline on: the cases both golden sets hold unchanged,
the metrics both runs measure, and judge metrics only under the same evaluator.

A golden-set version bump (cases added, removed or edited) does not switch the comparison off: it
runs on the cases that are unchanged between the two sets — same id and same content (question,
expected sections, expected answer, required and forbidden phrases, out-of-scope) — with the
others listed. Only when fewer than ``gate.min_common_cases`` unchanged cases remain, or fewer
than half of the PR's cases, is the run *not comparable* (floors and zero tolerance only; said in
the verdict's title; blocking with ``gate.not_comparable: fail``). A metric only one run has (a
new ``k``) is reported, not compared; judge-based metrics are compared only when both runs used
the same judge (:func:`judge_identity`: the model the endpoint *served* — ``gpt-4o`` and
``gpt-4o-2024-05-13`` are two judges when the endpoint says so — the prompt version, the
temperature and how faithfulness was scored). When the judge changed, or main's baseline had none,
the judge metrics are shown, not compared, and their floors are shown, not gated
(``rageval.gate.thresholds``), until main's baseline uses the same judge.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rageval.errors import BaselineError
from rageval.gate import stats
from rageval.gate.verdict import Reason
from rageval.metrics.judge import judge_signature
from rageval.metrics.registry import judged_metric_names
from rageval.records import FAIL, PASS
from rageval.results import RunResult
from rageval.settings import GateConfig

#: what a case asks and expects: two cases with the same id and these values are the same case
IDENTITY = ("question", "expected_sections", "grades", "expected_answer", "must_include", "must_not_include",
            "out_of_scope")

MSG_NO_BASELINE = ("no baseline RunResult was given (`rageval gate --baseline`, or main's baseline artifact in the "
                   "action); floors and zero-tolerance only (gate.missing_baseline: floors_only)")
MSG_SIGMA_DETERMINISTIC = " in a deterministic pipeline, whose repeats are identical"
MSG_SIGMA_ONE_RUN = " from 1 run: one run measures no noise"
MSG_SIGMA_RUNS = " is not what its {n} recorded runs give ({got})"
TIP_NOISE = "The baseline was edited or is corrupt: re-create it on main with `rageval baseline`."
MSG_OTHER_PROJECT = ("the baseline is another project's (golden set '{before}', not '{after}'): gate against a "
                     "baseline of '{after}' from this repository's main")
MSG_NO_CASES = ("the baseline holds none of the PR's {n} cases, so nothing can be compared; re-create it on main "
                "(`rageval baseline`) with the golden set this PR runs")
MSG_NO_BASELINE_FAIL = "no baseline RunResult and gate.missing_baseline is 'fail'"
MSG_TOO_FEW = ("only {n} of the PR's {total} cases are unchanged since the baseline (golden set v{before} → "
               "v{after}: {what}); at least {need} are needed to compare (gate.min_common_cases {min}, and half "
               "of the PR's cases), so only floors and zero-tolerance apply")
MSG_COMMON = ("golden set v{before} → v{after}: {what}; drops, pass→fail cases and statistics are compared on the "
              "{n} unchanged cases, floors on all {total}")
MSG_METRICS = "metrics {which}; compared: the {n} metrics both runs have"
MSG_JUDGE = ("{metrics} shown but not compared: the judge changed ({before} → {after}); scores from two "
             "different evaluators are not comparable, so their floors are shown, not gated, until main's baseline "
             "uses this judge")
MSG_JUDGE_NEW = ("{metrics} shown but not compared: main's baseline has no judge and this run is judged by {after}; "
                 "their floors are shown, not gated, until main's baseline uses this judge")
JUDGE_CHECKS = ("judge", "faithfulness")


@dataclass(frozen=True)
class Comparison:
    """The outcome: whether the runs compare, on which cases and which metrics, and why."""

    comparable: bool
    common: tuple[str, ...]            # unchanged case ids both runs answered, in the candidate's order
    added: tuple[str, ...]             # candidate cases the baseline's golden set did not have
    changed: tuple[str, ...]           # same id, different content
    removed: tuple[str, ...]           # baseline cases the PR's golden set no longer has
    metrics: frozenset[str]            # summary metrics compared
    reasons: tuple[Reason, ...]


def identity(fields: Mapping[str, Any]) -> str:
    data = {k: fields.get(k) or None for k in IDENTITY}
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def case_fields(run: RunResult, *, snapshot: bool) -> Mapping[str, Mapping[str, Any]]:
    """Case id -> what the case asks and expects: from the golden snapshot when ``snapshot`` (both
    runs carry one), else from the cases the run answered."""
    if snapshot and run.golden.cases is not None:
        return run.golden.cases
    return {c.id: {"question": c.question, "expected_sections": list(c.expected_sections),
                   "expected_answer": c.expected_answer, "out_of_scope": c.out_of_scope} for c in run.cases}


def case_contents(run: RunResult, *, snapshot: bool) -> dict[str, str]:
    """Case id -> fingerprint of what the case asks and expects (:func:`case_fields`)."""
    return {i: identity(c) for i, c in case_fields(run, snapshot=snapshot).items()}


def _same(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]], case_id: str) -> bool:
    """Whether the case asks and expects the same in both (absent from both: the same); equal
    fields need no fingerprint."""
    a, b = before.get(case_id), after.get(case_id)
    if a is None or b is None:
        return a is b
    return a == b or identity(a) == identity(b)


def _what_changed(added: tuple[str, ...], changed: tuple[str, ...], removed: tuple[str, ...]) -> str:
    parts = [f"{len(ids)} {word}" for ids, word in ((added, "added"), (changed, "changed"), (removed, "removed")) if ids]
    return ", ".join(parts) or "no case changed"


def _metrics(baseline: RunResult, candidate: RunResult) -> tuple[frozenset[str], list[Reason]]:
    """The summary metrics both runs have, judge metrics only under the same judge; a note on the rest."""
    reasons = []
    base, cand = set(baseline.summary.metrics), set(candidate.summary.metrics)
    new = [m for m in candidate.metric_names if m not in baseline.metric_names]
    gone = [m for m in baseline.metric_names if m not in candidate.metric_names]
    compared = base & cand
    if new or gone:
        which = "; ".join(p for p in (f"new in this PR, not compared: {', '.join(new)}" if new else "",
                                       f"no longer measured: {', '.join(gone)}" if gone else "") if p)
        reasons.append(Reason("metrics_compared", MSG_METRICS.format(which=which, n=len(compared - set(gone))), False,
                              value=new, threshold=gone))
    before, after = judge_identity(baseline), judge_identity(candidate)
    if before != after and after is not None:
        judged = [m for m in judged_metric_names() if m in compared and any(
            r.summary.value(m) is not None for r in (baseline, candidate))]
        compared -= set(judged_metric_names())
        if judged:
            message = (MSG_JUDGE_NEW.format(metrics=", ".join(judged), after=_judge_label(after)) if before is None
                       else MSG_JUDGE.format(metrics=", ".join(judged), before=_judge_label(before),
                                             after=_judge_label(after)))
            reasons.append(Reason("judge_changed", message, False))
    return frozenset(compared), reasons


def judge_identity(run: RunResult) -> dict[str, Any] | None:
    """Which judge judged ``run``: its ``judge_signature`` with ``model`` replaced by the models the
    endpoint said served the judge calls (the cases' judge and faithfulness checks record them),
    sorted; the configured name as written when no case was judged. None when no judge ran."""
    signature = judge_signature(run.config)
    if signature is None:
        return None
    served = sorted({str(check.details["model"]) for case in run.cases for name in JUDGE_CHECKS
                     if (check := case.checks.get(name)) is not None and check.status in (PASS, FAIL)
                     and isinstance(check.details.get("model"), str) and check.details["model"]})
    configured = str(run.config["judge"]["model"]).strip().casefold()
    return {**signature, "model": tuple(served) or (configured,)}


def _judge_label(signature: Mapping[str, Any]) -> str:
    label = " + ".join(signature["model"])
    if signature.get("prompt_version"):
        label += f" prompt v{signature['prompt_version']}"
    if signature.get("temperature"):
        label += f" at temperature {signature['temperature']:g}"
    if signature.get("faithfulness"):
        label += f" + faithfulness ({signature.get('faithfulness_calls')} calls)"
    return label + ("" if signature.get("always") else ", rules first")


def check_noise(baseline: RunResult) -> None:
    """A baseline's noise is believed only if its runs could give it: no σ from one run or from a
    deterministic pipeline, and σ equal to what the recorded runs give (a σ of 0.5 on a rate would
    widen its tolerance to 1.0, so every drop would pass). BaselineError naming the file otherwise."""
    noise = baseline.noise
    if noise is None:
        return
    where = baseline.source or "the baseline"
    recorded = stats.sigma_over_runs(list(noise.runs)) if len(noise.runs) >= 2 else None
    for metric, sigma in noise.sigma.items():
        problem = None
        if sigma and noise.deterministic:
            problem = MSG_SIGMA_DETERMINISTIC
        elif sigma and noise.runs_executed < 2:
            problem = MSG_SIGMA_ONE_RUN
        elif recorded is not None and abs(recorded.get(metric, 0.0) - sigma) > 1e-6:
            problem = MSG_SIGMA_RUNS.format(n=len(noise.runs), got=f"{recorded.get(metric, 0.0):g}")
        if problem:
            raise BaselineError(f"{where}: noise: σ {sigma:g} of {metric}{problem}. {TIP_NOISE}")


def _not_comparable(cfg: GateConfig, message: str, **values: Any) -> Comparison:
    return Comparison(False, (), (), (), (), frozenset(), (Reason(
        "not_comparable", message, cfg.not_comparable == "fail", **values),))


def compare(baseline: RunResult | None, candidate: RunResult, cfg: GateConfig) -> Comparison:
    """Decide what the two runs compare on (see the module docstring)."""
    if baseline is None:
        blocking = cfg.missing_baseline == "fail"
        return Comparison(False, (), (), (), (), frozenset(), (Reason(
            "missing_baseline", MSG_NO_BASELINE_FAIL if blocking else MSG_NO_BASELINE, blocking),))
    if baseline.golden.name != candidate.golden.name:
        return _not_comparable(cfg, MSG_OTHER_PROJECT.format(before=baseline.golden.name, after=candidate.golden.name))
    if not baseline.cases:
        return _not_comparable(cfg, MSG_NO_CASES.format(n=len(candidate.cases)))
    snapshot = baseline.golden.cases is not None and candidate.golden.cases is not None
    before, after = case_fields(baseline, snapshot=snapshot), case_fields(candidate, snapshot=snapshot)
    answered = baseline.case_map
    same = {i for i in candidate.case_map if _same(before, after, i)}
    common = tuple(i for i in candidate.case_map if i in answered and i in same)
    added = tuple(i for i in candidate.case_map if i not in before)
    changed = tuple(i for i in candidate.case_map if i in before and i in after and i not in same)
    removed = tuple(i for i in answered if snapshot and i not in after)
    metrics, reasons = _metrics(baseline, candidate)
    versions = {"before": baseline.golden.version, "after": candidate.golden.version}
    what = _what_changed(added, changed, removed)
    # the golden set changed when its version did or its snapshots differ; a version bump alone
    # (no case changed) changes nothing, and without snapshots a run's cases are compared by id
    golden_changed = (added or changed or removed) and (
        snapshot or baseline.golden.version != candidate.golden.version)
    if not golden_changed:
        return Comparison(True, common, added, changed, removed, metrics, tuple(reasons))
    total = len(candidate.cases)
    need = max(cfg.min_common_cases, -(-total // 2))
    if len(common) < need:
        blocking = cfg.not_comparable == "fail"
        reasons.insert(0, Reason("not_comparable", MSG_TOO_FEW.format(
            n=len(common), total=total, what=what, need=need, min=cfg.min_common_cases, **versions), blocking,
            value=len(common), threshold=need))
        return Comparison(False, common, added, changed, removed, metrics, tuple(reasons))
    reasons.insert(0, Reason("golden_changes", MSG_COMMON.format(what=what, n=len(common), total=total, **versions),
                             False, value=len(common)))
    return Comparison(True, common, added, changed, removed, metrics, tuple(reasons))

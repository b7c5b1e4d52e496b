"""The golden set's own rules in the gate, from the snapshots both RunResults carry
(``rageval/golden/lifecycle.py``): **policy drift** — a source section no longer states a number
a case still expects (``golden_checks.policy_drift``: block / warn / off); **leaks** of golden
questions into the prompt, few-shot files or corpus (``golden_checks.leaks``: warn / fail / off);
and **version discipline** (cases changed without a version bump, an id reused for another
question). ``verdict.golden`` (a :class:`GoldenReport`) also carries the golden diff (cases added /
removed / changed, the changelog line) and coverage for the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rageval.files import Reader
from rageval.gate.verdict import GoldenReport, Reason, Verdict
from rageval.golden import lifecycle
from rageval.golden.lifecycle import Coverage, Leak, SectionChange
from rageval.results import RunResult
from rageval.settings import Config


def _version_reasons(baseline: RunResult, candidate: RunResult) -> list[Reason]:
    before = lifecycle.reference_from_result(baseline.golden, "the baseline")
    after = lifecycle.reference_from_result(candidate.golden, "this PR")
    if before is None or after is None:
        return []
    where = candidate.golden.path or "golden set"
    return [Reason("golden_version", message, True) for message in [
        *lifecycle.version_problems(before, after, where, quote=False),
        *lifecycle.reused_ids([before], after, where, quote=False)]]


def _drift(cfg: Config, baseline: RunResult | None, candidate: RunResult) -> tuple[list[Reason], list[SectionChange]]:
    mode = cfg.golden_checks.policy_drift
    cand_cases = candidate.golden.cases
    base_sections = ((baseline.corpus or {}) if baseline is not None else {}).get("sections")
    cand_sections = (candidate.corpus or {}).get("sections")
    if mode == "off" or cand_cases is None or base_sections is None or cand_sections is None:
        return [], []
    changes, drifts = lifecycle.policy_drift(base_sections, cand_sections, cand_cases)
    return [Reason("policy_drift", message, mode == "block", slice=section, value=names)
            for section, message, names in lifecycle.drift_messages(drifts)], list(changes)


def _audit(candidate: RunResult, where: str) -> tuple[tuple[Leak, ...], Coverage | None]:
    """The leaks and coverage the candidate's run recorded (``golden_checks``), read strictly."""
    audit = candidate.golden_checks or {}
    r = Reader(where)
    leaks = tuple(Leak.from_dict(x, f"golden_checks.leaks[{i}]", r)
                  for i, x in enumerate(r.lst(audit.get("leaks") or [], "golden_checks.leaks")))
    coverage = audit.get("coverage")
    return leaks, None if coverage is None else Coverage.from_dict(coverage, "golden_checks.coverage", r)


def _leaks(cfg: Config, leaks: Sequence[Leak]) -> list[Reason]:
    if cfg.golden_checks.leaks == "off":
        return []
    return [Reason("leak", x.message(), cfg.golden_checks.leaks == "fail", case=None if x.holdout else x.case,
                   value=x.overlap) for x in leaks]


def golden_reasons(cfg: Config, baseline: RunResult | None, candidate: RunResult,
                   report: GoldenReport) -> tuple[list[Reason], GoldenReport]:
    """Reasons from version discipline, policy drift and leaks, and ``report`` with what the
    comment shows about the golden set: the diff (None when the baseline has no golden snapshot),
    the changelog line, sections whose numbers changed, leaks, coverage."""
    reasons: list[Reason] = []
    diff = None
    if baseline is not None and candidate.golden.cases is not None and baseline.golden.cases is not None:
        diff = lifecycle.golden_diff(baseline.golden.cases, candidate.golden.cases)
        reasons += _version_reasons(baseline, candidate)
    drift, section_changes = _drift(cfg, baseline, candidate)
    leaks, coverage = _audit(candidate, "the candidate RunResult")
    reasons += drift + _leaks(cfg, leaks)
    return reasons, replace(report, diff=diff, changelog=candidate.golden.changelog or "",
                            section_changes=tuple(section_changes),
                            leaks=leaks if cfg.golden_checks.leaks != "off" else (), coverage=coverage)


def with_golden_rules(verdict: Verdict, cfg: Config, baseline: RunResult | None, candidate: RunResult) -> Verdict:
    """``verdict`` plus the golden set's rules: blocking ones turn it to fail."""
    extra, golden = golden_reasons(cfg, baseline, candidate, verdict.golden)
    reasons = tuple(verdict.reasons) + tuple(extra)
    blocked = any(r.blocking for r in reasons)
    state = "fail" if blocked and verdict.state == "pass" else verdict.state
    return replace(verdict, reasons=reasons, verdict="fail" if blocked else "pass", state=state, golden=golden)

"""The golden set's own rules in the gate, from the snapshots both RunResults carry
(``rageval/golden/lifecycle.py``): **policy drift** — a source section no longer states a number
a case still expects (``golden_checks.policy_drift``: block / warn / off); **leaks** of golden
questions into the prompt, few-shot files or corpus (``golden_checks.leaks``: warn / fail / off);
and **version discipline** (cases changed without a version bump, an id reused for another
question). ``verdict.golden`` also carries the golden diff (cases added / removed / changed, the
changelog line) and coverage for the report."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rageval.config import Config
from rageval.gate.verdict import Reason, Verdict, freeze, thaw
from rageval.golden import lifecycle
from rageval.results import RunResult


def _version_reasons(baseline: RunResult, candidate: RunResult) -> list[Reason]:
    before = lifecycle.reference_from_result(baseline.golden, "the baseline")
    after = lifecycle.reference_from_result(candidate.golden, "this PR")
    if before is None or after is None:
        return []
    where = candidate.golden.path or "golden set"
    return [Reason("golden_version", message, True) for message in [
        *lifecycle.version_problems(before, after, where, quote=False),
        *lifecycle.reused_ids([before], after, where, quote=False)]]


def _drift(cfg: Config, baseline: RunResult | None, candidate: RunResult, info: dict[str, Any]) -> list[Reason]:
    mode = cfg.golden_checks.policy_drift
    cand_cases = candidate.golden.cases
    base_sections = ((baseline.corpus or {}) if baseline is not None else {}).get("sections")
    cand_sections = (candidate.corpus or {}).get("sections")
    if mode == "off" or cand_cases is None or base_sections is None or cand_sections is None:
        return []
    changes, drifts = lifecycle.policy_drift(base_sections, cand_sections, cand_cases)
    info["section_changes"] = [{"section": c.section, "removed": list(c.removed), "added": list(c.added),
                                "cases": list(c.cases)} for c in changes]
    return [Reason("policy_drift", message, mode == "block", slice=section, value=names)
            for section, message, names in lifecycle.drift_messages(drifts)]


def _leaks(cfg: Config, candidate: RunResult, info: dict[str, Any]) -> list[Reason]:
    leaks = (candidate.golden_checks or {}).get("leaks") or []
    if cfg.golden_checks.leaks == "off":
        return []
    info["leaks"] = leaks
    return [Reason("leak", lifecycle.Leak(x.get("case", "?"), x.get("where", "?"), float(x.get("overlap", 0)),
                                          bool(x.get("holdout"))).message(),
                   cfg.golden_checks.leaks == "fail", case=None if x.get("holdout") else x.get("case"),
                   value=x.get("overlap")) for x in leaks]


def golden_checks(cfg: Config, baseline: RunResult | None, candidate: RunResult) -> tuple[list[Reason], dict[str, Any]]:
    """Reasons from version discipline, policy drift and leaks, and what the report shows about
    the golden set: ``diff`` (None when the baseline has no golden snapshot), ``changelog``,
    ``section_changes``, ``leaks``, ``coverage``."""
    info: dict[str, Any] = {"diff": None, "changelog": candidate.golden.changelog or "",
                            "section_changes": [], "leaks": [], "coverage": None}
    reasons: list[Reason] = []
    if baseline is not None and candidate.golden.cases is not None and baseline.golden.cases is not None:
        info["diff"] = lifecycle.golden_diff(baseline.golden.cases, candidate.golden.cases)
        reasons += _version_reasons(baseline, candidate)
    reasons += _drift(cfg, baseline, candidate, info)
    reasons += _leaks(cfg, candidate, info)
    info["coverage"] = (candidate.golden_checks or {}).get("coverage")
    return reasons, info


def with_golden_checks(verdict: Verdict, cfg: Config, baseline: RunResult | None, candidate: RunResult) -> Verdict:
    """``verdict`` plus the golden set's checks: blocking ones turn it to fail."""
    extra, info = golden_checks(cfg, baseline, candidate)
    reasons = tuple(verdict.reasons) + tuple(extra)
    blocked = any(r.blocking for r in reasons)
    state = "fail" if blocked and verdict.state == "pass" else verdict.state
    return replace(verdict, reasons=reasons, verdict="fail" if blocked else "pass", state=state,
                   golden=freeze({**thaw(verdict.golden), **info}))

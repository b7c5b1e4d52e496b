"""What the comment and the terminal say beyond the reasons: the attribution lines under each
reason, what reverting does to the gate, the next step, the "+N more" of the verdict line and the
zero-tolerance rows of the gated table. Pure functions of a Verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rageval.gate import ablation
from rageval.gate.ablation import Attribution
from rageval.gate.verdict import Reason, Verdict
from rageval.results import RunResult


def more_reasons(verdict: Verdict) -> str:
    """``; +2 more reasons`` when more reasons block than the headline names (as the terminal says it)."""
    others = len(verdict.blocking_reasons) - 1
    return f"; +{others} more reason{'s' if others != 1 else ''}" if others > 0 else ""


def zero_tolerance_rows(verdict: Verdict, candidate: RunResult) -> list[tuple[str, int]]:
    """(check, new failures that block) for each zero-tolerance check: the gated table's rows, so a
    ❌ row stands beside each ❌ zero-tolerance reason."""
    names = list(((candidate.config.get("gate") or {}).get("zero_tolerance")) or [])
    counts = {name: 0 for name in names}
    for r in verdict.reasons:
        if r.rule == "zero_tolerance" and r.blocking and r.metric:
            counts[r.metric] = counts.get(r.metric, 0) + (r.value if r.case is None and isinstance(r.value, int) else 1)
    return list(counts.items())


def attributed_lines(attribution: Attribution | None, reasons: Sequence[Reason]) -> list[list[str]]:
    """The attribution lines to show under each of ``reasons``: a blocking reason's metric's lines,
    under the first reason about that metric only; under a blocking case's reason, the reverts that
    make that case pass (from the runs)."""
    out: list[list[str]] = []
    shown: set[str] = set()
    for reason in reasons:
        metric = reason.moved_metric
        part = attribution.for_metric(metric) if attribution and reason.blocking and metric not in shown else None
        lines = []
        if part is not None:
            shown.add(part.metric)
            lines = part.lines()
        fixed = ablation.case_lines(attribution, reason.case) if reason.blocking and reason.case else None
        if fixed:
            lines.append(f"{reason.case}: {fixed}")
        out.append(lines)
    return out


def attribution_context(verdict: Verdict) -> dict[str, Any]:
    """The attribution lines under each blocking reason (by reason message), what reverting does to
    the gate, the next step, and the cost footer (in the cost section)."""
    found = verdict.attribution
    blocking = verdict.blocking_reasons
    attributed = {reason.message: lines for reason, lines in zip(blocking, attributed_lines(found, blocking))
                  if lines}
    return {"attribution": found, "attributed": attributed,
            "attribution_finding": ablation.finding(found) if found else None,
            "next_step": next_step(verdict),
            "attribution_footer": ablation.footer(found) if found else ""}


MSG_NO_BASELINE_NEXT = ("Produce main's baseline: run rageval baseline on main (the action does in its baseline mode, "
                        "on a push to main), so PRs are compared with it; until then only floors and zero tolerance "
                        "apply")


def next_step(verdict: Verdict) -> str | None:
    """What to do next, from the runs: the revert that unblocks (attribution), or for a blocked PR
    without a baseline, producing one."""
    if not verdict.blocked:
        return None
    found = ablation.next_step(verdict.attribution)
    if found is not None:
        return found
    if any(r.rule == "missing_baseline" for r in verdict.reasons):
        return MSG_NO_BASELINE_NEXT
    return None

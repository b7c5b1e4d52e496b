"""The gate's per-case rules: pass→fail, fail→pass and rank drops between two runs; zero tolerance
as a ratchet; the errors policy; cases missing in the candidate.

**Zero tolerance is a ratchet, not a wall.** A case failing a zero-tolerance check (``numbers``) in
the PR is a *new* failure when the same case (same id and content) passed that check on main, or
main did not have it: it blocks. A case failing the check on both is a *known failure*: under
``gate.known_failures: report`` (the default for pull requests and merge queues) it is counted and
listed, never hidden, and does not block; under ``block`` (the default for release verification)
it blocks like a new one, marked as already failing on main. Reasons about holdout cases never
quote them: they are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rageval.gate.verdict import RankDrop, Reason
from rageval.records import CaseResult
from rageval.settings import GateConfig

MAX_IDS_IN_MESSAGE = 10

MSG_ERRORS = "{n} case{s} errored: {ids} (gate.errors: {policy})"
MSG_MISSING = "{ids} passed in the baseline and {verb} missing in the candidate"
MSG_ZT_HOLDOUT = "{check}: {n} holdout case{s} fail{v} the rule (details hidden){known}"
MSG_KNOWN = "{n} known failure{s}, already failing on main: {which} (gate.known_failures: {policy})"
KNOWN_SUFFIX = " (already failing on main)"


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


def zero_tolerance(cases: Mapping[str, CaseResult], names: Sequence[str]) -> dict[str, list[str]]:
    """Case id -> the zero-tolerance checks it fails."""
    out: dict[str, list[str]] = {}
    for case_id, case in cases.items():
        failing = [n for n in names if case.status(n) == "fail"]
        if failing:
            out[case_id] = failing
    return out


def case_reasons(cfg: GateConfig, base_cases: Mapping[str, CaseResult], cand_cases: Mapping[str, CaseResult],
                 zt: Mapping[str, list[str]], pass_to_fail: Sequence[str],
                 known: Mapping[str, list[str]] | None = None) -> list[Reason]:
    """Zero-tolerance failures that block (``known``: those already failing on main, marked so),
    errors, missing cases. Holdout cases are counted, never described."""
    reasons: list[Reason] = []
    hidden: dict[str, int] = {}
    known = known or {}
    for case_id, names in zt.items():
        case = cand_cases[case_id]
        for name in names:
            if case.holdout:
                hidden[name] = hidden.get(name, 0) + 1
                continue
            suffix = KNOWN_SUFFIX if name in known.get(case_id, ()) else ""
            reasons.append(Reason("zero_tolerance", _numbers_message(name, case_id, case) + suffix, True,
                                  metric=name, case=case_id))
    for name, n in hidden.items():
        reasons.append(Reason("zero_tolerance", MSG_ZT_HOLDOUT.format(
            check=name, n=n, s="s" if n != 1 else "", v="" if n != 1 else "s", known=""), True, metric=name, value=n))
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


def split_known(zt: Mapping[str, list[str]], base_cases: Mapping[str, CaseResult], common: set[str]
                ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(new, known) zero-tolerance failures: a check a case fails is *known* when the same case
    (``common``: same id and content) fails that check on main too."""
    new: dict[str, list[str]] = {}
    known: dict[str, list[str]] = {}
    for case_id, names in zt.items():
        before = base_cases.get(case_id) if case_id in common else None
        for name in names:
            side = known if before is not None and before.status(name) == "fail" else new
            side.setdefault(case_id, []).append(name)
    return new, known


def known_reason(cfg: GateConfig, cand_cases: Mapping[str, CaseResult], known: Mapping[str, list[str]]) -> Reason:
    """The one line that counts and lists the known failures (not blocking: gate.known_failures: report)."""
    by_check: dict[str, list[str]] = {}
    for case_id, names in known.items():
        for name in names:
            by_check.setdefault(name, []).append(case_id)
    parts = []
    for name, ids in by_check.items():
        shown = [i for i in ids if not cand_cases[i].holdout]
        parts.append(f"{name} {id_list(shown, len(ids) - len(shown))}")
    n = len(known)
    return Reason("known_failures", MSG_KNOWN.format(n=n, s="s" if n != 1 else "", which="; ".join(parts),
                                                      policy=cfg.known_failures), False, value=n)

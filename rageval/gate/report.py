"""Render a Verdict as the markdown PR comment / step summary (the terminal's lines: ``terminal``).

The templates live in ``rageval/gate/templates/`` (jinja2, autoescape off: the output is markdown, not
HTML). Every piece of model or user text goes through ``md`` (inline) or ``fence`` (verbatim), which
``rageval.gate.markdown`` defines: escaped, neutralised, cut to a bounded length.

Cases tagged ``holdout`` never show their question or answer (nor their id): only counts.

Size: GitHub refuses comments over 65,536 characters. The comment is rendered with the full case
lists first; while it is longer than ``max_chars`` the case lists (then the reasons list) are cut
to fewer entries, each ending with "…and N more". The header and the tables always stay.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jinja2

from rageval.cost import Cost, StageCost
from rageval.gate import ablation, advice, trend
from rageval.gate.cases import KNOWN_SUFFIX
from rageval.gate.format import fmt, fmt_delta
from rageval.gate.markdown import (
    ANSWER_MAX_CHARS,
    FIELD_MAX_CHARS,
    QUESTION_MAX_CHARS,
    TITLE_MAX_CHARS,
    escape_md,
    fence,
    quoted,
)
from rageval.gate.verdict import (
    STATE_RULES,
    ConfigChange,
    MetricRow,
    RankDrop,
    SliceRow,
    Threshold,
    Verdict,
)
from rageval.golden.lifecycle import Coverage, GoldenDiff, SectionChange
from rageval.golden.set import is_holdout
from rageval.metrics.faithfulness import claim_readings
from rageval.metrics.registry import rule_check_names
from rageval.records import CaseResult
from rageval.results import RunResult
from rageval.settings import ReportConfig, new_at_default

GITHUB_COMMENT_LIMIT = 65_536
#: default budget: the limit minus room for the hidden marker and anything the caller appends
DEFAULT_MAX_CHARS = 60_000
COVERAGE_MAX_ITEMS = 60             # sections / slices listed by name in the coverage details
TEMPLATES = Path(__file__).parent / "templates"

#: (pass→fail cases shown in full, rows of the other case lists, reasons shown) per attempt;
#: ``None`` means "use ReportConfig.max_cases"
_LIMITS: tuple[tuple[int | None, int, int], ...] = (
    (None, 100, 100), (10, 25, 25), (3, 10, 10), (0, 0, 5), (0, 0, 0))

_STATUS = {"pass": "✅", "fail": "❌", "warn": "⚠️ not significant", "n/a": "n/a",
           "insufficient_data": "⚠️ insufficient data"}


def _num(value: Any) -> str:
    return fmt(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else "n/a"


def _threshold(threshold: Threshold | None) -> str:
    if threshold is None:
        return "—"
    parts = []
    if threshold.floor is not None:
        parts.append(f"≥ {fmt(threshold.floor)}")
    if threshold.max_drop is not None:
        parts.append(f"Δ ≥ {fmt_delta(-threshold.max_drop)}")
    return "; ".join(parts) or "—"


def _status(row: MetricRow | SliceRow) -> str:
    if row.status == "pass" and row.threshold is None:
        return "—"                       # not gated: nothing to pass
    return _STATUS.get(row.status, row.status)


def _rank(value: Any) -> str:
    return "not retrieved" if value is None else str(value)


def _ranks(row: CaseRow) -> str:
    """``rank 3 → not retrieved``; an out-of-scope case (nothing to retrieve) says so."""
    if row.out_of_scope:
        return "out of scope"
    return f"{_rank(row.rank_before)} → {_rank(row.rank_after)}"


def _value(value: Any) -> str:
    """A config value as compact JSON (strings unquoted), for the config-diff table."""
    if value is None:
        return "(absent)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True,
                      default=lambda o: dict(o) if isinstance(o, Mapping) else list(o))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=False,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.filters.update(md=escape_md, fence=fence, num=_num, delta=fmt_delta, threshold=_threshold,
                       status=_status, rank=_rank, value=_value, ranks=_ranks, quote=quoted)
    return env


_ENV = _environment()


# --- context ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Links:
    """Where a reader goes next, as the CI host gives them: the job's log, the run's artifacts (the
    results), and commit pages (``commit`` + a 40-hex sha); each None when unknown."""

    job_log: str | None = None
    artifacts: str | None = None
    commit: str | None = None

    def commit_of(self, sha: str | None) -> str | None:
        """The page of ``sha`` (a recorded commit: linked only when it is 40 hex digits)."""
        return f"{self.commit}{sha}" if self.commit and sha and re.fullmatch(r"[0-9a-f]{40}", sha) else None


@dataclass(frozen=True)
class Listing:
    """A list as the comment shows it: the items ``shown``, how many ``more`` were left out for
    space, and how many holdout cases were ``hidden`` (counted, never shown). The template's
    ``rest`` macro prints the "…and N more" and "N holdout" parts the same way everywhere."""

    shown: tuple[Any, ...] = ()
    more: int = 0
    hidden: int = 0

    @property
    def total(self) -> int:
        return len(self.shown) + self.more + self.hidden

    @property
    def rest(self) -> bool:
        """Whether there is anything beyond what is shown."""
        return bool(self.more or self.hidden)

    def __bool__(self) -> bool:
        return self.total > 0


def listing(items: Sequence[Any], limit: int, hidden: int = 0) -> Listing:
    """The first ``limit`` of ``items``, the rest counted."""
    return Listing(tuple(items[:limit]), max(0, len(items) - limit), hidden)


def _failing_checks(case: CaseResult | None) -> list[str]:
    if case is None:
        return []
    if case.error:
        return [f"error: {case.error}"]
    if case.failures:
        return list(case.failures)
    return [f"{name}: {check.reason or check.status}" for name, check in case.checks.items()
            if check.status in ("fail", "error")]


def _split(ids: Sequence[str], cases: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[list[str], int]:
    """(ids that may be shown, number of holdout ids hidden)."""
    shown = [i for i in ids if not is_holdout(cases.get(i), other.get(i))]
    return shown, len(ids) - len(shown)


@dataclass(frozen=True)
class SectionRow:
    """A source section whose numbers changed, with the (shown) cases that expect it."""

    change: SectionChange
    cases: Listing


@dataclass(frozen=True)
class GoldenChanges:
    """The golden diff as the comment shows it (holdout cases as counts only)."""

    added: Listing                       # of (id, question)
    removed: Listing                     # of ids
    changed: Listing                     # of ChangedCase
    sections: Listing                    # of SectionRow

    @property
    def any_case(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def _golden_changes(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                    max_rows: int) -> GoldenChanges:
    diff = verdict.golden.diff or GoldenDiff()
    after = candidate.golden.cases or {}
    before = (baseline.golden.cases if baseline is not None else None) or {}

    def rows(ids: Sequence[str]) -> Listing:
        shown, hidden = _split(ids, after, before)
        return listing(shown, max_rows, hidden)

    added = rows(diff.added)
    changed = {c.id: c for c in diff.changed}
    sections = []
    for change in verdict.golden.section_changes:
        ids, n_hidden = _split(change.cases, after, before)
        sections.append(SectionRow(change, Listing(tuple(ids), 0, n_hidden)))
    return GoldenChanges(
        added=replace(added, shown=tuple((i, after[i].get("question")) for i in added.shown)),
        removed=rows(diff.removed),
        changed=(lambda c: replace(c, shown=tuple(changed[i] for i in c.shown)))(rows(list(changed))),
        sections=listing(sections, max_rows))


def _coverage(coverage: Coverage | None) -> dict[str, Listing] | None:
    if coverage is None:
        return None
    return {"sections": listing(list(coverage.by_section.items()), COVERAGE_MAX_ITEMS),
            "slices": listing(list(coverage.by_slice.items()), COVERAGE_MAX_ITEMS),
            "thin": listing(list(coverage.thin_sections), COVERAGE_MAX_ITEMS)}


#: the headline of a verdict whose state is not its decision: short, the whole reason is under Why
STATE_HEADLINES = {"not_comparable": "main's baseline cannot be compared with this PR",
                   "missing_baseline": "no baseline: floors and zero tolerance only"}


def headline(verdict: Verdict) -> str:
    """The verdict's main reason, and the known failures counted (they never block silently unseen).
    A state (not comparable, no baseline) gets a short headline; its reason is said in full under Why."""
    reason = verdict.main_reason
    if reason is None:
        text = "all gates passed"
    elif reason.rule in STATE_RULES:
        text = STATE_HEADLINES.get(reason.rule, reason.message)
    else:
        text = f"{reason.message} ({reason.label})"
    n = len(verdict.known_failures)
    if n and not known_blocking(verdict):
        text += f"; {n} known failure{'s' if n != 1 else ''}, already failing on main"
    return text


def known_blocking(verdict: Verdict) -> bool:
    """Whether the known failures block (``gate.known_failures: block``)."""
    return any(r.rule == "zero_tolerance" and r.blocking and r.message.endswith(KNOWN_SUFFIX) for r in verdict.reasons)


def outcome(verdict: Verdict) -> tuple[str, str]:
    qualifier = {"not_comparable": " (not comparable)", "insufficient_data": " (insufficient data)"}.get(
        verdict.state, "")
    if verdict.blocked:
        return "❌", "blocked" + qualifier
    return ("✅" if verdict.state == "pass" else "⚠️"), "passed" + qualifier


@dataclass(frozen=True)
class CaseRow:
    """A case in a table of the comment: question, first relevant rank before → after, failing checks."""

    id: str
    question: str | None
    rank_before: int | None
    rank_after: int | None
    checks: tuple[str, ...]
    out_of_scope: bool = False


@dataclass(frozen=True)
class CaseDetail:
    """A pass→fail case in full: question, expected, before/after answers, checks, ranks."""

    row: CaseRow
    expected: str | None
    before: str | None
    after: str | None
    missing: bool
    fixed_by: str | None = None             # the reverts that make it pass (attribution's runs)


class _Cases:
    """The baseline's and the candidate's cases, as the report's case sections show them."""

    def __init__(self, baseline: RunResult | None, candidate: RunResult) -> None:
        self.base = baseline.case_map if baseline is not None else {}
        self.cand = candidate.case_map

    def row(self, case_id: str) -> CaseRow:
        b, c = self.base.get(case_id), self.cand.get(case_id)
        shown = c or b
        return CaseRow(case_id, shown.question if shown else None, None if b is None else b.first_relevant_rank,
                       None if c is None else c.first_relevant_rank, tuple(_failing_checks(c)),
                       bool(shown and shown.out_of_scope))

    def detail(self, case_id: str) -> CaseDetail:
        before, after = self.base.get(case_id), self.cand.get(case_id)
        shown = after or before
        return CaseDetail(self.row(case_id), shown.expected_answer if shown else None,
                          before.answer if before else None, None if after is None else after.answer, after is None)

    def rows(self, ids: Sequence[str], max_rows: int) -> Listing:
        """The rows of a case list, holdout cases counted."""
        shown, hidden = _split(ids, self.cand, self.base)
        return replace(listing(shown, max_rows, hidden), shown=tuple(self.row(i) for i in shown[:max_rows]))


def _drop_size(drop: RankDrop) -> float:
    """How far a first relevant rank fell; "not retrieved" falls furthest."""
    return float("inf") if drop.after is None else drop.after - (drop.before or 0)


#: config keys that change no answer and no decision: left out of the comment's config changes
QUIET_KEYS = ("path", "report.", "attribution.", "llm.cache_dir")


def _config_changes(verdict: Verdict, baseline: RunResult | None, candidate: RunResult) -> list[ConfigChange]:
    """The config diff a reviewer needs: no key that changes no answer, no key an older rageval did
    not write that is at its default now, no judge setting when neither run had a judge."""
    judged = any((run.config.get("judge") or {}).get("model") for run in (baseline, candidate) if run is not None)
    return [d for d in verdict.config_diff if not d.key.startswith(QUIET_KEYS)
            and not new_at_default(d.key, d.before, d.after)
            and (judged or not d.key.startswith("judge."))]


@dataclass(frozen=True)
class GatedRow:
    """A row of the comment's first table: a gated metric, overall or in a slice."""

    label: str
    row: MetricRow | SliceRow


def _gated(verdict: Verdict) -> list[GatedRow]:
    """Every metric with a threshold, overall then per slice."""
    rows = [GatedRow(row.metric, row) for row in verdict.metrics if row.threshold]
    rows += [GatedRow(f"{row.slice} · {row.metric}", row) for row in verdict.by_slice if row.gated and row.threshold]
    return rows


@dataclass(frozen=True)
class CaseSections:
    """The comment's case lists, each cut to fit."""

    pass_to_fail: Listing                # of CaseDetail
    known: Listing                       # of CaseRow: failing on main too (gate.known_failures)
    fail_to_pass: Listing                # of CaseRow
    flaky: Listing                       # of CaseRow
    rank_drops: Listing                  # of RankDrop, worst first
    added: Listing                       # of ids
    removed: Listing                     # of ids


def _case_sections(verdict: Verdict, cases: _Cases, max_cases: int, max_rows: int) -> CaseSections:
    p2f, p2f_hidden = _split(verdict.pass_to_fail, cases.base, cases.cand)
    drops = {r.id: r for r in sorted(verdict.rank_drops, key=_drop_size, reverse=True)}
    drop_ids, drop_hidden = _split(list(drops), cases.cand, cases.base)
    added, added_hidden = _split(verdict.cases_added, cases.cand, cases.base)
    removed, removed_hidden = _split(verdict.cases_removed, cases.cand, cases.base)
    return CaseSections(
        pass_to_fail=Listing(tuple(replace(cases.detail(i), fixed_by=ablation.case_lines(verdict.attribution, i))
                                   for i in p2f[:max_cases]), len(p2f) - min(len(p2f), max_cases),
                             p2f_hidden),
        known=cases.rows(verdict.known_failures, max_rows),
        fail_to_pass=cases.rows(verdict.fail_to_pass, max_rows), flaky=cases.rows(verdict.flaky, max_rows),
        rank_drops=listing([drops[i] for i in drop_ids], max_rows, drop_hidden),
        added=listing(added, max_rows, added_hidden), removed=listing(removed, max_rows, removed_hidden))


def _cost_rows(cost: Cost, rerun: Cost | None) -> list[dict[str, Any]]:
    """One row per stage: the first run's calls, cache hits, tokens and USD, and the re-runs'."""
    again = rerun.stages if rerun is not None else {}
    return [{"stage": stage, "first": cost.stages.get(stage) or StageCost(), "rerun": again.get(stage) or StageCost()}
            for stage in sorted({*cost.stages, *again})]


def _judging(candidate: RunResult) -> dict[str, Any]:
    """What the judge-based numbers rest on: the three readings of the per-claim verdicts, and
    how many cases were not judged because they already failed a rule."""
    claims = claim_readings(c.checks["faithfulness"].details for c in candidate.cases if "faithfulness" in c.checks)
    not_judged = sum(1 for c in candidate.cases
                     if "judge" in c.checks and c.checks["judge"].reason.startswith("not judged: failed rules"))
    return {"claims": claims, "not_judged": not_judged, "rule_checks": ", ".join(rule_check_names())}


def _trend_lines(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                 cfg: ReportConfig) -> dict[str, Any]:
    """Main's trend per gated metric (``rageval.gate.trend``), once main has two baselines."""
    found = [] if baseline is None else trend.trends(candidate, baseline=baseline, verdict=verdict, limit=cfg.history)
    shown = [t for t in found if len(t.main) > 1]
    return {"trends": shown, "trend_breaks": any(t.breaks() for t in shown), "trend_break": trend.BREAK}


def _context(verdict: Verdict, baseline: RunResult | None, candidate: RunResult, cases: _Cases,
             cfg: ReportConfig, title: str | None) -> dict[str, Any]:
    """What the comment shows whatever its length (the parts cut to fit are in :func:`_limited`)."""
    icon, verdict_word = outcome(verdict)
    runs = verdict.reran.runs
    n_runs = max(len(v) for v in runs.values()) if runs else 1 + (1 if verdict.reran.full else 0)
    # the re-runs' cost: in the candidate when this process ran them, else as the verdict recorded it
    rerun = candidate.cost.rerun if candidate.cost.rerun is not None else verdict.reran.cost
    return {
        "icon": icon, "outcome": verdict_word, "title": title if title is not None else cfg.title,
        "headline": headline(verdict) + advice.more_reasons(verdict), "verdict": verdict, "golden": verdict.golden,
        "zero_tolerance": advice.zero_tolerance_rows(verdict, candidate),
        "policy_notice": verdict.policy.message if verdict.policy is not None else None,
        "known_blocking": known_blocking(verdict),
        "has_baseline": baseline is not None,
        "base_sha": baseline.git_sha if baseline is not None else None, "cand_sha": candidate.git_sha,
        "golden_sha": candidate.golden.sha256,
        "n_cases": len(cases.cand),
        "n_common": verdict.golden.compared_cases if verdict.golden.compared_cases is not None
        else len([i for i in cases.cand if i in cases.base]),
        "n_runs": n_runs, "gated": _gated(verdict),
        "config_diff": _config_changes(verdict, baseline, candidate),
        "ci_rows": [(m, ci) for m, ci in verdict.stats.bootstrap.items() if ci.delta != 0 or ci.low != ci.high],
        "cost": candidate.cost, "timings": dict(candidate.timings),
        "rerun_cost": rerun, "cost_rows": _cost_rows(candidate.cost, rerun), **_judging(candidate),
        "budget_stopped": sum(1 for c in candidate.cases if "budget exceeded" in (c.error or "")),
        "coverage": _coverage(verdict.golden.coverage),
        "answer_max": ANSWER_MAX_CHARS, "question_max": QUESTION_MAX_CHARS,
        "field_max": FIELD_MAX_CHARS, "title_max": TITLE_MAX_CHARS,
        **advice.attribution_context(verdict),
        **_trend_lines(verdict, baseline, candidate, cfg),
    }


def _limited(verdict: Verdict, baseline: RunResult | None, candidate: RunResult, cases: _Cases,
             limits: tuple[int, int, int]) -> dict[str, Any]:
    """The parts of the comment cut to ``limits`` (cases, table rows, reasons) to fit."""
    max_cases, max_rows, max_reasons = limits
    return {"reasons": listing(verdict.reasons, max_reasons),
            "cases": _case_sections(verdict, cases, max_cases, max_rows),
            "gd": _golden_changes(verdict, baseline, candidate, max_rows)}


# --- public ----------------------------------------------------------------------------------

def render_markdown(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                    cfg: ReportConfig, *, title: str | None = None, max_chars: int = DEFAULT_MAX_CHARS,
                    own: RunResult | None = None, full_report: str | None = None,
                    links: Links | None = None) -> str:
    """The PR comment / step summary for ``verdict``. Its first line is the verdict and its main
    reason; it is at most ``max_chars`` characters (see the module docstring for how). ``own``: the
    PR's own golden set's run, when ``candidate`` ran main's cases (the golden changes are its).
    ``full_report``: where the HTML report is (a link to the run's artifacts), linked under the table;
    ``links``: the job log, the results artifact and the commits, linked under the golden set line."""
    if max_chars > GITHUB_COMMENT_LIMIT:
        raise ValueError(f"max_chars {max_chars} exceeds GitHub's comment limit of {GITHUB_COMMENT_LIMIT}")
    template = _ENV.get_template("comment.md.j2")
    cases = _Cases(baseline, candidate)
    links = links or Links()
    fixed = {**_context(verdict, baseline, candidate, cases, cfg, title), "full_report": full_report,
             "links": links, "base_url": links.commit_of(baseline.git_sha if baseline is not None else None),
             "cand_url": links.commit_of(candidate.git_sha)}
    text = ""
    for max_cases, max_rows, max_reasons in _LIMITS:
        limits = (cfg.max_cases if max_cases is None else min(max_cases, cfg.max_cases), max_rows, max_reasons)
        text = template.render(**fixed, **_limited(verdict, baseline, own or candidate, cases, limits))
        if len(text) <= max_chars:
            return text
    # Only the tables are left and they are still too long (a huge config diff or thousands of
    # slices): keep the start and say so, rather than have GitHub reject the comment.
    note = "\n\n…(report cut to fit GitHub's comment size limit)\n"
    return text[: max_chars - len(note)].rstrip() + note

"""Render a Verdict as the markdown PR comment / step summary, and as a one-line summary.

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from rageval.config import ReportConfig
from rageval.cost import Cost
from rageval.gate import ablation
from rageval.gate.format import fmt, fmt_delta
from rageval.gate.markdown import (  # noqa: F401 - escape_md, fence, printable: public here too
    ANSWER_MAX_CHARS,
    FIELD_MAX_CHARS,
    INLINE_MAX_CHARS,
    QUESTION_MAX_CHARS,
    SUMMARY_TITLE_MAX,
    TITLE_MAX_CHARS,
    cut,
    escape_md,
    fence,
    printable,
)
from rageval.gate.verdict import STATE_RULES, Reason, Verdict
from rageval.golden.set import is_holdout
from rageval.metrics.faithfulness import claim_readings
from rageval.metrics.registry import is_rate, rule_check_names, summary_metric_names
from rageval.records import CaseResult
from rageval.results import RunResult
from rageval.settings import new_at_default

GITHUB_COMMENT_LIMIT = 65_536
#: default budget: the limit minus room for the hidden marker and anything the caller appends
DEFAULT_MAX_CHARS = 60_000
SUMMARY_LINE_MAX = 140              # GitHub commit status descriptions are cut at 140 characters
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


def _threshold(threshold: Mapping[str, float] | None) -> str:
    if not threshold:
        return "—"
    parts = []
    if threshold.get("floor") is not None:
        parts.append(f"≥ {fmt(threshold['floor'])}")
    if threshold.get("max_drop") is not None:
        parts.append(f"Δ ≥ {fmt_delta(-threshold['max_drop'])}")
    return "; ".join(parts)


def _status(row: Mapping[str, Any]) -> str:
    status = row.get("status")
    if status == "pass" and not row.get("threshold"):
        return "—"                       # not gated: nothing to pass
    return _STATUS.get(status, str(status))


def _rank(value: Any) -> str:
    return "not retrieved" if value is None else str(value)


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
                       status=_status, rank=_rank, value=_value)
    return env


_ENV = _environment()


# --- context ---------------------------------------------------------------------------------

def _failing_checks(case: CaseResult | None) -> list[str]:
    if case is None:
        return []
    if case.error:
        return [f"error: {case.error}"]
    if case.failures:
        return list(case.failures)
    return [f"{name}: {check.reason or check.status}" for name, check in case.checks.items()
            if check.status in ("fail", "error")]


def _golden_changes(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                    max_rows: int) -> dict[str, Any]:
    """The golden diff, section changes and coverage as the template shows them; holdout cases as
    counts only."""
    diff = verdict.golden.get("diff") or {}
    after = candidate.golden.cases or {}
    before = (baseline.golden.cases if baseline is not None else None) or {}

    def rows(ids: Sequence[str]) -> tuple[list[str], int, int]:
        shown, hidden = _split(ids, after, before)
        return shown[:max_rows], max(0, len(shown) - max_rows), hidden

    added, added_more, added_hidden = rows(list(diff.get("added") or ()))
    removed, removed_more, removed_hidden = rows(list(diff.get("removed") or ()))
    changed_by_id = {c["id"]: c for c in diff.get("changed") or ()}
    changed_ids, changed_more, changed_hidden = rows(list(changed_by_id))
    sections = []
    for change in verdict.golden.get("section_changes") or ():
        ids, n_hidden = _split(change["cases"], after, before)
        sections.append({**change, "shown": ids, "n_hidden": n_hidden})
    return {
        "gd_any": bool(added or removed or changed_ids or added_hidden or removed_hidden or changed_hidden),
        "gd_added": [{"id": i, "question": after[i].get("question")} for i in added],
        "gd_added_more": added_more, "gd_added_hidden": added_hidden,
        "gd_removed": removed, "gd_removed_more": removed_more, "gd_removed_hidden": removed_hidden,
        "gd_changed": [changed_by_id[i] for i in changed_ids], "gd_changed_more": changed_more,
        "gd_changed_hidden": changed_hidden, "gd_changelog": verdict.golden.get("changelog") or "",
        "section_changes": sections[:max_rows], "coverage": _coverage(verdict.golden.get("coverage")),
    }


def _coverage(coverage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not coverage:
        return None
    return {**coverage,
            "sections_shown": list(coverage["by_section"].items())[:COVERAGE_MAX_ITEMS],
            "slices_shown": list(coverage["by_slice"].items())[:COVERAGE_MAX_ITEMS],
            "thin_shown": list(coverage["thin_sections"])[:COVERAGE_MAX_ITEMS],
            "n_covered": sum(1 for n in coverage["by_section"].values() if n)}


def _headline(verdict: Verdict) -> str:
    reason = verdict.main_reason
    if reason is None:
        return "all gates passed"
    if reason.rule in STATE_RULES:
        return reason.message
    return f"{reason.message} ({reason.label})"


def _outcome(verdict: Verdict) -> tuple[str, str]:
    qualifier = {"not_comparable": " (not comparable)", "insufficient_data": " (insufficient data)"}.get(
        verdict.state, "")
    if verdict.blocked:
        return "❌", "blocked" + qualifier
    return ("✅" if verdict.state == "pass" else "⚠️"), "passed" + qualifier


def _split(ids: Sequence[str], cases: Mapping[str, Any], other: Mapping[str, Any]) -> tuple[list[str], int]:
    """(ids that may be shown, number of holdout ids hidden)."""
    shown = [i for i in ids if not is_holdout(cases.get(i), other.get(i))]
    return shown, len(ids) - len(shown)


class _Cases:
    """The baseline's and the candidate's cases, as the report's case sections show them."""

    def __init__(self, baseline: RunResult | None, candidate: RunResult) -> None:
        self.base = baseline.case_map if baseline is not None else {}
        self.cand = candidate.case_map

    def ranks(self, case_id: str) -> tuple[int | None, int | None]:
        b, c = self.base.get(case_id), self.cand.get(case_id)
        return (None if b is None else b.first_relevant_rank), (None if c is None else c.first_relevant_rank)

    def detail(self, case_id: str) -> dict[str, Any]:
        """A pass→fail case in full: question, expected, before/after answers, checks, ranks."""
        before, after = self.base.get(case_id), self.cand.get(case_id)
        shown = after or before
        rb, ra = self.ranks(case_id)
        return {"id": case_id, "question": shown.question if shown else None,
                "expected": shown.expected_answer if shown else None,
                "before": before.answer if before else None, "after": None if after is None else after.answer,
                "missing": after is None, "checks": _failing_checks(after), "rank_before": rb, "rank_after": ra}

    def rows(self, ids: Sequence[str], max_rows: int) -> tuple[list[dict[str, Any]], int, int]:
        """(shown rows, more not shown, holdout hidden) of a case list."""
        shown, hidden = _split(ids, self.cand, self.base)
        out = []
        for case_id in shown[:max_rows]:
            case = self.cand.get(case_id) or self.base.get(case_id)
            rb, ra = self.ranks(case_id)
            out.append({"id": case_id, "question": case.question if case else None, "rank_before": rb,
                        "rank_after": ra, "checks": _failing_checks(self.cand.get(case_id))})
        return out, len(shown) - len(out), hidden


def _drop_size(drop: Mapping[str, Any]) -> float:
    """How far a first relevant rank fell; "not retrieved" falls furthest."""
    return float("inf") if drop["after"] is None else drop["after"] - drop["before"]


#: config keys that change no answer and no decision: left out of the comment's config changes
QUIET_KEYS = ("path", "report.", "attribution.", "llm.cache_dir")


def _config_changes(verdict: Verdict, baseline: RunResult | None, candidate: RunResult) -> list[Mapping[str, Any]]:
    """The config diff a reviewer needs: no key that changes no answer, no key an older rageval did
    not write that is at its default now, no judge setting when neither run had a judge."""
    judged = any((run.config.get("judge") or {}).get("model") for run in (baseline, candidate) if run is not None)
    return [d for d in verdict.config_diff if not d["key"].startswith(QUIET_KEYS)
            and not new_at_default(d)
            and (judged or not d["key"].startswith("judge."))]


def _gated(verdict: Verdict) -> list[dict[str, Any]]:
    """The rows of the comment's first table: every metric with a threshold, overall then per slice."""
    rows = [{**row, "label": row["metric"]} for row in verdict.metrics if row.get("threshold")]
    rows += [{**row, "label": f"{row['slice']} · {row['metric']}"} for row in verdict.by_slice
             if row.get("gated") and row.get("threshold")]
    return rows


def _case_sections(verdict: Verdict, cases: _Cases, max_cases: int, max_rows: int) -> dict[str, Any]:
    p2f, p2f_hidden = _split(verdict.pass_to_fail, cases.base, cases.cand)
    details = [cases.detail(i) for i in p2f[:max_cases]]
    f2p, f2p_more, f2p_hidden = cases.rows(verdict.fail_to_pass, max_rows)
    flaky, flaky_more, flaky_hidden = cases.rows(verdict.flaky, max_rows)
    ranks = {r["id"]: r for r in sorted(verdict.rank_drops, key=_drop_size, reverse=True)}
    drop_ids, drop_hidden = _split(list(ranks), cases.cand, cases.base)
    drops = [ranks[i] for i in drop_ids[:max_rows]]
    added, added_hidden = _split(verdict.cases_added, cases.cand, cases.base)
    removed, removed_hidden = _split(verdict.cases_removed, cases.cand, cases.base)
    return {
        "p2f_total": len(verdict.pass_to_fail), "details": details, "details_more": len(p2f) - len(details),
        "p2f_hidden": p2f_hidden, "f2p": f2p, "f2p_more": f2p_more, "f2p_hidden": f2p_hidden,
        "flaky": flaky, "flaky_more": flaky_more, "flaky_hidden": flaky_hidden,
        "drops": drops, "drops_more": len(drop_ids) - len(drops), "drops_hidden": drop_hidden,
        "added": added[:max_rows], "added_more": len(added) - len(added[:max_rows]), "added_hidden": added_hidden,
        "removed": removed[:max_rows], "removed_more": len(removed) - len(removed[:max_rows]),
        "removed_hidden": removed_hidden,
    }


def _cost_rows(cost: Cost, rerun: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One row per stage: the first run's calls, cache hits, tokens and USD, and the re-runs'."""
    again = (rerun or {}).get("stages") or {}
    rows = []
    for stage in sorted({*cost.stages, *again}):
        first = cost.stages[stage].to_dict() if stage in cost.stages else {}
        rows.append({"stage": stage, "first": first, "rerun": again.get(stage) or {}})
    return rows


def _judging(candidate: RunResult) -> dict[str, Any]:
    """What the judge-based numbers rest on: the three readings of the per-claim verdicts, and
    how many cases were not judged because they already failed a rule."""
    claims = claim_readings(c.checks["faithfulness"].details for c in candidate.cases if "faithfulness" in c.checks)
    not_judged = sum(1 for c in candidate.cases
                     if "judge" in c.checks and c.checks["judge"].reason.startswith("not judged: failed rules"))
    return {"claims": claims, "not_judged": not_judged, "rule_checks": ", ".join(rule_check_names())}


def _attribution(verdict: Verdict) -> dict[str, Any]:
    """The attribution lines under each blocking reason (by reason message), and the footer."""
    found = ablation.from_dict(verdict.attribution) if verdict.attribution else None
    blocking = verdict.blocking_reasons
    attributed = {reason.message: lines for reason, lines in zip(blocking, ablation.lines_under(found, blocking))
                  if lines}
    return {"attribution": found, "attributed": attributed,
            "attribution_footer": ablation.footer(found) if found else ""}


def _context(verdict: Verdict, baseline: RunResult | None, candidate: RunResult, cases: _Cases,
             cfg: ReportConfig, title: str | None) -> dict[str, Any]:
    """What the comment shows whatever its length (the parts cut to fit are in :func:`_limited`)."""
    icon, outcome = _outcome(verdict)
    runs = verdict.reran.get("runs") or {}
    n_runs = max(len(v) for v in runs.values()) if runs else 1 + (1 if verdict.reran.get("full") else 0)
    # the re-runs' cost: in the candidate when this process ran them, else as the verdict recorded it
    rerun = candidate.cost.rerun.to_dict() if candidate.cost.rerun is not None else verdict.reran.get("cost")
    return {
        "icon": icon, "outcome": outcome, "title": title if title is not None else cfg.title,
        "headline": _headline(verdict), "verdict": verdict, "golden": verdict.golden,
        "has_baseline": baseline is not None,
        "base_sha": baseline.git_sha if baseline is not None else None, "cand_sha": candidate.git_sha,
        "golden_sha": candidate.golden.sha256,
        "n_cases": len(cases.cand), "n_common": verdict.golden.get("compared_cases",
                                                                 len([i for i in cases.cand if i in cases.base])),
        "metrics": verdict.metrics, "by_slice": verdict.by_slice, "n_runs": n_runs,
        "gated": _gated(verdict), "noise": verdict.noise, "reran": verdict.reran,
        "config_diff": _config_changes(verdict, baseline, candidate),
        "runs": runs, "stats": verdict.stats,
        "ci_rows": [(m, ci) for m, ci in verdict.stats.get("bootstrap", {}).items()
                    if ci["delta"] != 0 or ci["low"] != ci["high"]],
        "cost": candidate.cost.to_dict(), "timings": dict(candidate.timings),
        "rerun_cost": rerun, "cost_rows": _cost_rows(candidate.cost, rerun), **_judging(candidate),
        "budget_stopped": sum(1 for c in candidate.cases if "budget exceeded" in (c.error or "")),
        "answer_max": ANSWER_MAX_CHARS, "question_max": QUESTION_MAX_CHARS,
        "field_max": FIELD_MAX_CHARS, "title_max": TITLE_MAX_CHARS,
        **_attribution(verdict),
    }


def _limited(verdict: Verdict, baseline: RunResult | None, candidate: RunResult, cases: _Cases,
             limits: tuple[int, int, int]) -> dict[str, Any]:
    """The parts of the comment cut to ``limits`` (cases, table rows, reasons) to fit."""
    max_cases, max_rows, max_reasons = limits
    reasons: list[Reason] = list(verdict.reasons)
    return {
        "reasons": reasons[:max_reasons], "reasons_more": max(0, len(reasons) - max_reasons),
        **_case_sections(verdict, cases, max_cases, max_rows),
        **_golden_changes(verdict, baseline, candidate, max_rows),
    }


# --- public ----------------------------------------------------------------------------------

def render_markdown(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                    cfg: ReportConfig, *, title: str | None = None, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The PR comment / step summary for ``verdict``. Its first line is the verdict and its main
    reason; it is at most ``max_chars`` characters (see the module docstring for how)."""
    if max_chars > GITHUB_COMMENT_LIMIT:
        raise ValueError(f"max_chars {max_chars} exceeds GitHub's comment limit of {GITHUB_COMMENT_LIMIT}")
    template = _ENV.get_template("comment.md.j2")
    cases = _Cases(baseline, candidate)
    fixed = _context(verdict, baseline, candidate, cases, cfg, title)
    text = ""
    for max_cases, max_rows, max_reasons in _LIMITS:
        limits = (cfg.max_cases if max_cases is None else min(max_cases, cfg.max_cases), max_rows, max_reasons)
        text = template.render(**fixed, **_limited(verdict, baseline, candidate, cases, limits))
        if len(text) <= max_chars:
            return text
    # Only the tables are left and they are still too long (a huge config diff or thousands of
    # slices): keep the start and say so, rather than have GitHub reject the comment.
    note = "\n\n…(report cut to fit GitHub's comment size limit)\n"
    return text[: max_chars - len(note)].rstrip() + note


def render_summary_line(verdict: Verdict, *, title: str = "RAG eval gate") -> str:
    """One line (≤ 140 characters, printable) for a commit status description or a log line, e.g.
    ``RAG eval gate: blocked — mrr@5 0.63 < 0.85 (floor); +2 more reasons``. The title is cut to
    60 characters first, so the verdict is always in it."""
    _, outcome = _outcome(verdict)
    if len(title) > SUMMARY_TITLE_MAX:       # a long title must not push the verdict out
        title = title[: SUMMARY_TITLE_MAX - 1].rstrip() + "…"
    line = f"{title}: {outcome} — {_headline(verdict)}"
    others = len(verdict.blocking_reasons) - 1
    if others > 0:
        line += f"; +{others} more reason{'s' if others != 1 else ''}"
    line = printable(" ".join(line.split()))
    if len(line) > SUMMARY_LINE_MAX:
        line = line[: SUMMARY_LINE_MAX - 1].rstrip() + "…"
    return line


# --- the run's table (terminal and job log) ---------------------------------------------------

def _table_value(value: float | None, name: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}" if is_rate(name) else f"{value:.0f}"


def render_run_table(result: RunResult) -> str:
    """The table `rageval run` prints: retrieval metrics, then generation rates, then counts and
    the failing cases (every untrusted text through :func:`printable`, each error cut)."""
    summary, golden = result.summary, result.golden
    metrics = summary.metrics
    lines = [printable(f"golden set {golden.name} v{golden.version} ({summary.n_cases} cases"
                       f"{', subset ' + golden.subset if golden.subset else ''}) · app {result.app.get('name', '?')}")]
    for names in (list(result.metric_names), [n for n in summary_metric_names() if metrics.get(n) is not None]):
        for start in range(0, len(names), 8):
            row = names[start:start + 8]
            lines.append("".join(f"{n:>15}" for n in row))
            lines.append("".join(f"{_table_value(metrics.get(n), n):>15}" for n in row))
    lines.append(f"passed {summary.n_passed} · failed {summary.n_failed} · errors {summary.n_errors}")
    failing = [c for c in result.cases if c.passed is False or c.error]
    for case in failing[:20]:
        why = cut(case.error or "; ".join(case.failures), INLINE_MAX_CHARS)
        lines.append(printable(f"  {'ERROR' if case.error else 'FAIL '} {case.id}: {why}"))
    if len(failing) > 20:
        lines.append(f"  …and {len(failing) - 20} more")
    leaks = (result.golden_checks or {}).get("leaks") or []
    if leaks:
        where = sorted({x["where"] for x in leaks})
        lines.append(printable(f"warning: {len(leaks)} golden question{'s' if len(leaks) != 1 else ''} found in "
                               f"{', '.join(where[:3])}{' …' if len(where) > 3 else ''} (leak check; details: "
                               "rageval validate)"))
    return "\n".join(lines)


def render_noise(result: RunResult) -> str:
    """One line on the noise a baseline measured (σ per metric, flaky cases)."""
    noise = result.noise
    if noise is not None and noise.deterministic:
        return (f"noise: 0 (deterministic pipeline: retrieval and generation make no model call, "
                f"so {result.repeats} repeats would be identical; ran once)")
    shown = ", ".join(f"{k} σ={v:.3f}" for k, v in (noise.sigma if noise else {}).items() if v)
    return printable(f"noise over {noise.runs_executed if noise else 1} runs: {shown or 'none measured'}; "
                     f"flaky cases: {', '.join(result.flaky) or 'none'}")


def render_terminal(verdict: Verdict, *, title: str = "RAG eval gate") -> str:
    """What `rageval gate` prints: the summary line, every reason, and under each blocking metric
    the knobs the drop was attributed to; each line through :func:`printable`."""
    found = ablation.from_dict(verdict.attribution) if verdict.attribution else None
    lines = [render_summary_line(verdict, title=title)]
    for reason, attributed in zip(verdict.reasons, ablation.lines_under(found, verdict.reasons)):
        lines.append(f"  {'BLOCK' if reason.blocking else 'note '} {reason.message}")
        lines += [f"        ↳ {line}" for line in attributed]
    if found is not None:
        lines.append(f"  {ablation.footer(found)}")
    return "\n".join(printable(line) for line in lines) + "\n"

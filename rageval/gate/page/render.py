"""Render the one-file HTML report of a gate (a verdict and both runs) or of one run.

The page is self-contained: its style, its script and its data are inline, a Content-Security-Policy
lets it load nothing (no network, works from ``file://`` and from a downloaded artifact), and
everything but opening a case is plain HTML and SVG. The cases the page can open are one JSON value
(``rageval.gate.page.data``), written as is or, past ``COMPRESS_ABOVE`` bytes, gzip-compressed and
base64-encoded (the page inflates it with the browser's ``DecompressionStream``).

Every untrusted string (golden text, answers, chunks, reasons, ids) passes through one ``clean``:
control and bidi characters made visible, secrets redacted by the caller's ``redact``, long text
cut; jinja2's autoescape then escapes it for HTML, and the script writes text with ``textContent``
only. Cases tagged ``holdout`` never appear: only their count.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from rageval.gate import ablation, advice
from rageval.gate import report as comment
from rageval.gate.format import fmt, fmt_delta
from rageval.gate.page import charts
from rageval.gate.page.data import default_clean, page_data
from rageval.gate.trend import trends
from rageval.gate.verdict import Threshold, Verdict
from rageval.results import RunResult
from rageval.settings import ReportConfig, new_at_default

TEMPLATES = Path(__file__).parents[1] / "templates"
COMPRESS_ABOVE = 200_000           # bytes of JSON written as is; more is gzip + base64
QUESTION_CELL_CHARS = 160          # a question in the cases table (the case opens in full)
STATUS_WORDS = {"pass_to_fail": "pass → fail", "fail_to_pass": "fail → pass", "flaky": "flaky",
                "still_failing": "failing in both", "still_passing": "passing", "added": "added",
                "removed": "removed"}


def encode_data(data: Any) -> tuple[str, str]:
    """(encoding, text) of the data block: ``json`` (``<``, ``>`` and ``&`` as ``\\u`` escapes,
    so no text can end the script element) or ``gzip-base64`` past COMPRESS_ABOVE bytes."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    raw = text.encode("utf-8")
    if len(raw) > COMPRESS_ABOVE:
        return "gzip-base64", base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")
    return "json", text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def decode_data(encoding: str, text: str) -> Any:
    """The inverse of :func:`encode_data` (the tests and the benchmark read a page with it)."""
    if encoding == "gzip-base64":
        return json.loads(gzip.decompress(base64.b64decode(text)).decode("utf-8"))
    return json.loads(text)


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


#: the ``clean`` of the page being rendered (the caller's redaction is part of it)
_CLEAN: ContextVar[Callable[[str], str]] = ContextVar("clean", default=default_clean)


def _finalize(value: Any) -> Any:
    """Every plain string printed is ``clean``-ed first (Markup is ours: the data block, style, script)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return _CLEAN.get()(value)
    return value


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             finalize=_finalize)
    env.filters.update(num=lambda v: "n/a" if v is None else fmt(v), delta=fmt_delta, threshold=_threshold,
                       level=charts.delta_level, rank=lambda v: "—" if v is None else str(v))
    return env


def _threshold(threshold: Threshold | None) -> str:
    """``≥ 0.85; Δ ≥ −0.03`` as in the comment; ``—`` when not gated."""
    if threshold is None:
        return "—"
    parts = [f"≥ {fmt(threshold.floor)}"] if threshold.floor is not None else []
    if threshold.max_drop is not None:
        parts.append(f"Δ ≥ {fmt_delta(-threshold.max_drop)}")
    return "; ".join(parts) or "—"


_ENV = _environment()


# --- what the page shows -----------------------------------------------------------------------

def _rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The cases table, from the data block (so both say the same)."""
    rows = []
    for i, case in enumerate(data["cases"]):
        before, after = case["before"], case["after"]
        shown = after or before
        failing = [name for name, status, _ in shown["checks"] if status in ("fail", "error")]
        question = case["question"]
        rows.append({"i": i, "id": case["id"], "question": question if len(question) <= QUESTION_CELL_CHARS
                     else question[:QUESTION_CELL_CHARS].rstrip() + "…", "slice": ", ".join(case["slice"]),
                     "before": before["status"] if before else None, "after": after["status"] if after else None,
                     "rank_before": before["rank"] if before else None, "rank_after": after["rank"] if after else None,
                     "change": case["change"], "failing": failing})
    return rows


def _filters(data: dict[str, Any]) -> dict[str, list[str]]:
    cases = data["cases"]
    changes = {c["change"] for c in cases}
    checks = sorted({name for c in cases for side in (c["before"], c["after"]) if side for name, _, _ in side["checks"]})
    return {"changes": [k for k in STATUS_WORDS if k in changes],
            "slices": sorted({s for c in cases for s in c["slice"]}), "checks": checks}


def _reasons(verdict: Verdict, shown: set[str]) -> list[dict[str, Any]]:
    lines = advice.attributed_lines(verdict.attribution, verdict.reasons)
    return [{"blocking": r.blocking, "message": r.message, "label": r.label, "lines": attributed,
             "case": r.case if r.case in shown else None} for r, attributed in zip(verdict.reasons, lines)]


def _config_changes(verdict: Verdict) -> list[Any]:
    """The config diff a reviewer needs (as the comment shows it: no key that changes no answer)."""
    return [d for d in verdict.config_diff if not d.key.startswith(comment.QUIET_KEYS)
            and not new_at_default(d.key, d.before, d.after)]


def _gate_context(verdict: Verdict, baseline: RunResult | None, candidate: RunResult,
                  shown: set[str]) -> dict[str, Any]:
    icon, word = comment.outcome(verdict)
    gated = [{"row": row, "chart": charts.interval_chart(row, verdict.stats.bootstrap.get(row.metric),
                                                         verdict.noise.get(row.metric))}
             for row in verdict.metrics if row.gated]
    pairs = []
    if baseline is not None:
        pairs = [(i, baseline.case_map[i], c) for i, c in candidate.case_map.items()
                 if i in baseline.case_map and i in shown]
    attribution = verdict.attribution
    return {"icon": icon, "outcome": word, "headline": comment.headline(verdict), "verdict": verdict,
            "reasons": _reasons(verdict, shown), "gated": gated,
            "grid": charts.rank_grid(pairs, set(verdict.pass_to_fail)),
            "attribution_charts": [charts.attribution_chart(m) for m in attribution.metrics] if attribution else [],
            "attribution_footer": ablation.footer(attribution) if attribution else "",
            "config_changes": _config_changes(verdict), "mcnemar": verdict.stats.mcnemar,
            "base_sha": baseline.git_sha if baseline is not None else None}


def _context(run: RunResult, baseline: RunResult | None, verdict: Verdict | None, data: dict[str, Any],
             cfg: ReportConfig, title: str | None) -> dict[str, Any]:
    shown = {c["id"] for c in data["cases"]}
    context: dict[str, Any] = {
        "title": title if title is not None else cfg.title, "run": run, "baseline": baseline,
        "mode": data["mode"], "rows": _rows(data), "filters": _filters(data), "hidden": data["hidden"],
        "status_words": STATUS_WORDS, "golden": run.golden,
        "trends": [c for c in (charts.trend_chart(t) for t in trends(run, baseline=baseline, verdict=verdict,
                                                                      limit=cfg.history)) if c is not None],
        "verdict": None, "base_sha": None}
    if verdict is not None:
        context.update(_gate_context(verdict, baseline, run, shown))
    return context


def render_html(run: RunResult, *, baseline: RunResult | None = None, verdict: Verdict | None = None,
                cfg: ReportConfig | None = None, title: str | None = None,
                redact: Callable[[str], str] | None = None) -> str:
    """The report page. With ``verdict`` (and ``baseline`` unless there was none): the gate —
    ``run`` is the PR's candidate. Without: the run alone. ``redact`` removes secrets from every
    string the page holds (the action's masked values), before the data block is compressed."""
    cfg = cfg or ReportConfig()

    def clean(text: str) -> str:
        text = default_clean(text)
        return redact(text) if redact is not None else text

    data = page_data(run, baseline, verdict, clean)
    encoding, block = encode_data(data)
    css = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    js = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    token = _CLEAN.set(clean)
    try:
        return _ENV.get_template("report.html.j2").render(
            **_context(run, baseline, verdict, data, cfg, title), css=Markup(css), js=Markup(js),
            style_hash=_csp_hash(css), script_hash=_csp_hash(js), data_encoding=encoding, data_block=Markup(block))
    finally:
        _CLEAN.reset(token)

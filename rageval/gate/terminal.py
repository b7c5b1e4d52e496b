"""What the terminal and the job log show: the one-line summary of a verdict (also the commit
status description), the verdict's reasons with the attribution under them, and the table
`rageval run` prints. Every line through :func:`~rageval.gate.markdown.printable`: golden text,
answers and app errors never carry escape sequences or bidi tricks to a terminal."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rageval.gate import ablation
from rageval.gate.advice import attributed_lines, more_reasons, next_step
from rageval.gate.markdown import INLINE_MAX_CHARS, SUMMARY_TITLE_MAX, cut, printable
from rageval.gate.report import headline, outcome
from rageval.gate.verdict import Verdict
from rageval.metrics.aggregate import run_warnings
from rageval.metrics.registry import is_rate, summary_metric_names
from rageval.results import RunResult

SUMMARY_LINE_MAX = 140              # GitHub commit status descriptions are cut at 140 characters


def render_summary_line(verdict: Verdict, *, title: str = "RAG eval gate") -> str:
    """One line (≤ 140 characters, printable) for a commit status description or a log line, e.g.
    ``RAG eval gate: blocked — mrr@5 0.63 < 0.85 (floor); +2 more reasons``. The title is cut to
    60 characters first, so the verdict is always in it."""
    _, word = outcome(verdict)
    if len(title) > SUMMARY_TITLE_MAX:       # a long title must not push the verdict out
        title = title[: SUMMARY_TITLE_MAX - 1].rstrip() + "…"
    line = printable(" ".join(f"{title}: {word} — {headline(verdict)}{more_reasons(verdict)}".split()))
    if len(line) > SUMMARY_LINE_MAX:         # cut at a word, never inside one
        head = line[: SUMMARY_LINE_MAX - 1]
        line = (head.rsplit(" ", 1)[0] if " " in head[len(title):] else head).rstrip(" ,;:—") + "…"
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
    lines += [printable(f"warning: {w}") for w in run_warnings(result)]
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


TERMINAL_WIDTH = 80                 # when the output is not a terminal (a job log, a pipe)


def _wrapped(text: str, first: str, rest: str, width: int) -> list[str]:
    return textwrap.wrap(printable(text), width=max(width, 40), initial_indent=first, subsequent_indent=rest,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def render_terminal(verdict: Verdict, *, title: str = "RAG eval gate", width: int = TERMINAL_WIDTH,
                    written: Sequence[str] = ()) -> str:
    """What `rageval gate` prints: the summary line, every reason, under each blocking metric the
    knobs the drop was attributed to (``↳``, indented under the reason), what reverting does, the next
    step and where the files were written (``written``: "verdict: v.json" …); wrapped at ``width``,
    each line through :func:`printable`."""
    found = verdict.attribution
    lines = _wrapped(render_summary_line(verdict, title=title), "", "    ", width)
    for reason, attributed in zip(verdict.reasons, attributed_lines(found, verdict.reasons)):
        lines += _wrapped(reason.message, f"  {'BLOCK' if reason.blocking else 'note '} ", " " * 8, width)
        for line in attributed:
            lines += _wrapped(line, " " * 8 + "↳ ", " " * 10, width)
    finding = ablation.finding(found) if found is not None else None
    if finding:
        lines += _wrapped(f"attribution: {finding}", "  ", "    ", width)
    step = next_step(verdict)
    if step:
        lines += _wrapped(f"next step: {step}", "  ", "    ", width)
    if found is not None:
        lines += _wrapped(ablation.footer(found), "  ", "    ", width)
    for where in written:
        lines.append(printable(f"  {where}"))       # a path stays on one line, to be copied
    return "\n".join(lines) + "\n"

"""Main's trend, carried in the chain of baselines: the history each baseline RunResult holds, and
the trend of every gated metric drawn from it (a sparkline in the PR comment, a line chart in the
HTML report).

A new baseline carries the entries of the baseline before it on its branch plus one entry for that
baseline itself — its commit, date, golden set, judge and gated metrics — the last
``report.history`` of them (:func:`carried`). So the newest baseline artifact holds the branch's
whole recent trend and nothing else is ever downloaded.

An entry's values were measured under one golden set version and one judge. Where the next point
has another, the trend shows a *break*: the points on either side are drawn as separate segments
and never compared. The PR's value is compared with main's values over the same cases: a PR that
runs the ``pr`` subset is drawn beside main's values over the cases tagged ``pr`` (each entry
holds its gated metrics per tag).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rageval.gate.format import fmt
from rageval.gate.verdict import Verdict
from rageval.metrics.aggregate import summarize_cases
from rageval.metrics.judge import judge_signature
from rageval.records import HOLDOUT_TAG
from rageval.results import HistoryEntry, RunResult

SPARKS = "▁▂▃▄▅▆▇█"
BREAK = "¦"                 # between two points of another golden set or judge
GAP = "·"                   # a point without a value (the metric was not measured then)
MAX_SUBSETS = 20            # tags an entry holds values for: the most common ones
EPS = 1e-9


# --- the history a baseline carries ------------------------------------------------------------

def gated_metrics(gate: Any) -> list[str]:
    """The metrics a gate config gates overall (floors, then max_drop), from a GateConfig or the
    ``gate`` mapping of a RunResult's resolved config."""
    if isinstance(gate, Mapping):
        floors, drops = gate.get("floors") or {}, gate.get("max_drop") or {}
    else:
        floors, drops = gate.floors, gate.max_drop
    names = [*floors, *drops] if isinstance(floors, Mapping) and isinstance(drops, Mapping) else []
    return list(dict.fromkeys(str(n) for n in names))


def judge_label(config: Any) -> str | None:
    """The judge a run's judge-based values come from, in words (None: no judge ran). Two runs
    have the same label exactly when their judge signatures (``metrics.judge``) are equal."""
    sig = judge_signature(config)
    if sig is None:
        return None
    parts = [str(sig["model"])]
    if sig.get("prompt_version") is not None:
        parts.append(f"prompt v{sig['prompt_version']}")
    parts.append(f"temperature {sig['temperature']}")
    if sig["faithfulness"]:
        parts.append(f"faithfulness ({sig['faithfulness_calls']} calls)")
    parts.append("every case" if sig["always"] else "rules first")
    return ", ".join(parts)


def _tags(run: RunResult) -> list[str]:
    counts = Counter(t for c in run.cases for t in dict.fromkeys(c.tags) if t != HOLDOUT_TAG)
    return sorted(t for t, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_SUBSETS])


def history_entry(run: RunResult, metrics: Sequence[str], tags: Sequence[str] | None = None) -> HistoryEntry:
    """``run`` as one entry of a history: its gated ``metrics`` (those it has) over the whole run
    (the summary: the mean over a baseline's repeats) and over the cases of each tag (``tags``, else
    the most common ones but ``holdout``)."""
    names = [m for m in dict.fromkeys(metrics) if m in run.summary.metrics]
    subsets = {}
    for tag in _tags(run) if tags is None else tags:
        part = summarize_cases([c for c in run.cases if tag in c.tags], run.metric_names).metrics
        subsets[tag] = {m: part.get(m) for m in names}
    return HistoryEntry(commit=run.git_sha, date=run.created_at, golden=run.golden.name,
                        golden_version=run.golden.version, judge=judge_label(run.config),
                        metrics={m: run.summary.metrics.get(m) for m in names}, subsets=subsets)


def carried(previous: RunResult | None, metrics: Sequence[str], limit: int) -> tuple[HistoryEntry, ...]:
    """The history a new baseline carries: ``previous``'s history and ``previous`` itself (its
    values of ``metrics`` and of the metrics its own gate config named), the last ``limit`` of
    them; none without a previous baseline or with ``limit`` 0."""
    if previous is None or limit <= 0:
        return ()
    own = gated_metrics(previous.config.get("gate") or {})
    return (*previous.history, history_entry(previous, [*metrics, *own]))[-limit:]


# --- the trend of one metric -------------------------------------------------------------------

@dataclass(frozen=True)
class Point:
    """One value of a trend: a baseline of main (oldest first), or the PR's value (``pr``)."""

    value: float | None
    commit: str | None
    date: str | None
    golden: str                     # "banhang-returns v4"
    judge: str | None
    pr: bool = False

    @property
    def key(self) -> tuple[str, str | None]:
        """What must be equal for two points to be compared."""
        return self.golden, self.judge

    @property
    def label(self) -> str:
        if self.pr:
            return "PR"
        return (self.commit or "")[:7] or (self.date or "")[:10] or "?"


@dataclass(frozen=True)
class Trend:
    """A gated metric over main's last baselines, then the PR's value when there is one."""

    metric: str
    points: tuple[Point, ...]

    @property
    def main(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if not p.pr)

    @property
    def pr(self) -> Point | None:
        return next((p for p in self.points if p.pr), None)

    def breaks(self) -> list[int]:
        """Indices of the points that start a new segment (another golden set or judge)."""
        return [i for i in range(1, len(self.points)) if self.points[i].key != self.points[i - 1].key]

    def segments(self) -> list[tuple[Point, ...]]:
        """The points cut at every break."""
        cuts = [0, *self.breaks(), len(self.points)]
        return [self.points[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]

    def bounds(self) -> tuple[float, float] | None:
        values = [p.value for p in self.points if p.value is not None]
        return (min(values), max(values)) if values else None

    def sparkline(self) -> str:
        """``▅▆▆▇¦▇▇ → ▃``: main's values, ``¦`` at a break, then the PR's; one scale for all."""
        bounds = self.bounds()
        breaks = set(self.breaks())

        def spark(p: Point) -> str:
            if p.value is None or bounds is None:
                return GAP
            low, high = bounds
            level = 3 if high - low < EPS else round((p.value - low) / (high - low) * (len(SPARKS) - 1))
            return SPARKS[level]

        text = ""
        for i, p in enumerate(self.points):
            if p.pr:
                text += f" {BREAK} " if i in breaks else " → "
            elif i in breaks:
                text += BREAK
            text += spark(p)
        return text

    def summary(self) -> str:
        """``main 0.91 (0.88–0.91 over 6 baselines); this PR 0.87`` — the range over main's last
        segment only: values across a break are not compared."""
        last = [p for p in next((s for s in reversed(self.segments()) if any(not q.pr for q in s)), ()) if not p.pr]
        main = [p for p in last if p.value is not None]
        parts = []
        if main:
            low, high = min(p.value for p in main), max(p.value for p in main)  # type: ignore[type-var]
            span = f"{fmt(low)}–{fmt(high)}" if high - low >= EPS else fmt(low)
            since = " with this golden set and judge" if len(last) < len(self.main) else ""
            parts.append(f"main {fmt(main[-1].value)} ({span} over {len(last)} baseline{'s' if len(last) != 1 else ''}"
                         f"{since})")
        if self.pr is not None:
            parts.append(f"this PR {fmt(self.pr.value)}")
        return "; ".join(parts)


def _point(entry: HistoryEntry, metric: str, subset: str | None) -> Point:
    values = entry.metrics if subset is None else entry.subsets.get(subset, {})
    return Point(values.get(metric), entry.commit, entry.date, f"{entry.golden} v{entry.golden_version}", entry.judge)


def trends(run: RunResult, *, baseline: RunResult | None = None, verdict: Verdict | None = None,
           limit: int = 30) -> list[Trend]:
    """One trend per gated metric. A gate (``baseline`` given): main's history and baseline, then
    ``run``, the PR, with the value the gate decided on; values over the PR's subset. A run alone:
    its history and itself. At most ``limit`` of main's points; none when ``limit`` is 0."""
    if limit <= 0:
        return []
    if verdict is not None:
        metrics = [row.metric for row in verdict.metrics if row.gated]
        decided = {row.metric: row.candidate for row in verdict.metrics}
    else:
        metrics = gated_metrics(run.config.get("gate") or {})
        decided = dict(run.summary.metrics)
    chain_of = baseline if baseline is not None else run
    subset = run.golden.subset if baseline is not None else None
    entries = (*chain_of.history, history_entry(chain_of, metrics, [] if subset is None else [subset]))[-limit:]
    out = []
    for metric in metrics:
        points = [_point(e, metric, subset) for e in entries]
        if baseline is not None:
            points.append(Point(decided.get(metric), run.git_sha, run.created_at,
                                f"{run.golden.name} v{run.golden.version}", judge_label(run.config), pr=True))
        out.append(Trend(metric, tuple(points)))
    return out

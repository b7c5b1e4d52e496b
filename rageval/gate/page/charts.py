"""The HTML report's charts as geometry: plain records of coordinates the template draws as inline
SVG (no script needed to see them). Pure functions of the verdict and the runs.

* :func:`interval_chart` — a gated metric on its value axis: the floor, the baseline, the PR's
  value and its paired bootstrap interval as a bar, and the lowest value the allowed drop accepts.
* :func:`rank_grid` — first relevant rank before × after, one dot per case (pass → fail cases
  first and highlighted), one focusable cell per rank pair.
* :func:`attribution_chart` — per blocking metric, each knob's Δ alone and the Δ left when it
  alone is reverted, as bars around zero.
* :func:`trend_chart` — a gated metric over main's baselines and the PR: one line per segment of
  equal golden set and judge, golden-version changes marked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from rageval.gate.ablation import MetricAttribution
from rageval.gate.format import fmt, fmt_delta
from rageval.gate.stats import BootstrapCI
from rageval.gate.trend import Trend
from rageval.gate.verdict import MetricRow, NoiseBand
from rageval.metrics.registry import is_rate
from rageval.records import CaseResult

MAX_RANK_LEVELS = 10             # ranks past this share one row and column ("10+")


def _scale(low: float, high: float, x0: float, x1: float) -> tuple[float, float, float]:
    """(low, high, pixels per unit) with a non-empty domain."""
    if high - low < 1e-9:
        low, high = low - 0.05, high + 0.05
    return low, high, (x1 - x0) / (high - low)


# --- a gated metric and its interval ----------------------------------------------------------

@dataclass(frozen=True)
class IntervalChart:
    width: int
    height: int
    axis: tuple[float, float]                   # x of the domain's ends
    labels: tuple[str, str]                     # the domain's ends
    candidate: float | None = None              # x of the PR's value
    baseline: float | None = None
    floor: float | None = None
    allowed: float | None = None                # x of baseline − tolerance (the lowest value max_drop accepts)
    interval: tuple[float, float] | None = None
    title: str = ""


def interval_chart(row: MetricRow, ci: BootstrapCI | None, noise: NoiseBand | None,
                   width: int = 260, height: int = 34) -> IntervalChart:
    """``row``'s values on one axis (see the module doc); the interval is the bootstrap CI of Δ
    placed around the PR's value."""
    threshold = row.threshold
    floor = threshold.floor if threshold else None
    tolerance = None
    if threshold and threshold.max_drop is not None and row.baseline is not None:
        tolerance = max(threshold.max_drop, noise.band if noise else 0.0)
    interval = None
    if ci is not None and row.candidate is not None:
        interval = (row.candidate + ci.low - ci.delta, row.candidate + ci.high - ci.delta)
    allowed = None if tolerance is None or row.baseline is None else row.baseline - tolerance
    values = [v for v in (row.candidate, row.baseline, floor, allowed, *(interval or ())) if v is not None]
    if not values:
        return IntervalChart(width, height, (10.0, width - 10.0), ("", ""))
    pad = max(0.02, (max(values) - min(values)) * 0.15)
    low, high = min(values) - pad, max(values) + pad
    if is_rate(row.metric):
        low, high = max(0.0, low), min(1.0, high)
    low, high, k = _scale(low, high, 10.0, width - 10.0)

    def x(v: float | None) -> float | None:
        return None if v is None else round(10.0 + (min(max(v, low), high) - low) * k, 1)

    parts = [f"PR {fmt(row.candidate)}", f"baseline {fmt(row.baseline)}" if row.baseline is not None else "",
             f"floor {fmt(floor)}" if floor is not None else "",
             f"lowest allowed by max_drop {fmt(allowed)}" if allowed is not None else "",
             f"95% CI of Δ [{fmt_delta(ci.low)}, {fmt_delta(ci.high)}]" if ci is not None else ""]
    return IntervalChart(width, height, (10.0, width - 10.0), (fmt(low), fmt(high)), x(row.candidate),
                         x(row.baseline), x(floor), x(allowed),
                         None if interval is None else (x(interval[0]) or 0.0, x(interval[1]) or 0.0),
                         "; ".join(p for p in parts if p))


# --- rank shifts -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Dot:
    case: str
    x: float
    y: float
    r: float
    highlight: bool                             # went pass → fail


@dataclass(frozen=True)
class Cell:
    before: str                                 # "1" … "10+", "—" (not retrieved)
    after: str
    x: float
    y: float
    size: float
    count: int
    changed: bool                               # off the diagonal


@dataclass(frozen=True)
class RankGrid:
    levels: tuple[str, ...]
    cell: float
    margin: float
    cells: tuple[Cell, ...]
    dots: tuple[Dot, ...]
    empty: tuple[tuple[float, float], ...] = ()     # (x, y) of the cells no case is in
    width: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", self.margin + self.cell * len(self.levels) + 4)


def _level(rank: int | None, top: int) -> str:
    if rank is None:
        return "—"
    return f"{MAX_RANK_LEVELS}+" if rank >= MAX_RANK_LEVELS and top > MAX_RANK_LEVELS else str(rank)


def rank_grid(pairs: Sequence[tuple[str, CaseResult, CaseResult]], pass_to_fail: set[str],
              cell: float = 54.0, margin: float = 70.0) -> RankGrid | None:
    """One dot per (id, before, after) case that expects sections, in the cell of its first
    relevant rank before (column) and after (row); None when no case expects a section."""
    pairs = [p for p in pairs if p[1].expected_sections and p[2].expected_sections]
    if not pairs:
        return None
    top = max((r for _, b, a in pairs for r in (b.first_relevant_rank, a.first_relevant_rank) if r), default=1)
    ranks = [str(r) for r in range(1, min(top, MAX_RANK_LEVELS) + 1)]
    if top > MAX_RANK_LEVELS:
        ranks[-1] = f"{MAX_RANK_LEVELS}+"
    levels = (*ranks, "—")
    groups: dict[tuple[str, str], list[str]] = {}
    for case_id, b, a in sorted(pairs, key=lambda p: p[0] not in pass_to_fail):
        groups.setdefault((_level(b.first_relevant_rank, top), _level(a.first_relevant_rank, top)), []).append(case_id)
    per_row = max(1, math.ceil(math.sqrt(max(len(v) for v in groups.values()))))
    step = (cell - 8) / per_row
    cells, dots = [], []
    for (before, after), ids in groups.items():
        cx, cy = margin + levels.index(before) * cell, margin + levels.index(after) * cell
        cells.append(Cell(before, after, cx, cy, cell, len(ids), before != after))
        for n, case_id in enumerate(ids):
            dots.append(Dot(case_id, round(cx + 4 + step * (n % per_row + 0.5), 1),
                            round(cy + 4 + step * (n // per_row + 0.5), 1), round(max(1.0, step * 0.38), 1),
                            case_id in pass_to_fail))
    cells.sort(key=lambda c: (levels.index(c.after), levels.index(c.before)))
    empty = tuple((margin + levels.index(b) * cell, margin + levels.index(a) * cell)
                  for a in levels for b in levels if (b, a) not in groups)
    return RankGrid(levels, cell, margin, tuple(cells), tuple(dots), empty)


# --- attribution -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bar:
    label: str
    kind: str                                   # alone | reverted
    value: float
    x: float
    y: float
    width: float


@dataclass(frozen=True)
class AttributionChart:
    metric: str
    lines: tuple[str, ...]                      # the sentences the comment and the terminal use
    bars: tuple[Bar, ...]
    labels: tuple[tuple[str, float], ...]       # (knob, y)
    zero: float
    whole: float | None                         # x of the whole Δ
    width: int
    height: int


def attribution_chart(part: MetricAttribution, width: int = 520, label_width: int = 190,
                      row: int = 30) -> AttributionChart:
    values = [v for e in part.effects for v in (e.alone, e.left_when_reverted) if v is not None]
    values += [0.0, part.whole or 0.0]
    pad = max(0.01, (max(values) - min(values)) * 0.08)
    low, high, k = _scale(min(values) - pad, max(values) + pad, label_width + 10.0, width - 10.0)

    def x(v: float) -> float:
        return round(label_width + 10.0 + (v - low) * k, 1)

    zero = x(0.0)
    bars, labels = [], []
    for i, effect in enumerate(part.effects):
        y = 8.0 + i * row
        labels.append((effect.knob, y + row / 2 - 4))
        for j, (kind, value) in enumerate((("alone", effect.alone), ("reverted", effect.left_when_reverted))):
            if value is not None:
                left = min(zero, x(value))
                bars.append(Bar(effect.knob, kind, value, left, y + j * 11, round(abs(x(value) - zero), 1)))
    return AttributionChart(part.metric, tuple(part.lines()), tuple(bars), tuple(labels), zero,
                            None if part.whole is None else x(part.whole), width, int(16 + row * len(part.effects)))


# --- trend -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TrendMark:
    x: float
    y: float | None
    label: str
    value: str
    pr: bool


@dataclass(frozen=True)
class TrendChart:
    metric: str
    summary: str
    marks: tuple[TrendMark, ...]
    segments: tuple[str, ...]                   # SVG polyline points of each segment of main
    pr_link: str | None                         # polyline from main's last point to the PR's, same segment
    changes: tuple[tuple[float, str], ...]      # (x, "golden v4" / "judge") where a segment starts
    range: tuple[str, str]
    width: int
    height: int


def trend_chart(trend: Trend, width: int = 340, height: int = 130) -> TrendChart | None:
    """None when main has fewer than two points (no line to draw yet)."""
    if len(trend.main) < 2:
        return None
    bounds = trend.bounds() or (0.0, 1.0)
    pad = max(0.01, (bounds[1] - bounds[0]) * 0.1)
    low, high = bounds[0] - pad, bounds[1] + pad
    if is_rate(trend.metric):
        low, high = max(0.0, low), min(1.0, high)
    low, high, k = _scale(low, high, float(height - 22), 14.0)
    n = len(trend.points)
    step = (width - 50) / max(1, n - 1)
    xs = [round(40 + i * step, 1) for i in range(n)]
    marks = tuple(TrendMark(xs[i], None if p.value is None else round(height - 22 + (p.value - low) * k, 1),
                            p.label, fmt(p.value), p.pr) for i, p in enumerate(trend.points))
    segments, index = [], 0
    for segment in trend.segments():
        pts = [marks[index + j] for j, p in enumerate(segment) if not p.pr and marks[index + j].y is not None]
        if len(pts) > 1:
            segments.append(" ".join(f"{m.x},{m.y}" for m in pts))
        index += len(segment)
    pr_link = None
    last, pr = marks[-1], trend.pr
    if pr is not None and last.y is not None and n > 1 and marks[-2].y is not None and n - 1 not in trend.breaks():
        pr_link = f"{marks[-2].x},{marks[-2].y} {last.x},{last.y}"
    changes = []
    for i in trend.breaks():
        before, after = trend.points[i - 1], trend.points[i]
        what = after.golden.rsplit(" ", 1)[-1] if before.golden != after.golden else "judge"
        changes.append((round(xs[i] - step / 2, 1), what))
    return TrendChart(trend.metric, trend.summary(), marks, tuple(segments), pr_link, tuple(changes),
                      (fmt(low), fmt(high)), width, height)


def delta_level(delta: float | None) -> str:
    """A CSS class for a Δ's colour: ``d-n3`` (a drop of 0.10 or more) … ``d-0`` (under 0.005)
    … ``d-p3`` (a gain of 0.10 or more), in steps of 0.05."""
    if delta is None or abs(delta) < 0.005:
        return "d-0"
    return f"d-{'n' if delta < 0 else 'p'}{min(3, 1 + int(abs(delta) / 0.05))}"

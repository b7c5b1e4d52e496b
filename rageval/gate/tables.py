"""The tables a Verdict carries for the report: the metric table, the by-slice table and the
noise band. Pure functions of the gate's context and decisions; nothing here decides."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rageval.gate import stats
from rageval.gate.thresholds import Context, ThresholdResult, delta_of, mean_value
from rageval.gate.verdict import MetricRow, NoiseBand, Reason, SliceRow, Threshold
from rageval.results import RunResult

THRESHOLD_RULES = ("floor", "max_drop", "slice_floor", "slice_max_drop")


def _status(reasons: Iterable[Reason], slice_key: str | None, metric: str, value: float | None) -> str:
    mine = [r for r in reasons if r.metric == metric and r.slice == slice_key and r.case is None
            and r.rule in THRESHOLD_RULES]
    if any(r.blocking for r in mine):
        return "fail"
    if mine:
        return "warn"                   # a breach that is reported but not blocking (not significant)
    if value is None:
        return "n/a"
    return "pass"


def _threshold(checks: Iterable[ThresholdResult], slice_key: str | None, metric: str) -> Threshold | None:
    out: dict[str, float] = {}
    for check in checks:
        if check.slice == slice_key and check.metric == metric:
            floor = check.rule.endswith("floor")
            out["floor" if floor else "max_drop"] = check.threshold if floor else -check.threshold
    return Threshold(**out) if out else None


def metric_rows(ctx: Context, runs: Sequence[RunResult], checks: Sequence[ThresholdResult],
                reasons: Sequence[Reason]) -> list[MetricRow]:
    """A row for every summary metric of either run and every gated one."""
    cand_metrics = ctx.candidate.summary.metrics
    base_metrics = ctx.baseline.summary.metrics if ctx.baseline is not None else {}
    names = list(dict.fromkeys([*(m for m in ctx.candidate.metric_names if m in cand_metrics),
                                *cand_metrics, *base_metrics, *ctx.cfg.floors, *ctx.cfg.max_drop]))
    rows = []
    for metric in names:
        value = mean_value(runs, None, metric)
        rows.append(MetricRow(metric, base_metrics.get(metric), value,
                              delta_of(ctx, runs, None, metric) if ctx.comparable else None,
                              _threshold(checks, None, metric), _status(reasons, None, metric, value)))
    return rows


def _slice_metrics(ctx: Context, key: str) -> list[str]:
    gate = ctx.cfg.slices.get(key)
    if gate is not None:
        return list(dict.fromkeys([*gate.floors, *gate.max_drop]))
    present = {m for run in (ctx.candidate, ctx.baseline) if run is not None
               for m in ((run.summary.by_slice or {}).get(key).metrics if key in (run.summary.by_slice or {}) else {})}
    return ["pass_rate"] if "pass_rate" in present else []


def slice_rows(ctx: Context, runs: Sequence[RunResult], checks: Sequence[ThresholdResult],
               reasons: Sequence[Reason]) -> list[SliceRow]:
    """One row per (slice, metric): gated slices with their gated metrics, the others with pass_rate."""
    keys = list(dict.fromkeys([*(ctx.candidate.summary.by_slice or {}),
                               *((ctx.baseline.summary.by_slice or {}) if ctx.baseline is not None else {}),
                               *ctx.cfg.slices]))
    insufficient = {r.slice for r in reasons if r.rule == "slice_insufficient_data"}
    rows = []
    for key in keys:
        for metric in _slice_metrics(ctx, key):
            value = mean_value(runs, key, metric)
            before = ctx.baseline.summary.value(metric, key) if ctx.baseline is not None else None
            delta = delta_of(ctx, runs, key, metric) if ctx.comparable and None not in (before, value) else None
            status = _status(reasons, key, metric, value)
            if key in insufficient and status != "fail":
                status = "insufficient_data"
            rows.append(SliceRow(key, metric, ctx.baseline.summary.slice_n(key) if ctx.baseline is not None else None,
                                 ctx.candidate.summary.slice_n(key), before, value, delta,
                                 _threshold(checks, key, metric), key in ctx.cfg.slices, status))
    return rows


def noise_rows(ctx: Context, metrics: Sequence[str]) -> dict[str, NoiseBand]:
    """The noise band of every metric with measured noise or a max_drop gate."""
    out: dict[str, NoiseBand] = {}
    for metric in metrics:
        sb = ctx.baseline.sigma(metric) if ctx.baseline is not None else 0.0
        sc = ctx.candidate.sigma(metric)
        if sb == 0.0 and sc == 0.0 and not (ctx.comparable and metric in ctx.cfg.max_drop):
            continue
        sd = stats.sigma_diff(sb, sc)
        out[metric] = NoiseBand(sb, sc, sd, ctx.cfg.noise_k * sd)
    return out

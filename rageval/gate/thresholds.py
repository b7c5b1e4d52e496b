"""Floors and tolerance over noise, overall and per gated slice: the gate's aggregate rules.

``threshold_results(ctx, runs)`` decides every floor and max_drop on the mean of ``runs`` (the
candidate, plus any full re-runs):

* **floors** — ``value < floor`` blocks (``mrr@5 0.63 < 0.85``). A floored metric with no value
  (n/a) blocks too: a floor that cannot be checked is never a silent pass. A floor on a judge
  metric that ``rageval.gate.compare`` did not compare (the judge changed, or main's baseline had
  none) is shown, not gated, until main's baseline uses the same judge.
* **max_drop** — blocks when the drop exceeds ``max(max_drop, noise_k · σ_diff)``, with
  ``σ_diff = sqrt(σ_base² + σ_cand²)`` from each RunResult's ``noise.sigma`` (unmeasured σ = 0).
  The delta is candidate − baseline of the summary values when both runs hold the same case ids,
  otherwise the paired delta of the per-case values over the common cases.
* **significance** (optional ``gate.significance = α``) — a max_drop breach blocks only when it is
  significant: for ``pass_rate`` the exact McNemar test on the pass/fail flips must give p < α;
  for every other metric the upper bound of the paired bootstrap CI at confidence 1 − α must be
  below 0. A breach whose statistic cannot be computed (no per-case values) blocks.
* **slices** — ``gate.slices["type=injection"]`` applies floors / max_drop to the slice's summary;
  a gated slice with fewer than ``min_slice_cases`` cases (in the candidate, or in the baseline
  for max_drop) is ``insufficient_data``: a non-blocking reason of its own, never a silent pass.

Comparisons below ``1e-9`` are treated as equal, so a drop of exactly ``max_drop`` passes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from rageval.gate import stats
from rageval.gate.format import fmt, fmt_delta
from rageval.gate.verdict import Reason
from rageval.metrics.registry import from_retrieval, judged_metric_names
from rageval.results import RunResult
from rageval.settings import GateConfig

EPS = 1e-9
DETERMINISTIC_EMBEDDERS = ("local", "e5")
DETERMINISTIC_GENERATORS = ("extractive", "none")

RerunFn = Callable[[list[str] | None], RunResult]

MSG_FLOOR = "{metric} {value} < {floor}"
ON_OWN = " on the PR's golden set"
MSG_FLOOR_NA = "{metric} has no value in the candidate (n/a); the floor {floor} cannot be checked"
MSG_FLOOR_NEW_JUDGE = (" — shown, not gated: main's baseline was not judged by this judge; floors on judge "
                       "metrics gate once it is")
MSG_DROP = "{metric} dropped {before} → {after} (Δ {delta}, tolerance {tol}{noise})"
MSG_DROP_NA = "{metric} has no value in the candidate (n/a) but {before} in the baseline"
MSG_INSUFFICIENT = ("slice {slice}: {n} {side} cases < min_slice_cases {min}; "
                    "its {what} not applied")

Target = tuple[str | None, Mapping[str, float], Mapping[str, float]]


def pipeline_of(candidate: RunResult) -> tuple[bool, bool]:
    """(retrieval deterministic, generation deterministic) as the candidate's config says."""
    config = candidate.config
    embedding = config.get("embedding") or {}
    generation = config.get("generation") or {}
    judge = config.get("judge") or {}
    retrieval = embedding.get("provider") in DETERMINISTIC_EMBEDDERS
    gen = generation.get("provider") in DETERMINISTIC_GENERATORS and not judge.get("model")
    return retrieval, gen


def rerunnable(metric: str, pipeline: tuple[bool, bool]) -> bool:
    det_retrieval, det_generation = pipeline
    if from_retrieval(metric):
        return not det_retrieval
    return not (det_retrieval and det_generation)


@dataclass(frozen=True)
class ThresholdResult:
    """One floor or max_drop decision on one (slice, metric)."""

    rule: str                   # floor | max_drop | slice_floor | slice_max_drop
    slice: str | None
    metric: str
    value: float | None         # floor: the value; max_drop: the delta
    threshold: float            # floor: the floor; max_drop: −tolerance
    failed: bool
    message: str
    blocking: bool
    rerunnable: bool

    @property
    def breach(self) -> float:
        return float("inf") if self.value is None else self.threshold - self.value

    @property
    def key(self) -> str:
        """``mrr@5`` overall, ``type=injection:judge_pass`` in a slice."""
        return self.metric if self.slice is None else f"{self.slice}:{self.metric}"


@dataclass
class Context:
    """What every aggregate decision needs about the two runs."""

    baseline: RunResult | None
    candidate: RunResult
    cfg: GateConfig
    comparable: bool
    same_cases: bool
    common: list[str]
    pipeline: tuple[bool, bool]
    mcnemar_by_slice: dict[str | None, stats.McNemar]
    ci: dict[tuple[str | None, str], stats.BootstrapCI | None]
    skip_drops: frozenset[str] = frozenset()     # metrics both runs have but that are not compared (judge changed)
    # floors apply to this run (the PR's own golden set) when the candidate is the PR's pipeline on
    # main's cases (its golden set changed some of them: rageval.gate.decide); None: the candidate
    own: RunResult | None = None


def mean_value(runs: Sequence[RunResult], slice_key: str | None, metric: str) -> float | None:
    return stats.mean_or_none(r.summary.value(metric, slice_key) for r in runs)


def _slice_ids(ctx: Context, slice_key: str | None) -> list[str]:
    if slice_key is None:
        return list(ctx.common)
    cases = ctx.candidate.case_map
    return [i for i in ctx.common if slice_key in cases[i].slice_labels]


def change_of(ctx: Context, runs: Sequence[RunResult], slice_key: str | None,
              metric: str) -> tuple[float | None, float | None, float | None]:
    """(before, after, Δ) of ``metric`` between the baseline and the mean of the candidate runs:
    the summary values when both runs hold the same unchanged cases, otherwise the means of the
    per-case values over the cases they share unchanged (so before → after and Δ agree)."""
    if ctx.baseline is None:
        return None, None, None
    base, after = ctx.baseline.summary.value(metric, slice_key), mean_value(runs, slice_key, metric)
    if ctx.same_cases:
        return base, after, None if base is None or after is None else after - base
    pairs = [stats.paired_values(ctx.baseline, run, metric, _slice_ids(ctx, slice_key)) for run in runs]
    if not pairs or not pairs[0][0].size:
        return base, after, None
    before = float(pairs[0][0].mean())
    after = stats.mean_or_none(float(a.mean()) for _, a in pairs if a.size)
    return before, after, None if after is None else after - before


def delta_of(ctx: Context, runs: Sequence[RunResult], slice_key: str | None, metric: str) -> float | None:
    """Δ of ``metric`` (see :func:`change_of`)."""
    return change_of(ctx, runs, slice_key, metric)[2]


def _significance_note(ctx: Context, slice_key: str | None, metric: str) -> str | None:
    """None when the breach is significant (it blocks); otherwise why it is not."""
    alpha = ctx.cfg.significance
    if alpha is None or ctx.baseline is None:
        return None
    if metric == "pass_rate":
        test = ctx.mcnemar_by_slice.get(slice_key)
        if test is None or test.p < alpha:
            return None
        return f"not significant: McNemar p={test.p:.3f} ≥ {alpha:g}"
    key = (slice_key, metric)
    if key not in ctx.ci:
        before, after = stats.paired_values(ctx.baseline, ctx.candidate, metric, _slice_ids(ctx, slice_key))
        ctx.ci[key] = stats.paired_bootstrap(before, after, confidence=1.0 - alpha)
    ci = ctx.ci[key]
    if ci is None or ci.high < 0:
        return None
    return f"not significant: {100 * (1 - alpha):g}% CI of Δ [{fmt_delta(ci.low)}, {fmt_delta(ci.high)}] includes 0"


def _targets(ctx: Context) -> tuple[list[Target], list[Reason]]:
    """(slice, floors, max_drop) to check, overall first; and the insufficient-data notes of
    gated slices with too few cases."""
    cfg = ctx.cfg
    targets: list[Target] = [(None, cfg.floors, cfg.max_drop)]
    notes: list[Reason] = []
    for slice_key, gate in cfg.slices.items():
        n_cand = (ctx.own or ctx.candidate).summary.slice_n(slice_key)
        drops = dict(gate.max_drop) if ctx.comparable else {}
        if ctx.own is not None and ctx.candidate.summary.slice_n(slice_key) < cfg.min_slice_cases:
            drops = {}
        if n_cand < cfg.min_slice_cases:
            notes.append(Reason("slice_insufficient_data", MSG_INSUFFICIENT.format(
                slice=slice_key, n=n_cand, side="candidate", min=cfg.min_slice_cases, what="gates were"),
                False, slice=slice_key, value=n_cand, threshold=cfg.min_slice_cases))
            continue
        n_base = ctx.baseline.summary.slice_n(slice_key) if ctx.baseline is not None else 0
        if drops and n_base < cfg.min_slice_cases:
            notes.append(Reason("slice_insufficient_data", MSG_INSUFFICIENT.format(
                slice=slice_key, n=n_base, side="baseline", min=cfg.min_slice_cases, what="max_drop was"),
                False, slice=slice_key, value=n_base, threshold=cfg.min_slice_cases))
            drops = {}
        targets.append((slice_key, dict(gate.floors), drops))
    return targets, notes


def _prefix(slice_key: str | None) -> tuple[str, str]:
    return ("", "") if slice_key is None else ("slice_", f"slice {slice_key}: ")


def _floor_check(ctx: Context, runs: Sequence[RunResult], slice_key: str | None, metric: str, floor: float) -> ThresholdResult:
    value = mean_value([ctx.own] if ctx.own is not None else runs, slice_key, metric)
    if value is None:
        message, failed = MSG_FLOOR_NA.format(metric=metric, floor=fmt(floor)), True
    else:
        failed = value < floor - EPS
        message = MSG_FLOOR.format(metric=metric, value=fmt(value, floor), floor=fmt(floor, value))
    if ctx.own is not None:
        message += ON_OWN
    rule, where = _prefix(slice_key)
    blocking = failed
    if failed and metric in ctx.skip_drops and metric in judged_metric_names():
        message, blocking = message + MSG_FLOOR_NEW_JUDGE, False
    return ThresholdResult(rule + "floor", slice_key, metric, value, float(floor), failed, where + message, blocking,
                 rerunnable(metric, ctx.pipeline))


def _drop_check(ctx: Context, base: RunResult, runs: Sequence[RunResult], slice_key: str | None, metric: str,
                max_drop: float) -> ThresholdResult | None:
    if base.summary.value(metric, slice_key) is None:
        return None                      # nothing to drop from: the metric is new
    sigma = stats.sigma_diff(base.sigma(metric, slice_key), ctx.candidate.sigma(metric, slice_key))
    tol = max(float(max_drop), ctx.cfg.noise_k * sigma)
    before, after, delta = change_of(ctx, runs, slice_key, metric)
    rule, where = _prefix(slice_key)
    if after is None or delta is None:
        return ThresholdResult(rule + "max_drop", slice_key, metric, None, -tol, True,
                     where + MSG_DROP_NA.format(metric=metric, before=fmt(before)), True,
                     rerunnable(metric, ctx.pipeline))
    failed = delta < -tol - EPS
    noise = f" = {ctx.cfg.noise_k:g}·σ {fmt(sigma)}" if tol > max_drop + EPS else ""
    message = where + MSG_DROP.format(metric=metric, before=fmt(before), after=fmt(after, before),
                                      delta=fmt_delta(delta), tol=fmt(tol), noise=noise)
    blocking = failed
    note = _significance_note(ctx, slice_key, metric) if failed else None
    if note:
        message, blocking = f"{message} — {note}", False
    return ThresholdResult(rule + "max_drop", slice_key, metric, delta, -tol, failed, message, blocking,
                 rerunnable(metric, ctx.pipeline))


def threshold_results(ctx: Context, runs: Sequence[RunResult]) -> tuple[list[ThresholdResult], list[Reason]]:
    """Floors and max_drop, overall and per gated slice, on the mean of ``runs``; plus the
    insufficient-data reasons of gated slices."""
    targets, notes = _targets(ctx)
    checks: list[ThresholdResult] = []
    for slice_key, floors, drops in targets:
        checks += [_floor_check(ctx, runs, slice_key, metric, floor) for metric, floor in floors.items()]
        if ctx.comparable and ctx.baseline is not None:
            found = (_drop_check(ctx, ctx.baseline, runs, slice_key, m, drop) for m, drop in drops.items()
                     if m not in ctx.skip_drops)
            checks += [c for c in found if c is not None]
    return checks, notes

"""Statistics over RunResults: paired per-case values, noise, McNemar, paired bootstrap.

Pure functions over records (numpy only); nothing here does I/O or knows about the gate's rules.
The gate (``rageval.gate.decide``) decides; this module measures.

* :func:`case_values` / :func:`paired_values` — the per-case values behind one summary metric
  (``rageval.metrics.aggregate.case_value``: the numbers whose mean is the summary value), so two
  runs can be compared case by case.
* :func:`mcnemar` / :func:`mcnemar_exact` — exact McNemar test on the discordant pass/fail pairs.
* :func:`paired_bootstrap` / :func:`bootstrap_deltas` — seeded paired bootstrap CI of a delta.
* :func:`sigma_over_runs` / :func:`flaky_cases` — noise measured over repeated runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rageval.metrics.registry import case_value
from rageval.records import Record
from rageval.results import RunResult

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95


# --- per-case values -------------------------------------------------------------------------

def case_values(run: RunResult, metric: str) -> dict[str, float]:
    """Case id -> per-case value of ``metric`` for every case that contributes to it."""
    out: dict[str, float] = {}
    for case in run.cases:
        value = case_value(case, metric)
        if value is not None:
            out[case.id] = value
    return out


def paired_values(baseline: RunResult, candidate: RunResult, metric: str,
                  ids: Iterable[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Aligned (before, after) arrays of ``metric`` over the cases both runs have a value for,
    restricted to ``ids`` when given, in the candidate's order."""
    before = case_values(baseline, metric)
    after = case_values(candidate, metric)
    keep = None if ids is None else set(ids)
    common = [i for i in after if i in before and (keep is None or i in keep)]
    return (np.array([before[i] for i in common], dtype=float),
            np.array([after[i] for i in common], dtype=float))


# --- McNemar ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class McNemar(Record):
    """Discordant pairs: ``b`` passed before and fails now, ``c`` failed before and passes now."""

    b: int
    c: int
    p: float


def binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exact (integer arithmetic, then one division)."""
    if n < 0 or k < 0:
        return 0.0 if k < 0 else 1.0
    k = min(k, n)
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: p = min(1, 2 · BinomCDF(min(b, c); b + c, 1/2));
    no discordant pairs (b + c = 0) gives p = 1.0."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binom_cdf_half(min(b, c), n))


def mcnemar(before: Mapping[str, bool | None], after: Mapping[str, bool | None]) -> McNemar:
    """McNemar over cases present in ``before`` with a True/False outcome.

    A case that passed before and is absent from ``after`` counts as a failure (a missing case is
    a failure); a case with ``None`` on either side (errored) is left out.
    """
    b = c = 0
    for case_id, was in before.items():
        if was is None:
            continue
        now = after.get(case_id, False) if case_id in after else False
        if now is None:
            continue
        if was and not now:
            b += 1
        elif not was and now and case_id in after:
            c += 1
    return McNemar(b, c, mcnemar_exact(b, c))


# --- paired bootstrap ------------------------------------------------------------------------

@dataclass(frozen=True)
class BootstrapCI(Record):
    """Mean paired delta (after − before) and its percentile confidence interval over ``n`` pairs."""

    delta: float
    low: float
    high: float
    n: int | None = None           # verdicts of rageval 0.1.0 did not record it
    OMIT_NONE = ("n",)


def paired_bootstrap(before: Sequence[float], after: Sequence[float], *,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                     confidence: float = DEFAULT_CONFIDENCE,
                     draws: dict[tuple[int, int, int], np.ndarray] | None = None) -> BootstrapCI | None:
    """Percentile bootstrap CI of mean(after − before), resampling cases (pairs) with
    replacement. Seeded: the same inputs give the same interval. None for zero pairs. ``draws``:
    resampled indices already drawn, by (pairs, resamples, seed) — the same seed draws the same
    indices for every metric of a gate, so they are drawn once."""
    a = np.asarray(before, dtype=float)
    z = np.asarray(after, dtype=float)
    if a.shape != z.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be two equal-length 1-D sequences, got {a.shape} and {z.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    n = a.size
    if n == 0:
        return None
    diffs = z - a
    idx = None if draws is None else draws.get((n, resamples, seed))
    if idx is None:
        idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        if draws is not None:
            draws[(n, resamples, seed)] = idx
    means = diffs[idx].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return BootstrapCI(float(diffs.mean()), float(low), float(high), int(n))


def bootstrap_deltas(baseline: RunResult, candidate: RunResult, metrics: Iterable[str], *,
                     ids: Iterable[str] | None = None, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, BootstrapCI]:
    """Paired bootstrap CI of each metric's delta over the common cases; metrics with no
    per-case values (or no common cases) are left out."""
    keep = None if ids is None else list(ids)
    out: dict[str, BootstrapCI] = {}
    draws: dict[tuple[int, int, int], np.ndarray] = {}
    for metric in metrics:
        before, after = paired_values(baseline, candidate, metric, keep)
        ci = paired_bootstrap(before, after, resamples=resamples, seed=seed, confidence=confidence, draws=draws)
        if ci is not None:
            out[metric] = ci
    return out


# --- noise -----------------------------------------------------------------------------------

def sigma_over_runs(runs: Sequence[Mapping[str, float | None]]) -> dict[str, float]:
    """Metric -> standard deviation over repeated runs' summary metrics.

    Sample standard deviation (ddof=1): the repeats are a sample of the run-to-run noise, and
    with the 3–5 repeats a baseline can afford the population form would understate it. A metric
    with fewer than two non-null values has no measured noise and is left out (the gate then uses
    σ = 0 for it, i.e. the configured max_drop alone).
    """
    names: list[str] = []
    for run in runs:
        names.extend(m for m in run if m not in names)
    out: dict[str, float] = {}
    for name in names:
        values = [float(run[name]) for run in runs  # type: ignore[arg-type]
                  if isinstance(run.get(name), int | float) and not isinstance(run.get(name), bool)]
        if len(values) >= 2:
            out[name] = float(np.std(values, ddof=1))
    return out


def sigma_diff(sigma_before: float | None, sigma_after: float | None) -> float:
    """σ of a difference of two independent runs: sqrt(σ_b² + σ_c²); unknown σ counts as 0.
    (``math.hypot`` does not overflow where squaring a huge σ would.)"""
    return math.hypot(sigma_before or 0.0, sigma_after or 0.0)


def flaky_cases(runs: Sequence[Mapping[str, bool | None]]) -> list[str]:
    """Case ids whose pass/fail outcome differed across runs (each run: case id -> passed).
    Errored outcomes (None) are ignored; ids keep the order of first appearance."""
    seen: dict[str, set[bool]] = {}
    for run in runs:
        for case_id, passed in run.items():
            outcomes = seen.setdefault(case_id, set())
            if passed is not None:
                outcomes.add(bool(passed))
    return [case_id for case_id, outcomes in seen.items() if len(outcomes) > 1]


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """Mean of the non-null values; None for none (an aggregate over nothing is n/a)."""
    kept = [float(v) for v in values if v is not None]
    return float(np.mean(kept)) if kept else None

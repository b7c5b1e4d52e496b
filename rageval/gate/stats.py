"""Statistics over RunResults: paired per-case values, noise, McNemar, paired bootstrap.

Pure functions over records (numpy only); nothing here does I/O or knows about the gate's rules.
The gate (``rageval.gate.decide``) decides; this module measures.

* :func:`case_values` / :func:`paired_values` — the per-case values behind one summary metric
  (``rageval.metrics.values.case_value``: the numbers whose mean is the summary value), so two
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

from rageval.records import Record
from rageval.results import RunResult

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95


# --- per-case values -------------------------------------------------------------------------

def case_values(run: RunResult, metric: str) -> dict[str, float]:
    """Case id -> per-case value of ``metric`` for every case that contributes to it."""
    return {case.id: value for case, value in zip(run.cases, run.values_of(metric)) if value is not None}


Pairs = tuple[np.ndarray, np.ndarray]


def pairs_of(baseline: RunResult, candidate: RunResult, ids: Iterable[str] | None = None) -> Pairs:
    """Where each case both runs answered (restricted to ``ids`` when given) sits in the baseline's
    and in the candidate's cases, in the candidate's order."""
    where = {case.id: i for i, case in enumerate(baseline.cases)}
    keep = None if ids is None else set(ids)
    found = [(where[c.id], j) for j, c in enumerate(candidate.cases) if c.id in where and (keep is None or c.id in keep)]
    return np.array([b for b, _ in found], dtype=np.intp), np.array([c for _, c in found], dtype=np.intp)


def paired_values(baseline: RunResult, candidate: RunResult, metric: str,
                  ids: Iterable[str] | None = None, pairs: Pairs | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Aligned (before, after) arrays of ``metric`` over the cases both runs have a value for,
    restricted to ``ids`` when given, in the candidate's order. ``pairs``: :func:`pairs_of` the
    runs and ``ids``, when the caller pairs several metrics."""
    at_base, at_cand = pairs_of(baseline, candidate, ids) if pairs is None else pairs
    # a case without a value (None) is NaN here, and left out; every value a run holds is finite
    before = np.array(baseline.values_of(metric), dtype=float)[at_base]
    after = np.array(candidate.values_of(metric), dtype=float)[at_cand]
    both = ~(np.isnan(before) | np.isnan(after))
    return before[both], after[both]


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


def _checked(before: Sequence[float], after: Sequence[float], resamples: int,
             confidence: float) -> np.ndarray:
    """after − before, once the arguments are known to make sense."""
    a = np.asarray(before, dtype=float)
    z = np.asarray(after, dtype=float)
    if a.shape != z.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be two equal-length 1-D sequences, got {a.shape} and {z.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    return z - a


#: resamples averaged at a time: each metric's resampled differences, BLOCK × pairs of them, stay in cache
BLOCK = 50


def resampled_means(diffs: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The mean of each row of ``diffs`` (metrics × pairs) over ``resamples`` resamples of the
    pairs with replacement, drawn from the seed as ``integers(0, n, size=(resamples, n))``: a
    resamples × metrics array. Every metric is resampled with the same indices, drawn once, and
    averaged a block of resamples at a time."""
    n = diffs.shape[1]
    drawn = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    sums = np.empty((resamples, diffs.shape[0]))
    for start in range(0, resamples, BLOCK):
        rows = drawn[start:start + BLOCK]
        for k, row in enumerate(diffs):
            sums[start:start + len(rows), k] = np.take(row, rows).sum(axis=1)
    return sums / n


def _interval(diffs: np.ndarray, means: np.ndarray, confidence: float) -> BootstrapCI:
    alpha = 1.0 - confidence
    low, high = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return BootstrapCI(float(diffs.mean()), float(low), float(high), int(diffs.size))


def paired_bootstrap(before: Sequence[float], after: Sequence[float], *,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                     confidence: float = DEFAULT_CONFIDENCE) -> BootstrapCI | None:
    """Percentile bootstrap CI of mean(after − before), resampling cases (pairs) with
    replacement. Seeded: the same inputs give the same interval. None for zero pairs."""
    diffs = _checked(before, after, resamples, confidence)
    if diffs.size == 0:
        return None
    return _interval(diffs, resampled_means(diffs[None, :], resamples, seed)[:, 0], confidence)


def bootstrap_deltas(baseline: RunResult, candidate: RunResult, metrics: Iterable[str], *,
                     ids: Iterable[str] | None = None, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = DEFAULT_SEED, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, BootstrapCI]:
    """Paired bootstrap CI of each metric's delta over the common cases; metrics with no
    per-case values (or no common cases) are left out. Each is :func:`paired_bootstrap`'s interval;
    the metrics with as many pairs are resampled together (the same seed draws the same indices)."""
    pairs = pairs_of(baseline, candidate, ids)
    diffs = {m: _checked(*paired_values(baseline, candidate, m, pairs=pairs), resamples, confidence) for m in metrics}
    by_size: dict[int, list[str]] = {}
    for metric, d in diffs.items():
        if d.size:
            by_size.setdefault(d.size, []).append(metric)
    found: dict[str, BootstrapCI] = {}
    for names in by_size.values():
        rows = np.stack([diffs[m] for m in names])
        means = resampled_means(rows, resamples, seed)
        for k, metric in enumerate(names):
            found[metric] = _interval(rows[k], means[:, k], confidence)
    return {m: found[m] for m in diffs if m in found}


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

"""The gate: compare a candidate RunResult with a baseline and decide pass or fail.

``evaluate(baseline, candidate, cfg, rerun=None) -> Verdict`` applies, in this order:

* **comparability** — no baseline: ``gate.missing_baseline`` (``floors_only`` notes it, ``fail``
  blocks). A baseline whose golden-set version or metric set differs is *not comparable*: the
  verdict says why and only floors, zero-tolerance and the errors policy apply.
* **floors** — ``value < floor`` blocks (``mrr@5 0.63 < 0.85``). A floored metric with no value
  (n/a) blocks too: a floor that cannot be checked is never a silent pass.
* **max_drop** — blocks when the drop exceeds ``max(max_drop, noise_k · σ_diff)``, with
  ``σ_diff = sqrt(σ_base² + σ_cand²)`` from each RunResult's ``noise.sigma`` (unmeasured σ = 0).
  The delta is candidate − baseline of the summary values when both runs hold the same case ids,
  otherwise the paired delta of the per-case values over the common cases.
* **significance** (optional ``gate.significance = α``) — a max_drop breach blocks only when it is
  significant: for ``pass_rate`` the exact McNemar test on the pass/fail flips must give p < α;
  for every other metric the upper bound of the paired bootstrap CI at confidence 1 − α must be
  below 0. A breach whose statistic cannot be computed (no per-case values) blocks.
* **slices** — ``gate.slices["type=injection"]`` applies floors / max_drop to
  ``summary.by_slice["type=injection"]``; a gated slice with fewer than ``min_slice_cases`` cases
  (in the candidate, or in the baseline for max_drop) is ``insufficient_data``: a non-blocking
  reason of its own and the state ``insufficient_data``, never a silent pass.
* **zero_tolerance** — every case whose check (``numbers``) has status ``fail`` blocks.
* **errors** — cases whose App call errored: ``fail`` blocks and lists them, ``ignore`` lists them.
* **missing cases** — a baseline case that passed and that the candidate did not answer is a
  pass→fail case ("missing in candidate") and blocks.

``decide`` (what the CLI and the Action call) adds the golden set's own checks, from the
snapshots both RunResults carry (see rageval/golden/lifecycle.py): **policy drift** — a source section
no longer states a number a case still expects (``golden_checks.policy_drift``: block / warn /
off) — and **leaks** of golden questions into the prompt, few-shot files or corpus
(``golden_checks.leaks``: warn / fail / off). ``verdict.golden`` also carries the golden diff
(cases added / removed / changed, the changelog line) and coverage.

Comparisons below ``1e-9`` are treated as equal, so a drop of exactly ``max_drop`` passes.

**Re-runs** (the caller executes; the gate decides what): ``rerun(None)`` re-runs the whole
subset, ``rerun([ids])`` just those cases; both return a RunResult dict generated with caches
bypassed.

* *near a threshold*: when a blocking floor / max_drop decision fails by at most
  ``rerun.margin``, the whole subset is re-run and the decision is taken again on the mean of the
  runs' values, up to ``rerun.times`` times. Only failing decisions are confirmed — a decision
  that passes is not re-run. A retrieval metric (and ``context_tokens``) is not re-run when the
  candidate's embedder is deterministic (``embedding.provider`` local or e5); a generation metric
  is not re-run when retrieval and generation are both deterministic (generation provider
  extractive or none, and no judge model).
* *targeted*: every pass→fail case and every zero-tolerance failure is re-checked once: with the
  full re-run's results when one was made, otherwise by ``rerun([ids])`` (at most
  ``rerun.times`` calls, each on the cases still failing). A case that passes in a re-run moves
  to ``flaky`` and stops blocking. Nothing is re-run when the whole pipeline is deterministic.
* ``reran`` records ``targeted`` (the cases re-checked, by a targeted call or against the full
  re-run), ``full`` (whether the subset was re-run) and ``runs`` (per gated metric, the value in
  each run; slice metrics keyed ``"type=injection:judge_pass"``).

Reasons about cases tagged ``holdout`` never quote them: they are counted ("numbers: 2 holdout
cases fail the rule (details hidden)").

**Verdict and state**: ``verdict`` is ``fail`` iff some reason is blocking. ``state`` is
``not_comparable`` when there was no comparable baseline, else ``insufficient_data`` when a gated
slice had too few cases, else equal to ``verdict``. So ``not_comparable`` and
``insufficient_data`` coexist with either verdict: floors and zero-tolerance can still fail a run
that could not be compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

from rageval.gate import stats
from rageval.config import Config, GateConfig, SliceGate
from rageval.errors import BaselineError, ConfigError, RagevalError
from rageval.golden.set import is_holdout, slice_labels
from rageval.metrics.base import parse_metric

EPS = 1e-9
DETERMINISTIC_EMBEDDERS = ("local", "e5")
DETERMINISTIC_GENERATORS = ("extractive", "none")
MISSING_BASELINE_POLICIES = ("floors_only", "fail")
ERROR_POLICIES = ("fail", "ignore")
MAX_IDS_IN_MESSAGE = 10

RerunFn = Callable[[list[str] | None], Mapping[str, Any]]

#: rule -> the short label shown after a reason in the report's first line
RULE_LABELS: dict[str, str] = {
    "missing_baseline": "no baseline",
    "not_comparable": "not comparable",
    "floor": "floor",
    "max_drop": "max drop",
    "slice_floor": "slice floor",
    "slice_max_drop": "slice max drop",
    "slice_insufficient_data": "insufficient data",
    "zero_tolerance": "zero tolerance",
    "errors": "errors",
    "missing_cases": "missing cases",
    "policy_drift": "policy drift",
    "golden_version": "golden set version",
    "leak": "golden leak",
}

MSG_BAD_RUN = ("{what}: {problem}. Expected a RunResult dict (schema_version 1, see docs/runresult.md); "
               "regenerate it with `rageval run`.")
MSG_POLICY = "gate.{key}: {value!r} is not a valid policy; use one of: {choices}."
MSG_NOT_COMPARABLE_VERSION = ("baseline golden set version {before} ≠ candidate version {after}, "
                              "so only floors and zero-tolerance apply")
MSG_NOT_COMPARABLE_METRICS = ("metric sets differ (baseline only: {only_base}; candidate only: {only_cand}), "
                              "so only floors and zero-tolerance apply")
MSG_NO_BASELINE = "no baseline RunResult; floors and zero-tolerance only (gate.missing_baseline: floors_only)"
MSG_NO_BASELINE_FAIL = "no baseline RunResult and gate.missing_baseline is 'fail'"
MSG_FLOOR = "{metric} {value} < {floor}"
MSG_FLOOR_NA = "{metric} has no value in the candidate (n/a); the floor {floor} cannot be checked"
MSG_DROP = "{metric} dropped {before} → {after} (Δ {delta}, tolerance {tol}{noise})"
MSG_DROP_NA = "{metric} has no value in the candidate (n/a) but {before} in the baseline"
MSG_INSUFFICIENT = ("slice {slice}: {n} {side} cases < min_slice_cases {min}; "
                    "its {what} not applied")
MSG_ERRORS = "{n} case{s} errored: {ids} (gate.errors: {policy})"
MSG_MISSING = "{ids} passed in the baseline and {verb} missing in the candidate"
MSG_ZT_HOLDOUT = "{check}: {n} holdout case{s} fail{v} the rule (details hidden)"


# --- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Reason:
    """Why the gate decided what it did. ``metric`` is set for aggregate rules, ``case`` for a
    per-case rule, ``slice`` for slice gates; ``blocking`` False means "reported, not blocking"."""

    rule: str
    message: str
    blocking: bool
    metric: str | None = None
    case: str | None = None
    slice: str | None = None
    value: Any = None
    threshold: Any = None

    @property
    def label(self) -> str:
        return RULE_LABELS.get(self.rule, self.rule)

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "metric": self.metric, "case": self.case, "slice": self.slice,
                "value": self.value, "threshold": self.threshold, "message": self.message,
                "blocking": self.blocking}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reason:
        return cls(rule=data["rule"], message=data["message"], blocking=bool(data["blocking"]),
                   metric=data.get("metric"), case=data.get("case"), slice=data.get("slice"),
                   value=data.get("value"), threshold=data.get("threshold"))


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Reason):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Verdict:
    """The gate's decision and everything the report shows. Immutable: lists are tuples and
    mappings are read-only; ``to_dict`` gives plain JSON with exactly these keys."""

    verdict: str                        # pass | fail
    state: str                          # pass | fail | not_comparable | insufficient_data
    comparable: bool
    reasons: tuple[Reason, ...]
    pass_to_fail: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    rank_drops: tuple[Mapping[str, Any], ...]     # {id, before, after}
    config_diff: tuple[Mapping[str, Any], ...]    # {key, before, after}
    reran: Mapping[str, Any]                      # {targeted: [ids], full: bool, runs: {metric: [v…]}}
    stats: Mapping[str, Any]                      # {mcnemar: {b, c, p} | None, bootstrap: {metric: {delta, low, high}}}
    metrics: tuple[Mapping[str, Any], ...]        # {metric, baseline, candidate, delta, threshold, status}
    by_slice: tuple[Mapping[str, Any], ...]       # {slice, metric, n_baseline, n_candidate, baseline, candidate, delta, threshold, status}
    cases_added: tuple[str, ...]
    cases_removed: tuple[str, ...]
    golden: Mapping[str, Any]                     # {name, baseline_version, candidate_version}
    noise: Mapping[str, Any]                      # metric -> {sigma_baseline, sigma_candidate, sigma_diff, band}

    @property
    def blocked(self) -> bool:
        return self.verdict == "fail"

    @property
    def blocking_reasons(self) -> tuple[Reason, ...]:
        return tuple(r for r in self.reasons if r.blocking)

    @property
    def main_reason(self) -> Reason | None:
        """The first blocking reason; otherwise the first reason that explains the state."""
        if self.blocking_reasons:
            return self.blocking_reasons[0]
        for reason in self.reasons:
            if reason.rule in ("not_comparable", "missing_baseline", "slice_insufficient_data"):
                return reason
        return None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _thaw(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        names = [f.name for f in fields(cls)]
        if not isinstance(data, Mapping):
            raise RagevalError(f"verdict: expected a JSON object, got {type(data).__name__}")
        missing = [n for n in names if n not in data]
        unknown = [k for k in data if k not in names]
        if missing or unknown:
            raise RagevalError(f"verdict: missing keys {missing or 'none'}, unknown keys {unknown or 'none'}; "
                               "it was written by another rageval version — regenerate it with `rageval gate`.")
        if data["verdict"] not in ("pass", "fail"):
            raise RagevalError(f"verdict: 'verdict' must be 'pass' or 'fail', got {data['verdict']!r}")
        values: dict[str, Any] = {n: _freeze(data[n]) for n in names}
        values["reasons"] = tuple(Reason.from_dict(r) for r in data["reasons"])
        values["comparable"] = bool(data["comparable"])
        return cls(**values)


# --- small helpers ---------------------------------------------------------------------------

def fmt(value: float | None, other: float | None = None) -> str:
    """Two decimals; more (up to 4) when two decimals would print ``value`` equal to ``other``
    although they differ (0.845 vs a floor of 0.85). None prints ``n/a``."""
    if value is None:
        return "n/a"
    for digits in (2, 3, 4):
        text = f"{value:.{digits}f}"
        if other is None or abs(value - other) <= EPS or text != f"{other:.{digits}f}":
            return text
    return f"{value:.4f}"


def fmt_delta(value: float | None) -> str:
    if value is None:
        return "n/a"
    text = f"{value:+.2f}"
    if float(text) == 0.0:
        return "0.00"
    return text.replace("-", "−")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    return float(value)


def _in_slice(case: Mapping[str, Any], slice_key: str) -> bool:
    return slice_key in slice_labels(case.get("slice") or {})


def _is_retrieval(metric: str) -> bool:
    if metric == "context_tokens":
        return True
    try:
        return parse_metric(metric).is_retrieval
    except ValueError:
        return False


def _id_list(ids: Sequence[str], hidden: int = 0) -> str:
    shown = list(ids[:MAX_IDS_IN_MESSAGE])
    text = ", ".join(shown)
    if len(ids) > len(shown):
        text += f" and {len(ids) - len(shown)} more"
    if hidden:
        text += (" and " if text else "") + f"{hidden} holdout case{'s' if hidden != 1 else ''}"
    return text


def _summary_value(run: Mapping[str, Any], slice_key: str | None, metric: str) -> float | None:
    summary = run.get("summary") or {}
    if slice_key is None:
        values = summary.get("metrics") or {}
    else:
        values = ((summary.get("by_slice") or {}).get(slice_key) or {}).get("metrics") or {}
    return _number(values.get(metric))


def _slice_n(run: Mapping[str, Any] | None, slice_key: str) -> int:
    entry = (((run or {}).get("summary") or {}).get("by_slice") or {}).get(slice_key) or {}
    n = entry.get("n_cases")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0


def _check_run(run: Any, what: str, error: type[RagevalError]) -> None:
    def bad(problem: str) -> RagevalError:
        return error(MSG_BAD_RUN.format(what=what, problem=problem))

    if not isinstance(run, Mapping):
        raise bad(f"expected a JSON object, got {type(run).__name__}")
    version = run.get("schema_version", 1)
    if version != 1:
        raise bad(f"schema_version {version!r} is not supported (this rageval reads 1)")
    if not isinstance(run.get("summary"), Mapping):
        raise bad("key 'summary' is missing or not an object")
    cases = run.get("cases")
    if not isinstance(cases, list):
        raise bad("key 'cases' is missing or not a list")
    seen: set[str] = set()
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping) or not isinstance(case.get("id"), str):
            raise bad(f"cases[{i}] has no string 'id'")
        if case["id"] in seen:
            raise bad(f"case id '{case['id']}' appears twice")
        seen.add(case["id"])


def _check_config(cfg: GateConfig) -> None:
    if cfg.missing_baseline not in MISSING_BASELINE_POLICIES:
        raise ConfigError(MSG_POLICY.format(key="missing_baseline", value=cfg.missing_baseline,
                                            choices=", ".join(MISSING_BASELINE_POLICIES)))
    if cfg.errors not in ERROR_POLICIES:
        raise ConfigError(MSG_POLICY.format(key="errors", value=cfg.errors, choices=", ".join(ERROR_POLICIES)))
    if cfg.significance is not None and not 0.0 < cfg.significance < 1.0:
        raise ConfigError(f"gate.significance: {cfg.significance!r} must be between 0 and 1, e.g. 0.05.")


def _pipeline(candidate: Mapping[str, Any]) -> tuple[bool, bool]:
    """(retrieval deterministic, generation deterministic) as the candidate's config says."""
    config = candidate.get("config") or {}
    embedding = config.get("embedding") or {}
    generation = config.get("generation") or {}
    judge = config.get("judge") or {}
    retrieval = embedding.get("provider") in DETERMINISTIC_EMBEDDERS
    gen = generation.get("provider") in DETERMINISTIC_GENERATORS and not judge.get("model")
    return retrieval, gen


def _rerunnable(metric: str, pipeline: tuple[bool, bool]) -> bool:
    det_retrieval, det_generation = pipeline
    if _is_retrieval(metric):
        return not det_retrieval
    return not (det_retrieval and det_generation)


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"chunking": {"size": 200}}`` -> ``{"chunking.size": 200}``; lists are leaf values."""
    out: dict[str, Any] = {}
    if isinstance(config, Mapping) and (config or not prefix):
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    else:
        out[prefix] = config
    return out


def config_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Dotted keys whose values differ, sorted: ``[{key, before, after}]`` (absent -> None)."""
    a, b = flatten(before or {}), flatten(after or {})
    return [{"key": k, "before": a.get(k), "after": b.get(k)}
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _rank_worse(before: int | None, after: int | None) -> bool:
    """None means "not retrieved", worse than any rank."""
    if after is None:
        return before is not None
    return before is not None and after > before


# --- aggregate decisions ---------------------------------------------------------------------

@dataclass(frozen=True)
class _Check:
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
        return math.inf if self.value is None else self.threshold - self.value


@dataclass
class _Context:
    baseline: Mapping[str, Any] | None
    candidate: Mapping[str, Any]
    cfg: GateConfig
    comparable: bool
    same_cases: bool
    common: list[str]
    pipeline: tuple[bool, bool]
    mcnemar_by_slice: dict[str | None, stats.McNemar]
    ci: dict[tuple[str | None, str], stats.BootstrapCI | None]


def _mean_value(runs: Sequence[Mapping[str, Any]], slice_key: str | None, metric: str) -> float | None:
    return stats.mean_or_none(_summary_value(r, slice_key, metric) for r in runs)


def _slice_ids(ctx: _Context, slice_key: str | None) -> list[str]:
    if slice_key is None:
        return list(ctx.common)
    cases = stats.case_map(ctx.candidate)
    return [i for i in ctx.common if _in_slice(cases[i], slice_key)]


def _delta(ctx: _Context, runs: Sequence[Mapping[str, Any]], slice_key: str | None, metric: str) -> float | None:
    """Mean over the candidate runs of (run − baseline), per the same-cases / common-cases rule."""
    if ctx.baseline is None:
        return None
    deltas: list[float | None] = []
    base = _summary_value(ctx.baseline, slice_key, metric)
    for run in runs:
        value = _summary_value(run, slice_key, metric)
        if not ctx.same_cases:
            before, after = stats.paired_values(ctx.baseline, run, metric, _slice_ids(ctx, slice_key))
            if before.size:
                deltas.append(float(after.mean() - before.mean()))
                continue
        deltas.append(None if value is None or base is None else value - base)
    return stats.mean_or_none(deltas)


def _significance_note(ctx: _Context, slice_key: str | None, metric: str) -> str | None:
    """None when the breach is significant (it blocks); otherwise why it is not."""
    alpha = ctx.cfg.significance
    if alpha is None:
        return None
    if metric == "pass_rate":
        test = ctx.mcnemar_by_slice.get(slice_key)
        if test is None or test.p < alpha:
            return None
        return f"not significant: McNemar p={test.p:.3f} ≥ {alpha:g}"
    key = (slice_key, metric)
    if key not in ctx.ci:
        ids = _slice_ids(ctx, slice_key)
        before, after = stats.paired_values(ctx.baseline or {}, ctx.candidate, metric, ids)
        ctx.ci[key] = stats.paired_bootstrap(before, after, confidence=1.0 - alpha)
    ci = ctx.ci[key]
    if ci is None or ci.high < 0:
        return None
    return f"not significant: {100 * (1 - alpha):g}% CI of Δ [{fmt_delta(ci.low)}, {fmt_delta(ci.high)}] includes 0"


def _aggregate_checks(ctx: _Context, runs: Sequence[Mapping[str, Any]]) -> tuple[list[_Check], list[Reason]]:
    """Floors and max_drop, overall and per gated slice, on the mean of ``runs``; plus the
    insufficient-data reasons of gated slices."""
    cfg = ctx.cfg
    checks: list[_Check] = []
    notes: list[Reason] = []
    targets: list[tuple[str | None, Mapping[str, float], Mapping[str, float]]] = [(None, cfg.floors, cfg.max_drop)]
    for slice_key, slice_gate in cfg.slices.items():
        n_cand = _slice_n(ctx.candidate, slice_key)
        floors = dict(slice_gate.floors)
        drops = dict(slice_gate.max_drop) if ctx.comparable else {}
        if n_cand < cfg.min_slice_cases:
            notes.append(Reason("slice_insufficient_data", MSG_INSUFFICIENT.format(
                slice=slice_key, n=n_cand, side="candidate", min=cfg.min_slice_cases, what="gates were"),
                False, slice=slice_key, value=n_cand, threshold=cfg.min_slice_cases))
            continue
        n_base = _slice_n(ctx.baseline, slice_key)
        if drops and n_base < cfg.min_slice_cases:
            notes.append(Reason("slice_insufficient_data", MSG_INSUFFICIENT.format(
                slice=slice_key, n=n_base, side="baseline", min=cfg.min_slice_cases, what="max_drop was"),
                False, slice=slice_key, value=n_base, threshold=cfg.min_slice_cases))
            drops = {}
        targets.append((slice_key, floors, drops))

    for slice_key, floors, drops in targets:
        prefix = "" if slice_key is None else "slice_"
        where = "" if slice_key is None else f"slice {slice_key}: "
        for metric, floor in floors.items():
            value = _mean_value(runs, slice_key, metric)
            if value is None:
                message = MSG_FLOOR_NA.format(metric=metric, floor=fmt(floor))
                failed = True
            else:
                failed = value < floor - EPS
                message = MSG_FLOOR.format(metric=metric, value=fmt(value, floor), floor=fmt(floor, value))
            checks.append(_Check(prefix + "floor", slice_key, metric, value, float(floor), failed,
                                 where + message, failed, _rerunnable(metric, ctx.pipeline)))
        if not ctx.comparable or ctx.baseline is None:
            continue
        for metric, max_drop in drops.items():
            before = _summary_value(ctx.baseline, slice_key, metric)
            if before is None:
                continue                      # nothing to drop from: the metric is new
            sigma = _sigma_diff(ctx, slice_key, metric)
            tol = max(float(max_drop), cfg.noise_k * sigma)
            after = _mean_value(runs, slice_key, metric)
            delta = _delta(ctx, runs, slice_key, metric)
            if after is None or delta is None:
                checks.append(_Check(prefix + "max_drop", slice_key, metric, None, -tol, True,
                                     where + MSG_DROP_NA.format(metric=metric, before=fmt(before)), True,
                                     _rerunnable(metric, ctx.pipeline)))
                continue
            failed = delta < -tol - EPS
            noise = f" = {cfg.noise_k:g}·σ {fmt(sigma)}" if tol > max_drop + EPS else ""
            message = where + MSG_DROP.format(metric=metric, before=fmt(before), after=fmt(after, before),
                                              delta=fmt_delta(delta), tol=fmt(tol), noise=noise)
            blocking = failed
            if failed:
                note = _significance_note(ctx, slice_key, metric)
                if note:
                    message += f" — {note}"
                    blocking = False
            checks.append(_Check(prefix + "max_drop", slice_key, metric, delta, -tol, failed, message, blocking,
                                 _rerunnable(metric, ctx.pipeline)))
    return checks, notes


def _sigma_diff(ctx: _Context, slice_key: str | None, metric: str) -> float:
    if slice_key is None:
        return stats.sigma_diff(stats.run_sigma(ctx.baseline, metric), stats.run_sigma(ctx.candidate, metric))

    def slice_sigma(run: Mapping[str, Any] | None) -> float:
        noise = (run or {}).get("noise") or {}
        value = (((noise.get("by_slice") or {}).get(slice_key) or {}).get(metric))
        return _number(value) or 0.0

    return stats.sigma_diff(slice_sigma(ctx.baseline), slice_sigma(ctx.candidate))


# --- evaluate --------------------------------------------------------------------------------

def _call_rerun(rerun: RerunFn, ids: list[str] | None) -> Mapping[str, Any]:
    result = rerun(ids)
    what = "re-run of the whole subset" if ids is None else f"re-run of {_id_list(ids)}"
    _check_run(result, what, RagevalError)
    return result


def _numbers_message(check_name: str, case_id: str, check: Mapping[str, Any]) -> str:
    parts = []
    if check.get("missing"):
        parts.append("missing " + ", ".join(str(x) for x in check["missing"]))
    if check.get("outside_source"):
        parts.append("outside source " + ", ".join(str(x) for x in check["outside_source"]))
    detail = "; ".join(parts) or str(check.get("reason") or "failed")
    return f"{check_name} {case_id}: {detail}"


def _comparability(baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any],
                   cfg: GateConfig) -> tuple[bool, list[Reason]]:
    if baseline is None:
        fail = cfg.missing_baseline == "fail"
        return False, [Reason("missing_baseline", MSG_NO_BASELINE_FAIL if fail else MSG_NO_BASELINE, fail)]
    reasons = []
    v_base = (baseline.get("golden") or {}).get("version")
    v_cand = (candidate.get("golden") or {}).get("version")
    if v_base != v_cand:
        reasons.append(Reason("not_comparable", MSG_NOT_COMPARABLE_VERSION.format(before=v_base, after=v_cand),
                              False, value=v_cand, threshold=v_base))
    names_base = list(baseline.get("metric_names") or [])
    names_cand = list(candidate.get("metric_names") or [])
    if set(names_base) != set(names_cand):
        only_base = [m for m in names_base if m not in names_cand]
        only_cand = [m for m in names_cand if m not in names_base]
        reasons.append(Reason("not_comparable", MSG_NOT_COMPARABLE_METRICS.format(
            only_base=", ".join(only_base) or "none", only_cand=", ".join(only_cand) or "none"), False))
    return not reasons, reasons


def _case_diff(base_cases: Mapping[str, Mapping[str, Any]], cand_cases: Mapping[str, Mapping[str, Any]]
               ) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """(pass→fail ids incl. passing cases missing in the candidate, fail→pass ids, rank drops)."""
    pass_to_fail, fail_to_pass, rank_drops = [], [], []
    for case_id, before in base_cases.items():
        after = cand_cases.get(case_id)
        if before.get("passed") is True and (after is None or after.get("passed") is False):
            pass_to_fail.append(case_id)
        elif before.get("passed") is False and after is not None and after.get("passed") is True:
            fail_to_pass.append(case_id)
        if after is not None:
            rb, ra = before.get("first_relevant_rank"), after.get("first_relevant_rank")
            if _rank_worse(rb, ra):
                rank_drops.append({"id": case_id, "before": rb, "after": ra})
    order = {case_id: n for n, case_id in enumerate(cand_cases)}
    rank_drops.sort(key=lambda r: order[r["id"]])
    return pass_to_fail, fail_to_pass, rank_drops


def _statistics(baseline: Mapping[str, Any], candidate: Mapping[str, Any], cfg: GateConfig,
                common: list[str]) -> tuple[dict[str | None, stats.McNemar], dict[str, stats.BootstrapCI]]:
    """McNemar overall (key None) and per gated slice; bootstrap CI per summary / gated metric.
    With ``gate.significance`` the CI is at confidence 1 − significance, else 95%."""
    base_cases, cand_cases = stats.case_map(baseline), stats.case_map(candidate)
    before = {i: c.get("passed") for i, c in base_cases.items()}
    after = {i: c.get("passed") for i, c in cand_cases.items()}
    tests: dict[str | None, stats.McNemar] = {None: stats.mcnemar(before, after)}
    for slice_key in cfg.slices:
        ids = [i for i, c in base_cases.items() if _in_slice(c, slice_key)]
        tests[slice_key] = stats.mcnemar({i: before[i] for i in ids}, {i: after[i] for i in ids if i in after})
    names = list(dict.fromkeys([*((candidate.get("summary") or {}).get("metrics") or {}), *cfg.floors,
                                *cfg.max_drop]))
    confidence = 1.0 - cfg.significance if cfg.significance is not None else stats.DEFAULT_CONFIDENCE
    return tests, stats.bootstrap_deltas(baseline, candidate, names, ids=common, confidence=confidence)


def _zero_tolerance(cases: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> dict[str, list[str]]:
    """Case id -> the zero-tolerance checks it fails."""
    out: dict[str, list[str]] = {}
    for case_id, case in cases.items():
        failing = [n for n in names if ((case.get("checks") or {}).get(n) or {}).get("status") == "fail"]
        if failing:
            out[case_id] = failing
    return out


def _confirm_cases(pass_to_fail: list[str], zt: dict[str, list[str]], reruns: Sequence[Mapping[str, Any]],
                   rerun: RerunFn, times: int) -> tuple[list[str], list[str]]:
    """Re-check every pass→fail and zero-tolerance case: against the full re-runs when there were
    any, else by ``rerun(ids)`` (at most ``times`` calls, each on the cases still failing). Cases
    that pass are removed from ``pass_to_fail`` / ``zt`` in place. Returns (re-checked, flaky)."""
    targets = list(dict.fromkeys([*pass_to_fail, *zt]))

    def clear(case_id: str, run: Mapping[str, Any]) -> None:
        case = stats.case_map(run).get(case_id)
        if case is None:
            return                                  # not answered again: still failing
        if case_id in pass_to_fail and case.get("passed") is True:
            pass_to_fail.remove(case_id)
        if case_id in zt:
            still = [n for n in zt[case_id] if ((case.get("checks") or {}).get(n) or {}).get("status") == "fail"]
            if still:
                zt[case_id] = still
            else:
                del zt[case_id]

    if reruns:
        for run in reruns:
            for case_id in targets:
                clear(case_id, run)
    else:
        remaining, calls = list(targets), 0
        while remaining and calls < times:
            result = _call_rerun(rerun, list(remaining))
            calls += 1
            for case_id in remaining:
                clear(case_id, result)
            remaining = [i for i in remaining if i in pass_to_fail or i in zt]
    return targets, [i for i in targets if i not in pass_to_fail and i not in zt]


def _case_reasons(cfg: GateConfig, base_cases: Mapping[str, Mapping[str, Any]],
                  cand_cases: Mapping[str, Mapping[str, Any]], zt: Mapping[str, list[str]],
                  pass_to_fail: Sequence[str]) -> list[Reason]:
    """Zero-tolerance (holdout cases counted, never described), errors, missing cases."""
    reasons: list[Reason] = []
    hidden: dict[str, int] = {}
    for case_id, names in zt.items():
        case = cand_cases[case_id]
        for name in names:
            if is_holdout(case):
                hidden[name] = hidden.get(name, 0) + 1
                continue
            check = (case.get("checks") or {}).get(name) or {}
            reasons.append(Reason("zero_tolerance", _numbers_message(name, case_id, check), True,
                                  metric=name, case=case_id))
    for name, n in hidden.items():
        reasons.append(Reason("zero_tolerance", MSG_ZT_HOLDOUT.format(
            check=name, n=n, s="s" if n != 1 else "", v="" if n != 1 else "s"), True, metric=name, value=n))
    errored = [i for i, c in cand_cases.items() if c.get("error")]
    if errored:
        shown = [i for i in errored if not is_holdout(cand_cases[i])]
        reasons.append(Reason("errors", MSG_ERRORS.format(
            n=len(errored), s="s" if len(errored) != 1 else "", ids=_id_list(shown, len(errored) - len(shown)),
            policy=cfg.errors), cfg.errors == "fail", value=len(errored)))
    missing = [i for i in pass_to_fail if i not in cand_cases]
    if missing:
        shown = [i for i in missing if not is_holdout(base_cases[i])]
        reasons.append(Reason("missing_cases", MSG_MISSING.format(
            ids=_id_list(shown, len(missing) - len(shown)), verb="are" if len(missing) != 1 else "is"),
            True, value=len(missing)))
    return reasons


def evaluate(baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any], cfg: GateConfig,
             rerun: RerunFn | None = None) -> Verdict:
    """Apply the gate (see the module docstring) and return the Verdict. ``rerun`` re-executes
    cases with caches bypassed: ``rerun(None)`` the whole subset, ``rerun(ids)`` those cases."""
    _check_config(cfg)
    _check_run(candidate, "candidate RunResult", RagevalError)
    if baseline is not None:
        _check_run(baseline, "baseline RunResult", BaselineError)

    comparable, reasons = _comparability(baseline, candidate, cfg)
    cand_cases = stats.case_map(candidate)
    base_cases = stats.case_map(baseline) if baseline is not None else {}
    common = [i for i in cand_cases if i in base_cases]
    # per-case diff and statistics: comparable baselines only (another golden version may reuse ids)
    pass_to_fail: list[str] = []
    fail_to_pass: list[str] = []
    rank_drops: list[dict[str, Any]] = []
    tests: dict[str | None, stats.McNemar] = {}
    bootstrap: dict[str, stats.BootstrapCI] = {}
    if comparable and baseline is not None:
        pass_to_fail, fail_to_pass, rank_drops = _case_diff(base_cases, cand_cases)
        tests, bootstrap = _statistics(baseline, candidate, cfg, common)
    ctx = _Context(baseline, candidate, cfg, comparable, same_cases=set(base_cases) == set(cand_cases),
                   common=common, pipeline=_pipeline(candidate), mcnemar_by_slice=tests,
                   ci={(None, m): ci for m, ci in bootstrap.items()})

    # aggregate decisions, with full re-runs while a blocking decision sits within the margin
    runs: list[Mapping[str, Any]] = [candidate]
    while True:
        checks, slice_notes = _aggregate_checks(ctx, runs)
        near = [c for c in checks if c.blocking and c.rerunnable and c.breach <= cfg.rerun.margin + EPS]
        if not near or rerun is None or len(runs) - 1 >= cfg.rerun.times:
            break
        runs.append(_call_rerun(rerun, None))
    reran_runs = {(c.metric if c.slice is None else f"{c.slice}:{c.metric}"):
                  [_summary_value(r, c.slice, c.metric) for r in runs] for c in checks} if len(runs) > 1 else {}

    # case regressions, confirmed by a re-run unless the whole pipeline is deterministic
    zt = _zero_tolerance(cand_cases, cfg.zero_tolerance)
    rechecked: list[str] = []
    flaky: list[str] = []
    if (pass_to_fail or zt) and rerun is not None and cfg.rerun.times > 0 and ctx.pipeline != (True, True):
        rechecked, flaky = _confirm_cases(pass_to_fail, zt, runs[1:], rerun, cfg.rerun.times)

    reasons += [Reason(c.rule, c.message, c.blocking, metric=c.metric, slice=c.slice, value=c.value,
                       threshold=c.threshold) for c in checks if c.failed]
    reasons += slice_notes
    reasons += _case_reasons(cfg, base_cases, cand_cases, zt, pass_to_fail)

    verdict = "fail" if any(r.blocking for r in reasons) else "pass"
    if not comparable:
        state = "not_comparable"
    elif slice_notes:
        state = "insufficient_data"
    else:
        state = verdict
    metric_rows = _metric_rows(ctx, runs, checks, reasons)
    golden = {"name": (candidate.get("golden") or {}).get("name"),
              "baseline_version": ((baseline or {}).get("golden") or {}).get("version"),
              "candidate_version": (candidate.get("golden") or {}).get("version")}
    return Verdict(
        verdict=verdict, state=state, comparable=comparable, reasons=tuple(reasons),
        pass_to_fail=tuple(pass_to_fail), fail_to_pass=tuple(fail_to_pass), flaky=tuple(flaky),
        rank_drops=_freeze(rank_drops),
        config_diff=_freeze(config_diff(baseline.get("config"), candidate.get("config")) if baseline is not None
                            else []),
        reran=_freeze({"targeted": rechecked, "full": len(runs) > 1, "runs": reran_runs}),
        stats=_freeze({"mcnemar": tests[None].to_dict() if None in tests else None,
                       "bootstrap": {m: ci.to_dict() for m, ci in bootstrap.items()}}),
        metrics=_freeze(metric_rows), by_slice=_freeze(_slice_rows(ctx, runs, checks, reasons)),
        cases_added=tuple(i for i in cand_cases if baseline is not None and i not in base_cases),
        cases_removed=tuple(i for i in base_cases if i not in cand_cases),
        golden=_freeze(golden), noise=_freeze(_noise(ctx, [row["metric"] for row in metric_rows])))


# --- table rows ------------------------------------------------------------------------------

def _status(reasons: Iterable[Reason], slice_key: str | None, metric: str, value: float | None) -> str:
    mine = [r for r in reasons if r.metric == metric and r.slice == slice_key and r.case is None
            and r.rule in ("floor", "max_drop", "slice_floor", "slice_max_drop")]
    if any(r.blocking for r in mine):
        return "fail"
    if mine:
        return "warn"                   # a breach that is reported but not blocking (not significant)
    if value is None:
        return "n/a"
    return "pass"


def _threshold(checks: Iterable[_Check], slice_key: str | None, metric: str) -> dict[str, float] | None:
    out: dict[str, float] = {}
    for check in checks:
        if check.slice == slice_key and check.metric == metric:
            out["floor" if check.rule.endswith("floor") else "max_drop"] = (
                check.threshold if check.rule.endswith("floor") else -check.threshold)
    return out or None


def _metric_rows(ctx: _Context, runs: Sequence[Mapping[str, Any]], checks: Sequence[_Check],
                 reasons: Sequence[Reason]) -> list[dict[str, Any]]:
    cand_metrics = (ctx.candidate.get("summary") or {}).get("metrics") or {}
    base_metrics = ((ctx.baseline or {}).get("summary") or {}).get("metrics") or {}
    names = list(dict.fromkeys([*(m for m in ctx.candidate.get("metric_names") or () if m in cand_metrics),
                                *cand_metrics, *base_metrics, *ctx.cfg.floors, *ctx.cfg.max_drop]))
    rows = []
    for metric in names:
        value = _mean_value(runs, None, metric)
        before = _number(base_metrics.get(metric)) if ctx.baseline is not None else None
        delta = _delta(ctx, runs, None, metric) if ctx.comparable else None
        rows.append({"metric": metric, "baseline": before, "candidate": value, "delta": delta,
                     "threshold": _threshold(checks, None, metric),
                     "status": _status(reasons, None, metric, value)})
    return rows


def _slice_rows(ctx: _Context, runs: Sequence[Mapping[str, Any]], checks: Sequence[_Check],
                reasons: Sequence[Reason]) -> list[dict[str, Any]]:
    def slices(run: Mapping[str, Any] | None) -> list[str]:
        return list((((run or {}).get("summary") or {}).get("by_slice") or {}))

    keys = list(dict.fromkeys([*slices(ctx.candidate), *slices(ctx.baseline), *ctx.cfg.slices]))
    insufficient = {r.slice for r in reasons if r.rule == "slice_insufficient_data"}
    rows = []
    for key in keys:
        gate = ctx.cfg.slices.get(key)
        if gate is not None:
            metrics = list(dict.fromkeys([*gate.floors, *gate.max_drop]))
        else:
            present = {m for run in (ctx.candidate, ctx.baseline) if run
                       for m in ((((run.get("summary") or {}).get("by_slice") or {}).get(key) or {}).get("metrics") or {})}
            metrics = ["pass_rate"] if "pass_rate" in present else []
        for metric in metrics:
            value = _mean_value(runs, key, metric)
            before = _summary_value(ctx.baseline, key, metric) if ctx.baseline is not None else None
            delta = None
            if ctx.comparable and before is not None and value is not None:
                delta = _delta(ctx, runs, key, metric)
            status = _status(reasons, key, metric, value)
            if key in insufficient and status != "fail":
                status = "insufficient_data"
            rows.append({"slice": key, "metric": metric, "n_baseline": _slice_n(ctx.baseline, key)
                         if ctx.baseline is not None else None, "n_candidate": _slice_n(ctx.candidate, key),
                         "baseline": before, "candidate": value, "delta": delta,
                         "threshold": _threshold(checks, key, metric), "gated": gate is not None,
                         "status": status})
    return rows


def _noise(ctx: _Context, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        sb = stats.run_sigma(ctx.baseline, metric)
        sc = stats.run_sigma(ctx.candidate, metric)
        if sb == 0.0 and sc == 0.0 and not (ctx.comparable and metric in ctx.cfg.max_drop):
            continue
        sd = stats.sigma_diff(sb, sc)
        out[metric] = {"sigma_baseline": sb, "sigma_candidate": sc, "sigma_diff": sd,
                       "band": ctx.cfg.noise_k * sd}
    return out


# --- the decision as `rageval gate` and the Action make it ------------------------------------

def without_judge(cfg: GateConfig) -> GateConfig:
    """``cfg`` minus every judge_pass threshold (overall and per slice)."""
    def drop(thresholds: Mapping[str, float]) -> dict[str, float]:
        return {k: v for k, v in thresholds.items() if k != "judge_pass"}
    return replace(cfg, floors=drop(cfg.floors), max_drop=drop(cfg.max_drop),
                   slices={k: SliceGate(drop(s.floors), drop(s.max_drop)) for k, s in cfg.slices.items()})


def decide(cfg: Config, baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any], *,
           subset_ids: Sequence[str], rerun: RerunFn | None = None) -> tuple[Verdict, Mapping[str, Any] | None, str | None]:
    """Gate ``candidate`` the way both `rageval gate` and the Action do.

    Main's baseline may cover the whole golden set while a PR runs a subset: it is narrowed to
    ``subset_ids`` first (a subset case the candidate lacks still counts as missing). While the
    judge's measured agreement is below ``judge.min_agreement``, judge_pass is not gated.
    Returns the verdict, the baseline as compared, and a note to show when the judge was left out.
    """
    from rageval.pipeline.runner import narrow_baseline

    if baseline is not None:
        baseline = narrow_baseline(dict(baseline), list(subset_ids))
    gate_cfg, note = cfg.gate, None
    if cfg.judge.min_agreement is not None:
        from rageval.pipeline.judging import judge_gate_allowed
        allowed, why = judge_gate_allowed(cfg.judge)
        if not allowed:
            gate_cfg, note = without_judge(cfg.gate), f"judge_pass is not gated: {why}"
    verdict = evaluate(baseline, candidate, gate_cfg, rerun=rerun)
    return with_golden_checks(verdict, cfg, baseline, candidate), baseline, note


def golden_checks(cfg: Config, baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any]
                  ) -> tuple[list[Reason], dict[str, Any]]:
    """Reasons from policy drift and leaks, and what the report shows about the golden set:
    ``diff`` (None when the baseline has no golden snapshot), ``changelog``, ``section_changes``,
    ``leaks``, ``coverage``."""
    from rageval.golden import lifecycle

    reasons: list[Reason] = []
    cand_golden = candidate.get("golden") or {}
    base_golden = (baseline or {}).get("golden") or {}
    cand_cases = cand_golden.get("cases") if isinstance(cand_golden.get("cases"), Mapping) else None
    base_cases = base_golden.get("cases") if isinstance(base_golden.get("cases"), Mapping) else None
    info: dict[str, Any] = {"diff": None, "changelog": cand_golden.get("changelog") or "",
                            "section_changes": [], "leaks": [], "coverage": None}
    if cand_cases is not None and base_cases is not None:
        info["diff"] = lifecycle.golden_diff(base_cases, cand_cases)
        before = lifecycle.reference_from_result(baseline or {}, "the baseline")
        after = lifecycle.reference_from_result(candidate, "this PR")
        if before is not None and after is not None:
            where = str(cand_golden.get("path") or "golden set")
            reasons += [Reason("golden_version", message, True) for message in [
                *lifecycle.version_problems(before, after, where, quote=False),
                *lifecycle.reused_ids([before], after, where, quote=False)]]
    base_sections = ((baseline or {}).get("corpus") or {}).get("sections")
    cand_sections = (candidate.get("corpus") or {}).get("sections")
    mode = cfg.golden_checks.policy_drift
    if mode != "off" and cand_cases is not None and isinstance(base_sections, Mapping) \
            and isinstance(cand_sections, Mapping):
        changes, drifts = lifecycle.policy_drift(base_sections, cand_sections, cand_cases)
        info["section_changes"] = [{"section": c.section, "removed": list(c.removed), "added": list(c.added),
                                    "cases": list(c.cases)} for c in changes]
        reasons += [Reason("policy_drift", message, mode == "block", slice=section, value=names)
                    for section, message, names in lifecycle.drift_messages(drifts)]
    checks = candidate.get("golden_checks") or {}
    leaks = checks.get("leaks") or []
    if cfg.golden_checks.leaks != "off":
        info["leaks"] = leaks
        reasons += [Reason("leak", lifecycle.Leak(x.get("case", "?"), x.get("where", "?"), float(x.get("overlap", 0)),
                                                  bool(x.get("holdout"))).message(),
                           cfg.golden_checks.leaks == "fail", case=None if x["holdout"] else x["case"],
                           value=x["overlap"]) for x in leaks]
    info["coverage"] = checks.get("coverage")
    return reasons, info


def with_golden_checks(verdict: Verdict, cfg: Config, baseline: Mapping[str, Any] | None,
                       candidate: Mapping[str, Any]) -> Verdict:
    """``verdict`` plus the golden set's checks (``golden_checks``): blocking ones turn it to fail."""
    extra, info = golden_checks(cfg, baseline, candidate)
    reasons = tuple(verdict.reasons) + tuple(extra)
    blocked = any(r.blocking for r in reasons)
    state = "fail" if blocked and verdict.state == "pass" else verdict.state
    return replace(verdict, reasons=reasons, verdict="fail" if blocked else "pass", state=state,
                   golden=_freeze({**_thaw(verdict.golden), **info}))

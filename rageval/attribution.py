"""Which change broke it: attribute a blocked PR's drops to the knobs it changed, by ablation.

The knobs (``rageval.knobs``): config keys that change answers, files the config points to whose
content changed (a prompt edited in place), corpus files; at most ``attribution.max_knobs`` (≤ 8),
grouped past it. With k ≥ 2 knobs, the PR's compared cases are re-run with each knob reverted to the
baseline (leave-one-out: a file to its content at the baseline's commit) and with each knob alone
applied to the baseline's config. Every leave-one-out variant is gated like the PR (``gate_variant``)
so "reverting X alone unblocks the gate" is said only when it did; when none does, pairs of reverts
are run and gated, the pairs that recover most first, within the same ceiling: at most
2·``max_knobs`` runs in all. For each metric that blocked, each knob's Δ alone and the Δ left when it
is reverted; which pairs interact (their joint effect was measured and differs from the sum); and,
for each pass→fail or new zero-tolerance case, the reverts that make it pass.

The runs use the builtin app (the config drives nothing else) and, unless ``attribution.models``
is true, only deterministic stages. Their model calls spend from the run's own budget
(``llm.max_cost_usd``), and what they cost is in the verdict (``attribution.cost``).

The baseline's recorded config is validated like rageval.yml (``recorded_config``) before any value
of it is put back, and so is every mix of the two configs a run would use (main's chunk size with the
PR's overlap may not validate); when one does not, attribution is "not available" and says why —
the gate's verdict stands either way.
"""

from __future__ import annotations

import dataclasses
import itertools
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.config import config_from_dict
from rageval.cost import Cost
from rageval.errors import ConfigError
from rageval.gate.ablation import Attribution, Effect, MetricAttribution
from rageval.gate.format import fmt_delta
from rageval.gate.thresholds import pipeline_of
from rageval.gate.verdict import Verdict
from rageval.golden.corpus import Corpus, load_corpus
from rageval.knobs import Knob, all_knobs
from rageval.metrics.judge import JUDGE_PARAMETERS
from rageval.metrics.values import case_value
from rageval.results import RunResult
from rageval.settings import Config, flatten

MIN_INTERACTION = 0.005         # below this, effects are "adding up" even when no noise was measured

Runner = Callable[[Config, Corpus | None], RunResult]
Gater = Callable[[RunResult], Verdict]

MSG_BASELINE_CONFIG = ("the baseline's recorded config does not validate with this rageval ({problem}); re-create "
                       "the baseline with this version to attribute against it")
MSG_BUDGET = ("llm.max_cost_usd was reached during the attribution runs ({n} case answers of {runs} runs were not "
              "made): a variant missing answers says nothing about its knob, so nothing is attributed; raise the cap "
              "to attribute")
MSG_MIXED_CONFIG = ("the knobs cannot be tried one at a time, since a mix of the baseline's and the PR's values does "
                    "not validate ({problem})")


# --- variants ----------------------------------------------------------------------------------

def _set(record: Any, keys: Sequence[str], value: Any, root: Path) -> Any:
    """``record`` (a frozen settings record) with the dotted key set to ``value`` as the resolved
    config JSON holds it: lists become tuples, paths are resolved against the config's folder."""
    name = keys[0]
    current = getattr(record, name)
    if len(keys) > 1:
        return dataclasses.replace(record, **{name: _set(current, keys[1:], value, root)})
    kind = next(f.metadata.get("kind") for f in dataclasses.fields(record) if f.name == name)
    if value is not None and kind == "path":
        value = (root / value).resolve()
    elif isinstance(value, list):
        value = tuple(value)
    return dataclasses.replace(record, **{name: value})


def reverted(cfg: Config, knobs: Sequence[Knob], baseline_config: Mapping[str, Any],
             files: Mapping[str, Path] | None = None) -> Config:
    """``cfg`` with the config keys of ``knobs`` set back to the baseline's values; a key whose file
    was edited in place points to ``files[key]``, the baseline's content written out."""
    flat = flatten(baseline_config)
    for knob in knobs:
        for key in knob.keys:
            value = str(files[key]) if files and key in knob.contents and key in files else flat.get(key)
            cfg = _set(cfg, key.split("."), value, cfg.root)
    return cfg


def written_out(knobs: Sequence[Knob], workdir: Path) -> dict[str, Path]:
    """Each edited file's content at the baseline, written under ``workdir`` (its own folder per key,
    under its own name): key -> path."""
    out = {}
    for i, (key, data) in enumerate((k, c) for knob in knobs for k, c in knob.contents.items()):
        folder = workdir / f"file-{i}"
        folder.mkdir(parents=True)
        out[key] = folder / f"{key.rsplit('.', 1)[-1]}.baseline"
        out[key].write_bytes(data)
    return out


def corpus_with(corpus: Corpus, files: Mapping[Path, str], workdir: Path) -> Corpus:
    """The corpus with the given files' text replaced (by their text at the baseline's commit)."""
    for path in corpus.files:
        target = workdir / path.name
        target.write_text(files.get(path, path.read_text(encoding="utf-8")), encoding="utf-8")
    return load_corpus(str(workdir / "*"), workdir)


# --- effects -------------------------------------------------------------------------------------

def value_on(run: RunResult, metric: str, ids: Sequence[str]) -> float | None:
    """Mean of ``metric``'s per-case values over ``ids`` (the cases the gate compared)."""
    cases = run.case_map
    values = [v for i in ids if i in cases for v in [case_value(cases[i], metric)] if v is not None]
    return sum(values) / len(values) if values else None




def blocking_metrics(verdict: Verdict) -> list[str]:
    """The metrics of the blocking reasons, in order (a zero-tolerance number rule: numbers_pass)."""
    names = [r.moved_metric for r in verdict.blocking_reasons]
    return list(dict.fromkeys(n for n in names if n))


def recorded_config(resolved: Mapping[str, Any], path: Path, label: str) -> Config:
    """The Config that a resolved config (``Config.to_dict``, as a RunResult records it) stands for,
    validated like rageval.yml: paths relative to ``path``'s folder, ConfigError naming ``label``.
    What the record adds to rageval.yml's keys (``path``, the judge's identity) is set aside."""
    raw = {k: v for k, v in resolved.items() if k != "path"}
    if isinstance(raw.get("judge"), Mapping):
        raw["judge"] = {k: v for k, v in raw["judge"].items() if k not in JUDGE_PARAMETERS}
    return config_from_dict(raw, path, label=label)


def _problem(error: ConfigError) -> str:
    return error.message.rstrip(".")


def why_not(cfg: Config, baseline: RunResult | None, candidate: RunResult) -> str | None:
    """Why attribution cannot run for this PR, or None when it can."""
    if baseline is None:
        return "there is no baseline to attribute a change against"
    if cfg.app.type != "builtin":
        return (f"the app is a {cfg.app.type} app: rageval cannot re-run it with a knob reverted, since the "
                "config does not drive it")
    if pipeline_of(candidate) != (True, True) and not cfg.attribution.models:
        return ("the pipeline calls a model (generation, embedding or judge), so the extra runs would cost calls; "
                "set attribution.models: true to allow them")
    try:
        recorded_config(baseline.config, cfg.path, f"`config` in {baseline.source or 'the baseline'}")
    except ConfigError as exc:
        return MSG_BASELINE_CONFIG.format(problem=_problem(exc))
    return None


def _unmixable(cfg: Config, knobs: Sequence[Knob], baseline: RunResult, files: Mapping[str, Path]) -> str | None:
    """Why the runs cannot be made (a config some run needs does not validate), or None: checked for
    every single-knob run before the first one, so none is wasted."""
    for knob in knobs:
        for back in ([knob], [k for k in knobs if k is not knob]):
            names = [k for b in back for k in b.keys]
            if not names:
                continue
            label = f"the PR's config with {', '.join(names)} set back to the baseline's"
            try:
                recorded_config(reverted(cfg, back, baseline.config, files).to_dict(), cfg.path, label)
            except ConfigError as exc:
                return MSG_MIXED_CONFIG.format(problem=_problem(exc))
    return None


class _Runs:
    """The variants, each run once: the PR's config with a set of knobs reverted, keyed by the set
    of names; each single and pair revert gated like the PR. At most ``limit`` runs."""

    def __init__(self, cfg: Config, knobs: Sequence[Knob], baseline: RunResult, candidate: RunResult,
                 corpus: Corpus, tmp: Path, run_variant: Runner, gate_variant: Gater) -> None:
        self.cfg, self.knobs, self.baseline, self.candidate, self.corpus = cfg, knobs, baseline, candidate, corpus
        self.tmp, self.run_variant, self.gate_variant = tmp, run_variant, gate_variant
        self.files = written_out(knobs, tmp / "files")
        self.limit = 2 * cfg.attribution.max_knobs
        self.done: dict[frozenset[str], RunResult] = {}
        self.passed: dict[frozenset[str], bool] = {}

    def names(self, knobs: Sequence[Knob]) -> frozenset[str]:
        return frozenset(k.name for k in knobs)

    def run(self, back: Sequence[Knob]) -> RunResult | None:
        """The PR's config with ``back`` reverted (None: past the ceiling, or every knob: the baseline)."""
        key = self.names(back)
        if len(key) == len(self.knobs):
            return None
        if not key:
            return self.candidate
        if key not in self.done:
            if len(self.done) >= self.limit:
                return None
            self.done[key] = self._make(back)
        return self.done[key]

    def _make(self, back: Sequence[Knob]) -> RunResult:
        texts = {p: text for k in back for p, text in k.files.items()}
        variant_corpus = None
        if texts:
            workdir = self.tmp / f"corpus-{len(self.done)}"
            workdir.mkdir(parents=True)
            variant_corpus = corpus_with(self.corpus, texts, workdir)
        return self.run_variant(reverted(self.cfg, back, self.baseline.config, self.files), variant_corpus)

    def gate(self, back: Sequence[Knob]) -> bool | None:
        """Whether the gate passes with ``back`` reverted (None: not run)."""
        key = self.names(back)
        if key not in self.passed:
            found = self.run(back)
            if found is None or found is self.candidate:
                return None
            self.passed[key] = not self.gate_variant(found).blocked
        return self.passed[key]

    def value(self, back: frozenset[str], metric: str, ids: Sequence[str]) -> float | None:
        """``metric`` over ``ids`` with ``back`` reverted, from a run made (every knob: the baseline)."""
        if len(back) == len(self.knobs):
            return value_on(self.baseline, metric, ids)
        run = self.candidate if not back else self.done.get(back)
        return None if run is None else value_on(run, metric, ids)


def _delta(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base


def _interactions(metric: str, ids: Sequence[str], runs: _Runs, band: float) -> str | None:
    """The pairs whose joint effect (measured) differs from the sum of their effects alone."""
    names = [k.name for k in runs.knobs]
    labels = {k.name: k.label for k in runs.knobs}
    base = runs.value(frozenset(names), metric, ids)
    everything = frozenset(names)
    out = []
    for x, y in itertools.combinations(names, 2):
        one, two = _delta(runs.value(everything - {x}, metric, ids), base), _delta(runs.value(everything - {y}, metric, ids), base)
        both = _delta(runs.value(everything - {x, y}, metric, ids), base)
        if one is None or two is None or both is None:
            continue
        visible = abs(round(one, 2) + round(two, 2) - round(both, 2)) >= 0.01 - 1e-9
        if abs(both - one - two) > max(band, MIN_INTERACTION) and visible:
            out.append(f"{labels[x]} and {labels[y]} interact on {metric}: alone they make {fmt_delta(one)} and "
                       f"{fmt_delta(two)}, together {fmt_delta(both)}")
    return "; ".join(out) or None


def _effects(metric: str, ids: Sequence[str], runs: _Runs, band: float) -> MetricAttribution:
    everything = frozenset(k.name for k in runs.knobs)
    base = runs.value(everything, metric, ids)
    whole = _delta(runs.value(frozenset(), metric, ids), base)
    effects = [Effect(k.label, _delta(runs.value(everything - {k.name}, metric, ids), base),
                      _delta(runs.value(frozenset({k.name}), metric, ids), base)) for k in runs.knobs]
    effects.sort(key=lambda e: e.alone if e.alone is not None else float("inf"))
    return MetricAttribution(metric, whole, tuple(effects), _interactions(metric, ids, runs, band))


def _pairs(runs: _Runs, metrics: Sequence[str], ids: Sequence[str]) -> list[tuple[Knob, Knob]]:
    """Every pair of knobs, those whose reverts one at a time recover most of the first metric first."""
    metric = metrics[0] if metrics else None
    pr = runs.value(frozenset(), metric, ids) if metric else None

    def recovered(k: Knob) -> float:
        left = runs.value(frozenset({k.name}), metric, ids) if metric else None
        return 0.0 if left is None or pr is None else left - pr
    return sorted(itertools.combinations(runs.knobs, 2), key=lambda p: -(recovered(p[0]) + recovered(p[1])))


def _cases(verdict: Verdict, runs: _Runs) -> dict[str, tuple[str, ...]]:
    """For each pass→fail and new zero-tolerance case, the gated reverts it passes under."""
    ids = list(dict.fromkeys([*verdict.pass_to_fail, *(r.case for r in verdict.blocking_reasons
                                                          if r.rule == "zero_tolerance" and r.case)]))
    labels = {k.name: k.label for k in runs.knobs}
    out = {}
    for case_id in ids:
        fixes = [key for key, run in sorted(runs.done.items(), key=lambda kv: (len(kv[0]), sorted(kv[0])))
                 if len(key) <= 2 and (case := run.case_map.get(case_id)) is not None and case.passed]
        singles = [k for k in fixes if len(k) == 1]
        chosen = singles or [k for k in fixes if len(k) == 2][:1]
        if chosen:
            out[case_id] = tuple(" + ".join(labels[n] for n in sorted(k, key=list(labels).index)) for k in chosen)
    return out


def _unblocks(runs: _Runs, metrics: Sequence[str], ids: Sequence[str]) -> tuple[list[tuple[str, ...]], bool]:
    """The reverts that pass the gate: every single one gated; pairs only when no single does, within
    the ceiling. And whether every pair was gated."""
    labels = {k.name: k.label for k in runs.knobs}
    singles = [k for k in runs.knobs if runs.gate([k])]
    if singles:
        return [(k.label,) for k in singles], False
    if len(runs.knobs) <= 2:
        return [], False
    every = True
    for x, y in _pairs(runs, metrics, ids):
        passed = runs.gate([x, y])
        if passed is None:
            every = False
            break
        if passed:
            return [(labels[x.name], labels[y.name])], False
    return [], every


def attribute(cfg: Config, baseline: RunResult | None, candidate: RunResult, verdict: Verdict, *,
              corpus: Corpus, compared: Sequence[str], run_variant: Runner,
              gate_variant: Gater) -> Attribution | None:
    """Ablation runs for ``verdict`` (see the module docstring); None when attribution is off, or
    on_block and the PR passed. ``run_variant(config, corpus)`` runs the compared cases,
    ``gate_variant(run)`` gates such a run like the PR."""
    mode = cfg.attribution.run
    if mode == "off" or (mode == "on_block" and not verdict.blocked):
        return None
    metrics = blocking_metrics(verdict) or list(dict.fromkeys([*cfg.gate.floors, *cfg.gate.max_drop]))
    why = why_not(cfg, baseline, candidate)
    if why or baseline is None:
        return Attribution("not_available", why or "")
    knobs, missing = all_knobs(cfg, baseline, corpus)
    note = f" ({'; '.join(missing)})" if missing else ""
    if not knobs:
        return Attribution("not_available", "no knob that changes answers differs from the baseline" + note)
    if len(knobs) == 1:
        return Attribution("one_knob", f"only {knobs[0].label} changed, so the drop is its{note}", (knobs[0].label,))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rageval-attribution-") as tmp:
        runs = _Runs(cfg, knobs, baseline, candidate, corpus, Path(tmp), run_variant, gate_variant)
        unmixable = _unmixable(cfg, knobs, baseline, runs.files)
        if unmixable:
            return Attribution("not_available", unmixable + note)
        for knob in knobs:                       # each single revert first: what a reviewer can act on
            runs.run([knob])
        unblocks, every = _unblocks(runs, metrics, compared)
        for knob in knobs:                       # then each knob alone, while the ceiling allows
            runs.run([k for k in knobs if k is not knob])
    cost = Cost.total([r.cost for r in runs.done.values()], sum(len(r.cases) for r in runs.done.values()))
    cost = dataclasses.replace(cost, by_case={}, rerun=None)
    stopped = sum(1 for r in runs.done.values() for c in r.cases if "budget exceeded" in (c.error or ""))
    if stopped:
        return Attribution("not_available", MSG_BUDGET.format(n=stopped, runs=len(runs.done)) + note,
                           tuple(k.label for k in knobs), runs=len(runs.done), cost=cost,
                           seconds=round(time.monotonic() - started, 3), model_calls=cost.calls_total)
    results = tuple(_effects(m, compared, runs, verdict.noise[m].band if m in verdict.noise else 0.0) for m in metrics)
    return Attribution("attributed", note.strip(" ()"), tuple(k.label for k in knobs), results,
                       runs=len(runs.done), seconds=round(time.monotonic() - started, 3),
                       model_calls=cost.calls_total, unblocks=tuple(unblocks), gated=len(runs.passed),
                       every_pair=every, cases=_cases(verdict, runs), cost=cost)

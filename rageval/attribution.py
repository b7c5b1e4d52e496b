"""Which change broke it: attribute a blocked PR's drops to the knobs it changed, by ablation.

A *knob* is a config key that changes answers (chunking, embedding, retrieval, generation — not
paths, gate or report settings, nor the cut-offs a run measures at) or one changed corpus file.
With k ≥ 2 knobs changed, the PR's gated subset is re-run twice per knob — the PR's config with
that knob reverted to the baseline's value (leave-one-out), and the baseline's config with only
that knob applied — so at most 2·k extra runs; more than ``attribution.max_knobs`` changed keys are
grouped by section (every chunking key is one knob …). For each metric that blocked, each knob's
effect is reported both ways: its Δ alone, and the Δ left when it is reverted. When the effects
alone do not add up to the whole Δ (beyond the noise band), the knobs interact, and the report
says so.

The runs use the builtin app (the config drives nothing else) and, unless ``attribution.models``
is true, only deterministic stages: a pipeline that calls a model is not re-run on its own account.

The baseline's recorded config is validated like rageval.yml (``recorded_config``) before any value
of it is put back, and so is every mix of the two configs a run would use (main's chunk size with the
PR's overlap may not validate); when one does not, attribution is "not available" and says why —
the gate's verdict stands either way.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rageval.config import config_from_dict
from rageval.errors import ConfigError
from rageval.gate.ablation import Attribution, Effect, MetricAttribution
from rageval.gate.decide import config_diff
from rageval.gate.format import fmt_delta
from rageval.gate.thresholds import pipeline_of
from rageval.gate.verdict import ConfigChange, Verdict
from rageval.golden.corpus import Corpus, load_corpus
from rageval.golden.history import file_at
from rageval.metrics.judge import JUDGE_PARAMETERS
from rageval.metrics.registry import case_value
from rageval.results import RunResult
from rageval.settings import Config, flatten, new_at_default

ANSWER_SECTIONS = ("chunking", "embedding", "retrieval", "generation")
#: keys of those sections that change what is measured or how it is sent, not the answers
NOT_KNOBS = ("retrieval.k", "retrieval.token_budgets", "embedding.batch_size")
MIN_INTERACTION = 0.005         # below this, effects are "adding up" even when no noise was measured

Runner = Callable[[Config, Corpus | None], RunResult]

MSG_BASELINE_CONFIG = ("the baseline's recorded config does not validate with this rageval ({problem}); re-create "
                       "the baseline with this version to attribute against it")
MSG_MIXED_CONFIG = ("the knobs cannot be tried one at a time, since a mix of the baseline's and the PR's values does "
                    "not validate ({problem})")


@dataclass(frozen=True)
class Knob:
    """One thing the PR changed: config keys (one key, or a whole section when grouped) or a file."""

    name: str                                # "chunking.size", "chunking", "corpus docs/doi-tra.md"
    keys: tuple[str, ...] = ()               # the dotted config keys it covers
    before: Any = None
    after: Any = None
    files: Mapping[Path, str] = dataclasses.field(default_factory=dict)  # corpus file -> its text at the baseline

    @property
    def label(self) -> str:
        if self.files:
            return self.name
        return f"{self.name} {_shown(self.before)}→{_shown(self.after)}"


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return "(absent)" if value is None else str(value)


def config_knobs(before: Mapping[str, Any], after: Mapping[str, Any], max_knobs: int) -> list[Knob]:
    """The answer-changing config keys that differ; grouped by section past ``max_knobs``."""
    changes = [d for d in config_diff(before, after)
               if d.key.split(".")[0] in ANSWER_SECTIONS and d.key not in NOT_KNOBS
               and not new_at_default(d.key, d.before, d.after)]
    if len(changes) <= max_knobs:
        return [Knob(d.key, (d.key,), d.before, d.after) for d in changes]
    sections: dict[str, list[ConfigChange]] = {}
    for d in changes:
        sections.setdefault(d.key.split(".")[0], []).append(d)
    return [Knob(name, tuple(d.key for d in ds), {d.key.split(".", 1)[1]: d.before for d in ds},
                 {d.key.split(".", 1)[1]: d.after for d in ds}) for name, ds in sections.items()]


def corpus_knobs(baseline: RunResult, corpus: Corpus, root: Path) -> tuple[list[Knob], list[str]]:
    """One knob per corpus file whose sections changed since the baseline, with its text at the
    baseline's commit; and why a changed file could not be reverted (not in this checkout)."""
    before = (baseline.corpus or {}).get("sections") or {}
    after = {s.id: s for s in corpus.sections}
    changed_docs = {s.document for sid, s in after.items()
                    if sid not in before or before[sid].get("sha256") != _sha(s.text)}
    changed_docs |= {b.get("document") for sid, b in before.items() if sid not in after}
    knobs, missing = [], []
    for path in corpus.files:
        if path.stem not in changed_docs:
            continue
        old = file_at(path, baseline.git_sha) if baseline.git_sha else "the baseline records no commit"
        label = f"corpus {_relative(path, root)}"
        if isinstance(old, str):
            missing.append(f"{label}: {old}")
        else:
            knobs.append(Knob(label, files={path: old.decode("utf-8", errors="replace")}))
    return knobs, missing


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


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


def reverted(cfg: Config, knobs: Sequence[Knob], baseline_config: Mapping[str, Any]) -> Config:
    """``cfg`` with the config keys of ``knobs`` set back to the baseline's values."""
    flat = flatten(baseline_config)
    for knob in knobs:
        for key in knob.keys:
            cfg = _set(cfg, key.split("."), flat.get(key), cfg.root)
    return cfg


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


def _effects(metric: str, ids: Sequence[str], base: float | None, pr: float | None,
             runs: Sequence[tuple[Knob, RunResult, RunResult]], band: float) -> MetricAttribution:
    whole = None if base is None or pr is None else pr - base
    effects = []
    for knob, alone, loo in runs:
        a, left = value_on(alone, metric, ids), value_on(loo, metric, ids)
        effects.append(Effect(knob.label, None if a is None or base is None else a - base,
                              None if left is None or base is None else left - base))
    effects.sort(key=lambda e: e.alone if e.alone is not None else math.inf)
    total = sum(e.alone for e in effects if e.alone is not None)
    interaction = None
    if whole is not None and abs(total - whole) > max(band, MIN_INTERACTION):
        interaction = (f"the knobs interact: alone their effects add up to {fmt_delta(total)}, together they "
                       f"make {fmt_delta(whole)}")
    return MetricAttribution(metric, whole, tuple(effects), interaction)


def _knobs(cfg: Config, baseline: RunResult, corpus: Corpus) -> tuple[list[Knob], list[str]]:
    """Every knob the PR changed (config keys, corpus files), within ``attribution.max_knobs``."""
    knobs = config_knobs(baseline.config, cfg.to_dict(), cfg.attribution.max_knobs)
    files, missing = corpus_knobs(baseline, corpus, cfg.root)
    if len(knobs) + len(files) > cfg.attribution.max_knobs and len(files) > 1:
        files = [Knob(f"corpus ({len(files)} files)", files={p: t for k in files for p, t in k.files.items()})]
    return knobs + files, missing


def _unmixable(cfg: Config, knobs: Sequence[Knob], baseline: RunResult) -> str | None:
    """Why the runs cannot be made (a config some run needs does not validate), or None: checked for
    every run before the first one, so none is wasted."""
    for knob in knobs:
        for back in ([knob], [k for k in knobs if k is not knob]):
            names = [k for b in back for k in b.keys]
            if not names:
                continue
            label = f"the PR's config with {', '.join(names)} set back to the baseline's"
            try:
                recorded_config(reverted(cfg, back, baseline.config).to_dict(), cfg.path, label)
            except ConfigError as exc:
                return MSG_MIXED_CONFIG.format(problem=_problem(exc))
    return None


def _variant(cfg: Config, reverted_knobs: Sequence[Knob], baseline: RunResult, corpus: Corpus,
             workdir: Path, run_variant: Runner) -> RunResult:
    """One extra run: ``cfg`` with these knobs set back to the baseline's."""
    files = {p: text for k in reverted_knobs for p, text in k.files.items()}
    variant_corpus = None
    if files:
        workdir.mkdir(parents=True)
        variant_corpus = corpus_with(corpus, files, workdir)
    return run_variant(reverted(cfg, reverted_knobs, baseline.config), variant_corpus)


def attribute(cfg: Config, baseline: RunResult | None, candidate: RunResult, verdict: Verdict, *,
              corpus: Corpus, compared: Sequence[str], run_variant: Runner) -> Attribution | None:
    """Ablation runs for ``verdict`` (see the module docstring); None when attribution is off, or
    on_block and the PR passed. ``run_variant(config, corpus)`` runs the compared cases."""
    mode = cfg.attribution.run
    if mode == "off" or (mode == "on_block" and not verdict.blocked):
        return None
    metrics = blocking_metrics(verdict) or list(dict.fromkeys([*cfg.gate.floors, *cfg.gate.max_drop]))
    why = why_not(cfg, baseline, candidate)
    if why or baseline is None:
        return Attribution("not_available", why or "")
    knobs, missing = _knobs(cfg, baseline, corpus)
    note = f" ({'; '.join(missing)})" if missing else ""
    if not knobs:
        return Attribution("not_available", "no knob that changes answers differs from the baseline" + note)
    if len(knobs) == 1:
        return Attribution("one_knob", f"only {knobs[0].label} changed, so the drop is its{note}", (knobs[0].label,))
    unmixable = _unmixable(cfg, knobs, baseline)
    if unmixable:
        return Attribution("not_available", unmixable + note)
    started, done, runs = time.monotonic(), {}, []
    with tempfile.TemporaryDirectory(prefix="rageval-attribution-") as tmp:

        def variant(reverted_knobs: list[Knob]) -> RunResult:
            key = frozenset(k.name for k in reverted_knobs)     # with two knobs, one alone = the other reverted
            if key not in done:
                done[key] = _variant(cfg, reverted_knobs, baseline, corpus, Path(tmp) / str(len(done)), run_variant)
            return done[key]

        for knob in knobs:
            runs.append((knob, variant([k for k in knobs if k is not knob]), variant([knob])))
    results = tuple(_effects(m, compared, value_on(baseline, m, compared), value_on(candidate, m, compared), runs,
                             verdict.noise[m].band if m in verdict.noise else 0.0) for m in metrics)
    return Attribution("attributed", note.strip(" ()"), tuple(k.label for k in knobs), results,
                       runs=len(done), seconds=round(time.monotonic() - started, 3),
                       model_calls=sum(r.cost.calls_total for r in done.values()))

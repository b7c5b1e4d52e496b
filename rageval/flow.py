"""The one gate pipeline both faces call — `rageval baseline/gate` and the GitHub Action:
run (with repeats → noise) → decide → confirm by re-run → render.

``run_repeats`` measures noise for a baseline; ``gate`` runs (or takes) the candidate, decides
against the baseline with re-runs through the evaluation, and renders the report. The CLI and the
action only add their own parts (arguments and printing; inputs, artifact, comment, status).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rageval import attribution
from rageval.cost import Cost
from rageval.errors import RagevalError
from rageval.gate import report, stats, terminal
from rageval.gate.decide import Decision, decide
from rageval.gate.verdict import Verdict
from rageval.golden.corpus import Corpus
from rageval.golden.set import Case
from rageval.metrics.aggregate import run_totals
from rageval.pipeline.judging import judge_gate_allowed
from rageval.pipeline.runner import Evaluation, prepare
from rageval.results import Noise, Progress, RunResult
from rageval.settings import Config

RerunLog = Callable[[list[str] | None], None]
MSG_SHARD_GATED = ("the {what} {source} is shard {shard} of a run, not a run: join the parts with `rageval merge "
                   "shard-*.json --out results.json` (the action: mode merge) and gate that.")


# --- baseline: repeats -> noise ---------------------------------------------------------------

def _noise(runs: Sequence[RunResult], deterministic: bool) -> Noise:
    """σ per summary metric and per slice over the runs; zero when there was one run."""
    summaries = [dict(r.summary.metrics) for r in runs]
    first = runs[0].summary
    if len(runs) > 1:
        sigma = stats.sigma_over_runs(summaries)
        by_slice = {label: stats.sigma_over_runs([dict(r.summary.by_slice[label].metrics) for r in runs
                                                  if label in (r.summary.by_slice or {})])
                    for label in first.by_slice or {}}
    else:
        sigma = {k: 0.0 for k in first.metrics}
        by_slice = {label: {k: 0.0 for k in s.metrics} for label, s in (first.by_slice or {}).items()}
    # each run's [sum, count] per metric: what `rageval merge` adds the shards of a sharded baseline with
    totals = tuple(run_totals(r.cases, r.metric_names) for r in runs) if len(runs) > 1 else ()
    return Noise(sigma=sigma, by_slice=by_slice, runs=tuple(summaries), runs_executed=len(runs),
                 deterministic=deterministic, totals=totals)


def run_repeats(ev: Evaluation, repeats: int, progress: Progress | None = None) -> RunResult:
    """Run the eval ``repeats`` times to measure noise. Deterministic stages run once: later runs
    reuse the first run's retrieval and call only the model stages, with the cache bypassed. When
    nothing in the pipeline calls a model, the runs would be identical, so one run is made and
    its noise is recorded as zero. The result's summary metrics are the mean over the runs; its
    cost is the first run's, with the repeats' under ``cost.rerun``."""
    if repeats < 1:
        raise RagevalError(f"--repeats must be at least 1, got {repeats}.")
    first = ev.run(progress=progress)
    runs = [first]
    if not ev.deterministic:
        runs += [ev.run(fresh=True, previous=first, progress=progress) for _ in range(repeats - 1)]
    summaries = [r.summary.metrics for r in runs]
    mean = {k: stats.mean_or_none([s.get(k) for s in summaries]) for k in summaries[0]}
    return first.replace(
        summary=replace(first.summary, metrics=mean), repeats=repeats, noise=_noise(runs, ev.deterministic),
        flaky=tuple(stats.flaky_cases([{c.id: c.passed for c in r.cases} for r in runs]) if len(runs) > 1 else ()),
        cost=with_reruns(first.cost, runs[1:]),
        timings={k: round(sum(r.timings.get(k, 0.0) for r in runs), 3) for k in first.timings})


def with_reruns(cost: Cost, reruns: Sequence[RunResult]) -> Cost:
    """``cost`` with the re-runs' costs summed under ``rerun`` (unchanged when there were none)."""
    if not reruns:
        return cost
    return cost.with_rerun(Cost.total([r.cost for r in reruns], sum(len(r.cases) for r in reruns)))


# --- gate --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GateOutcome:
    """The decision and what to show: the verdict, the runs as compared, the PR comment, the
    one-line summary and notes (e.g. why judge_pass was not gated)."""

    verdict: Verdict
    baseline: RunResult | None
    candidate: RunResult
    markdown: str
    line: str
    notes: tuple[str, ...] = ()


def gate(cfg: Config, baseline: RunResult | None, *, evaluation: Evaluation | None = None,
         candidate: RunResult | None = None, expected: Sequence[Case] | None = None,
         progress: Progress | None = None, on_rerun: RerunLog | None = None) -> GateOutcome:
    """Gate a PR: run ``evaluation`` (or take a finished ``candidate``, which then cannot be
    re-run), decide against ``baseline`` — re-running through the evaluation near a threshold —
    and render the report. ``expected``: the golden cases the candidate must answer (default:
    the evaluation's cases); one it lacks is a failing case. The re-runs' model calls, made with
    the cache bypassed, are counted apart: ``candidate.cost.rerun`` and ``verdict.reran.cost``."""
    if (evaluation is None) == (candidate is None):
        raise ValueError("flow.gate needs exactly one of evaluation and candidate")
    rerun = None
    reruns: list[RunResult] = []
    if evaluation is not None:
        candidate = evaluation.run(progress=progress)
        first = candidate

        def rerun(case_ids: list[str] | None) -> RunResult:
            if on_rerun is not None:
                on_rerun(case_ids)
            reruns.append(evaluation.run(fresh=True, case_ids=case_ids, previous=first))
            return reruns[-1]
        expected = expected if expected is not None else evaluation.golden.cases
    if candidate is None or expected is None:
        raise ValueError("flow.gate needs the expected golden cases with a finished candidate")
    for run, what in ((candidate, "candidate"), (baseline, "baseline")):
        if run is not None and run.shard is not None:
            raise RagevalError(MSG_SHARD_GATED.format(what=what, source=run.source or what, shard=run.shard))
    notes: list[str] = []
    allowed, why = judge_gate_allowed(cfg.judge)
    if cfg.judge.min_agreement is not None and not allowed:
        notes.append(f"judge_pass is not gated: {why}")
    decision = decide(cfg, baseline, candidate, expected=expected, rerun=rerun, gate_judge=allowed)
    verdict, candidate = with_attribution(cfg, decision, evaluation), decision.candidate
    if reruns:
        cost = with_reruns(candidate.cost, reruns)
        candidate = candidate.replace(cost=cost)
        verdict = replace(verdict, reran=replace(verdict.reran, cost=cost.rerun))
    markdown = report.render_markdown(verdict, decision.baseline, candidate, cfg.report)
    line = terminal.render_summary_line(verdict, title=cfg.report.title)
    return GateOutcome(verdict, decision.baseline, candidate, markdown, line, tuple(notes))


def with_attribution(cfg: Config, decision: Decision, evaluation: Evaluation | None) -> Verdict:
    """The verdict with ``attribution`` (rageval/attribution.py): the ablation runs go through the
    evaluation's own corpus, subset and environment."""
    verdict = decision.verdict
    if evaluation is None:
        if cfg.attribution.run == "always" or (cfg.attribution.run == "on_block" and verdict.blocked):
            found = attribution.Attribution("not_available", "the candidate was given as a file (--candidate), "
                                            "not run here, so it cannot be re-run with a knob reverted")
            return replace(verdict, attribution=found)
        return verdict
    compared = decision.compared

    def run_variant(variant: Config, corpus: Corpus | None) -> RunResult:
        ev = prepare(variant, env=evaluation.env, subset=evaluation.subset, golden=evaluation.golden.full,
                     corpus=corpus if corpus is not None else evaluation.corpus)
        return ev.run(case_ids=list(compared))

    found = attribution.attribute(cfg, decision.baseline, decision.candidate, verdict, corpus=evaluation.corpus,
                                  compared=compared, run_variant=run_variant)
    return verdict if found is None else replace(verdict, attribution=found)

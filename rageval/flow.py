"""The one gate pipeline both faces call — `rageval baseline/gate` and the GitHub Action:
run (with repeats → noise) → decide → confirm by re-run → render.

``run_repeats`` measures noise for a baseline; ``gate`` runs (or takes) the candidate, decides
against the baseline with re-runs through the evaluation, and renders the report. The CLI and the
action only add their own parts (arguments and printing; inputs, artifact, comment, status).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rageval import attribution, knobs
from rageval.cost import Cost
from rageval.errors import RagevalError
from rageval.gate import report, stats, terminal, trend
from rageval.gate.compare import identity
from rageval.gate.decide import Decision, decide
from rageval.gate.verdict import Verdict
from rageval.golden import lifecycle
from rageval.golden.corpus import Corpus
from rageval.golden.set import Case, GoldenSet
from rageval.metrics.aggregate import run_totals
from rageval.parse import map_strings
from rageval.pipeline.judging import judge_gate_allowed
from rageval.pipeline.llm import LLMClient
from rageval.pipeline.runner import Evaluation, needs_model, prepare
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


def run_repeats(ev: Evaluation, repeats: int, progress: Progress | None = None, *,
                previous: RunResult | None = None) -> RunResult:
    """Run the eval ``repeats`` times to measure noise. Deterministic stages run once: later runs
    reuse the first run's retrieval and call only the model stages, with the cache bypassed. When
    nothing in the pipeline calls a model, the runs would be identical, so one run is made and
    its noise is recorded as zero. The result's summary metrics are the mean over the runs; its
    cost is the first run's, with the repeats' under ``cost.rerun``. ``previous``: the branch's
    baseline before this one, whose history (and itself) this one carries (``rageval.gate.trend``)."""
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
        timings={k: round(sum(r.timings.get(k, 0.0) for r in runs), 3) for k in first.timings},
        history=trend.carried(previous, trend.gated_metrics(ev.cfg.gate), ev.cfg.report.history))


def with_reruns(cost: Cost, reruns: Sequence[RunResult]) -> Cost:
    """``cost`` with the re-runs' costs summed under ``rerun`` (unchanged when there were none)."""
    if not reruns:
        return cost
    return cost.with_rerun(Cost.total([r.cost for r in reruns], sum(len(r.cases) for r in reruns)))


MSG_TOO_MANY_ERRORS = ("{n} of {total} cases errored (more than run.max_error_rate {rate:g}): a run that measured "
                       "this little is not a result. The first, {case}: {error}")


def too_many_errors(result: RunResult, max_error_rate: float) -> str | None:
    """Why ``result`` is not a result (more than ``max_error_rate`` of its cases errored), or None."""
    errored = [c for c in result.cases if c.error]
    if not result.cases or len(errored) / len(result.cases) <= max_error_rate:
        return None
    return MSG_TOO_MANY_ERRORS.format(n=len(errored), total=len(result.cases), rate=max_error_rate,
                                      case=errored[0].id, error=errored[0].error)


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


def main_cases(baseline: RunResult | None, pr: GoldenSet, subset: str | None,
               corpus: Corpus) -> tuple[GoldenSet, int] | None:
    """main's cases as main asks them (the baseline's golden snapshot, cut by the PR's subset as main
    tags it), when the PR's golden set changed, dropped or untagged some of them; and how many it did.
    A case the PR changed whose expected sections' text the PR also changed is left out: the policy
    moved, main's version of the case is stale by design, and the policy-drift rule holds the PR's
    version to the new text. None when no case is left to hold the PR to (or the baseline has no
    usable snapshot: then only the cases both sets share unchanged compare)."""
    snapshot = baseline.golden.cases if baseline is not None else None
    if not snapshot or baseline.golden.name != pr.name:    # type: ignore[union-attr]
        return None
    sections = ((baseline.corpus or {}).get("sections") or {})   # type: ignore[union-attr]
    moved = {s.id for s in corpus.sections
             if (sections.get(s.id) or {}).get("sha256") != hashlib.sha256(s.text.encode("utf-8")).hexdigest()}
    everything = lifecycle.cases_from_snapshot(snapshot)
    mine = {c.id: identity(c.to_dict()) for c in pr.cases}
    changed = [c for c in everything if (not subset or subset in c.tags) and mine.get(c.id) != identity(c.to_dict())]
    held = {c.id for c in changed if not moved & set(c.expected_sections)}
    main = tuple(c for c in everything if (not subset or subset in c.tags) and (c.id in held or c not in changed))
    if not held:
        return None
    info = baseline.golden
    return GoldenSet(info.name, info.version, info.sha256 or "", pr.path, main, info.changelog, everything), len(held)


def gate(cfg: Config, baseline: RunResult | None, *, evaluation: Evaluation | None = None,
         candidate: RunResult | None = None, expected: Sequence[Case] | None = None,
         progress: Progress | None = None, on_rerun: RerunLog | None = None,
         known_failures: str = "report", full_report: str | None = None,
         links: report.Links | None = None, redact: Callable[[str], str] | None = None) -> GateOutcome:
    """Gate a PR: run ``evaluation`` (or take a finished ``candidate``, which then cannot be
    re-run), decide against ``baseline`` — re-running through the evaluation near a threshold —
    and render the report. ``expected``: the golden cases the candidate must answer (default:
    the evaluation's cases); one it lacks is a failing case. When the PR's golden set changed some
    of main's cases, the PR's pipeline also runs main's cases as main asks them, and drops,
    pass→fail and zero tolerance are gated on those (:func:`main_cases`). ``known_failures``: the
    mode's default for ``gate.known_failures``. The re-runs' model calls, made with the cache
    bypassed, are counted apart: ``candidate.cost.rerun`` and ``verdict.reran.cost``.
    ``full_report``, ``links``: the HTML report's, the job log's, the artifact's and the commits' URLs;
    ``redact``: applied to every string of the outcome before it is rendered."""
    if (evaluation is None) == (candidate is None):
        raise ValueError("flow.gate needs exactly one of evaluation and candidate")
    rerun = None
    reruns: list[RunResult] = []
    own: RunResult | None = None
    own_expected: Sequence[Case] = ()
    changed = 0
    if evaluation is not None:
        candidate = evaluation.run(progress=progress)
        expected = expected if expected is not None else evaluation.golden.cases
        found = main_cases(baseline, evaluation.golden, evaluation.subset, evaluation.corpus)
        if found is not None:
            own, own_expected, (main_golden, changed) = candidate, expected, found
            evaluation = dataclasses.replace(evaluation, golden=main_golden)
            candidate, expected = evaluation.run(progress=progress), main_golden.cases
        first, compared_on = candidate, evaluation

        def rerun(case_ids: list[str] | None) -> RunResult:
            if on_rerun is not None:
                on_rerun(case_ids)
            reruns.append(compared_on.run(fresh=True, case_ids=case_ids, previous=first))
            return reruns[-1]
    if candidate is None or expected is None:
        raise ValueError("flow.gate needs the expected golden cases with a finished candidate")
    for run, what in ((candidate, "candidate"), (baseline, "baseline")):
        if run is not None and run.shard is not None:
            raise RagevalError(MSG_SHARD_GATED.format(what=what, source=run.source or what, shard=run.shard))
    notes: list[str] = []
    allowed, why = judge_gate_allowed(cfg.judge)
    if cfg.judge.min_agreement is not None and not allowed:
        notes.append(f"judge_pass is not gated: {why}")
    decision = decide(cfg, baseline, candidate, expected=expected, rerun=rerun, gate_judge=allowed,
                      known_failures=known_failures, own=own, own_expected=own_expected, changed=changed)
    compared = set(decision.compared)                     # once, not once per case
    gate_variant = _gating(cfg, baseline, [c for c in expected if c.id in compared], allowed, known_failures)
    verdict, candidate = with_attribution(cfg, decision, evaluation, gate_variant), decision.candidate
    verdict = verdict if baseline is None else knobs.with_file_notes(verdict, knobs.file_changes(cfg, baseline))
    if reruns:
        cost = with_reruns(candidate.cost, reruns)
        candidate = candidate.replace(cost=cost)
        verdict = replace(verdict, reran=replace(verdict.reran, cost=cost.rerun))
    return _outcome(cfg, redact, verdict, decision.baseline, candidate, own, tuple(notes), full_report, links)


def _outcome(cfg: Config, redact: Callable[[str], str] | None, verdict: Verdict, baseline: RunResult | None,
             candidate: RunResult, own: RunResult | None, notes: tuple[str, ...], full_report: str | None,
             links: report.Links | None) -> GateOutcome:
    """The outcome as shown: redacted, then rendered; with main's cases run, the PR's own run is
    the outcome's candidate and carries both runs' cost."""
    shown, base, cand, own_shown = _redacted(redact, verdict, baseline, candidate, own)
    markdown = report.render_markdown(shown, base, cand, cfg.report, own=own_shown, full_report=full_report,
                                      links=links)
    if own is not None and own_shown is not None:
        cand = own_shown.replace(cost=Cost.total([own.cost, candidate.cost], len(own.cases) + len(candidate.cases)))
    return GateOutcome(shown, base, cand, markdown, terminal.render_summary_line(shown, title=cfg.report.title),
                       notes)


def redacted_run(run: RunResult, redact: Callable[[str], str] | None) -> RunResult:
    """``run`` with every string through ``redact``: itself when nothing was redacted (the strict
    read that rebuilds it costs about a second per 5,000 cases)."""
    if redact is None:
        return run
    data = run.to_dict()
    clean = map_strings(data, redact)
    return run if clean == data else RunResult.from_dict(clean, run.source or "RunResult")


def _redacted(redact: Callable[[str], str] | None, verdict: Verdict, *runs: RunResult | None) -> tuple:
    """The verdict and runs with every string through ``redact``, before anything is rendered or
    written from them. Redacting the rendered text instead misses a secret the rendering changed — a
    number inside it set in bold, an underscore escaped, the secret cut at a length limit."""
    if redact is None:
        return (verdict, *runs)

    data = verdict.to_dict()
    clean = map_strings(data, redact)
    return (verdict if clean == data else Verdict.read(clean),
            *(None if r is None else redacted_run(r, redact) for r in runs))


def _gating(cfg: Config, baseline: RunResult | None, cases: Sequence[Case], gate_judge: bool,
            known_failures: str) -> attribution.Gater:
    """How an attribution run is gated: as the PR was (main's policy, the same judge gating), on the
    compared cases, without re-runs."""
    def gate_variant(run: RunResult) -> Verdict:
        return decide(cfg, baseline, run, expected=cases, gate_judge=gate_judge, known_failures=known_failures).verdict
    return gate_variant


def _sharing(evaluation: Evaluation, variant: Config) -> LLMClient | None:
    """The model client of an attribution run: the evaluation's own (one budget, one cache), or
    one for the variant's other ``llm`` settings that spends from the same budget."""
    shared = evaluation.client
    if shared is None or not needs_model(variant):
        return None
    if variant.llm == evaluation.cfg.llm:
        return shared
    return LLMClient(variant.llm, env=evaluation.env, spend=shared.spend)


def with_attribution(cfg: Config, decision: Decision, evaluation: Evaluation | None,
                     gate_variant: attribution.Gater) -> Verdict:
    """The verdict with ``attribution`` (rageval/attribution.py): the ablation runs go through the
    evaluation's own corpus, subset, environment and model budget, and each is gated by
    ``gate_variant`` as the PR was."""
    verdict = decision.verdict
    if evaluation is None:
        if cfg.attribution.run == "always" or (cfg.attribution.run == "on_block" and verdict.blocked):
            found = attribution.Attribution("not_available", "the candidate was given as a file (--candidate), "
                                            "not run here, so it cannot be re-run with a knob reverted")
            return replace(verdict, attribution=found)
        return verdict
    compared = decision.compared

    def run_variant(variant: Config, corpus: Corpus | None) -> RunResult:
        ev = prepare(variant, env=evaluation.env, subset=evaluation.subset, golden=evaluation.golden,
                     corpus=corpus if corpus is not None else evaluation.corpus, sections_checked=True,
                     client=_sharing(evaluation, variant))
        return ev.run(case_ids=list(compared))

    found = attribution.attribute(cfg, decision.baseline, decision.candidate, verdict, corpus=evaluation.corpus,
                                  compared=compared, run_variant=run_variant, gate_variant=gate_variant)
    return verdict if found is None else replace(verdict, attribution=found)

"""Run an App over the golden cases concurrently, score every case, aggregate → RunResult.

``prepare(cfg, …)`` loads the golden set and corpus, builds the model client (only when a stage
needs one), the judge and the App, and returns an :class:`Evaluation`; ``Evaluation.run()`` answers
and scores the subset (or some case ids, for the gate's re-runs) and returns a
:class:`~rageval.results.RunResult`. The runner measures no noise: repeats and σ belong to
``rageval.flow``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from rageval import __version__
from rageval.clock import Clock
from rageval.config import config_files
from rageval.cost import Cost, Usage
from rageval.errors import RagevalError
from rageval.files import kept_out_of_gc, paused_gc
from rageval.golden import lifecycle
from rageval.golden.corpus import Corpus, joined, load_corpus
from rageval.golden.set import Case, GoldenSet, load_golden
from rageval.metrics.aggregate import summarize, verdict_of
from rageval.metrics.judge import JUDGE_PARAMETERS
from rageval.metrics.registry import REGISTRY, RULE, CaseInput
from rageval.metrics.registry import needs_model as checks_need_model
from rageval.metrics.retrieval import Relevance, first_relevant_rank
from rageval.metrics.tables import metric_table
from rageval.pipeline import workers
from rageval.pipeline.apps import App, Trace
from rageval.pipeline.apps.builtin import SEARCH_BATCH, BuiltinApp
from rageval.pipeline.apps.command import CommandApp
from rageval.pipeline.apps.http import HttpApp
from rageval.pipeline.apps.replay import ReplayApp
from rageval.pipeline.handoff import Handoff, Sent
from rageval.pipeline.judging import CaseJudge, ModelJudge
from rageval.pipeline.llm import LLMClient
from rageval.records import FAIL, CaseResult, CheckResult, Shared
from rageval.results import GoldenInfo, Progress, RunResult, Shard
from rageval.settings import Config
from rageval.text import count_tokens


@dataclass
class Evaluation:
    """Everything one evaluation needs, built once; ``run`` may be called again for re-runs."""

    cfg: Config
    golden: GoldenSet
    subset: str | None
    corpus: Corpus
    app: App
    client: LLMClient | None = None
    judge: CaseJudge = field(default_factory=CaseJudge)
    index_seconds: float = 0.0
    env: Mapping[str, str] = field(default_factory=dict)     # what the model client and the app may see
    shard: Shard | None = None                               # run only this shard's cases (--shard i/N)
    clock: Clock = field(default_factory=Clock)              # created_at, timings, latencies (rageval.clock)
    processes: int = field(default_factory=workers.cores)    # worker processes at most (RAGEVAL_PROCESSES)

    @cached_property
    def golden_audit(self) -> dict[str, Any]:
        """Leaks of golden questions and coverage of sections and slices (the whole golden set);
        computed once per evaluation, recorded in every RunResult it builds. With
        ``golden_checks.missing_sections: skip``, the expected sections no corpus file has."""
        leaks, coverage = lifecycle.audit_golden(self.cfg, self.golden, self.corpus)
        audit = {"leaks": None if leaks is None else [x.to_dict() for x in leaks], "coverage": coverage.to_dict()}
        missing = missing_sections(self.golden.full, self.corpus)
        if missing:
            audit["missing_sections"] = {"policy": self.cfg.golden_checks.missing_sections,
                                         "sections": sorted({s for ids in missing.values() for s in ids}),
                                         "cases": sorted(missing)}
        return audit

    @cached_property
    def holders(self) -> Mapping[str, tuple[frozenset[str], ...]] | None:
        """Section → the section sets of the index's chunks holding it, when the app says (the
        builtin app's chunks): the chunks nDCG's ideal ranking may use. None otherwise."""
        chunks = getattr(self.app, "chunks", None)
        if chunks is None:
            return None
        out: dict[str, set[frozenset[str]]] = {}
        for chunk in chunks:
            held = frozenset(chunk.sections)
            for section in held:
                out.setdefault(section, set()).add(held)
        return {s: tuple(sorted(h, key=sorted)) for s, h in out.items()}

    @cached_property
    def snapshots(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(golden cases, corpus sections) as the next run's policy-drift and golden-diff checks need them."""
        units = self.cfg.checks.units
        return lifecycle.golden_snapshot(self.golden, units), lifecycle.corpus_snapshot(self.corpus, self.golden, units)

    @property
    def deterministic(self) -> bool:
        return bool(getattr(self.app, "deterministic", False)) and not self.cfg.judge.model

    def answer_all(self, cases: Sequence[Case], *, fresh: bool = False,
                   previous: Mapping[str, CaseResult] | None = None,
                   progress: Progress | None = None) -> list[CaseResult]:
        """Answer and score ``cases`` concurrently; returns the results in the input order, and
        calls ``progress`` after each. Cases go through the app in blocks of ``BLOCK``, retrieved
        a block at a time or, for the builtin app, a few blocks at a time (:meth:`searches`), and
        each scored case keeps only its top ``retrieval.store_k`` retrieved items, so memory holds
        one search's full rankings, not the run's (issue 22: 5,545 cases at top_k 1000). The builtin
        app's deterministic pipeline answers the searches in worker processes, one per core
        (:mod:`rageval.pipeline.workers`); a question gets the same chunks in any search."""
        prepare_app = getattr(self.app, "prepare", None)
        store_k = self.cfg.retrieval.store_k

        def one(case: Case) -> CaseResult:
            prev = previous.get(case.id) if previous else None
            try:
                trace = self.app.answer(case, fresh=fresh, previous=reusable(prev, store_k))
            except RagevalError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's app failing is a per-case error
                trace = Trace(case.id, error=f"{type(exc).__name__}: {exc}")
            return score_case(case, trace, self.corpus, self.cfg, self.judge, fresh=fresh, holders=self.holders,
                              keep=store_k, latency=self.clock.latency)

        def answer_search(search: Sequence[Sequence[Case]], each: Callable[..., Iterator[CaseResult]] = map
                          ) -> Iterator[CaseResult]:
            if prepare_app is not None:
                prepare_app([case for block in search for case in block])
            for block in search:
                yield from each(one, block)

        out: list[CaseResult] = []
        with kept_out_of_gc() as keep:        # what the run holds, then each block of results it keeps
            for results in self._answered(self.searches(cases), answer_search):
                for result in results:
                    out.append(result)
                    if progress:
                        progress(len(out), len(cases))
                keep()
        return out

    def _answered(self, searches: list[list[Sequence[Case]]], answer_search: Callable[..., Iterator[CaseResult]]
                  ) -> Iterator[Iterable[CaseResult]]:
        """The results of ``searches`` (``answer_search`` answers one), a block or a search at a time."""
        processes = self.processes_for(len(searches))
        n_cases = sum(len(block) for search in searches for block in search)
        if processes > 1:
            # read here once, so the workers inherit them (the snapshots: each golden text scanned once;
            # the chunks every worker would read: BuiltinApp.before_fork)
            self.holders, self.snapshots  # noqa: B018
            self.app.before_fork(n_cases)  # type: ignore[attr-defined]
            handoff = Handoff(self.app.chunks, SHARED)  # type: ignore[attr-defined]

            def job(i: int) -> list[Sent]:
                return [handoff.packed(result) for result in answer_search(searches[i])]
            with workers.in_processes(job, len(searches), processes) as done:
                self.app.after_fork()  # type: ignore[attr-defined]
                for sent in done:
                    yield handoff.unpacked(sent)
            return
        # threads only help an app that waits (a model, a service); an in-process deterministic
        # pipeline is CPU-bound, where threads only contend for the GIL
        threads = 1 if self.deterministic else max(1, min(self.cfg.app.concurrency, n_cases))
        with ThreadPoolExecutor(max_workers=threads) as pool:
            for search in searches:
                yield answer_search(search, map if threads == 1 else pool.map)

    def searches(self, cases: Sequence[Case]) -> list[list[Sequence[Case]]]:
        """``cases`` in blocks of ``BLOCK``, grouped by the app's retrieval: a block at a time, or
        for the builtin app as many blocks as one search takes (at most ``SEARCH_BATCH`` questions
        and ``HELD`` retrieved items at its depth: one pass over the index for them all, where a
        search of 256 questions paid for a pass of its own; docs/benchmarks.md), but no more than
        leaves each worker process a search."""
        parts = list(blocks(cases, BLOCK))
        depth = getattr(self.app, "depth", 0) if isinstance(self.app, BuiltinApp) else 0
        size = max(1, min(SEARCH_BATCH, HELD // depth) // BLOCK) if depth > 0 else 1
        size = min(size, -(-len(parts) // self.processes_for(len(parts)))) if parts else 1
        return [parts[i:i + size] for i in range(0, len(parts), size)]

    def processes_for(self, n_jobs: int) -> int:
        """Worker processes answering ``n_jobs`` searches (or blocks) of cases
        (:mod:`rageval.pipeline.workers`): for the builtin app's deterministic pipeline with no model
        client, where fork exists and from the main thread, ``processes`` (RAGEVAL_PROCESSES, else
        every core) but at most one per job; else 1 (the cases are answered in this process, by
        threads for an app that waits)."""
        if not (self.deterministic and isinstance(self.app, BuiltinApp) and self.client is None
                and workers.can_fork()):
            return 1
        return max(1, min(self.processes, n_jobs))

    def run(self, *, fresh: bool = False, case_ids: Sequence[str] | None = None,
            previous: RunResult | None = None, progress: Progress | None = None) -> RunResult:
        """One pass over the subset (or ``case_ids``; only the shard's cases with ``shard``) → a
        RunResult. ``fresh`` bypasses the response caches; ``previous`` offers the first run's
        traces for deterministic stages."""
        # the golden set's audit first: the leak check's arrays come and go before the cases' results
        # are held, not on top of them (20,000 cases over 10,000 chunks: 425 -> 370 MB at the peak)
        self.golden_audit  # noqa: B018
        started, before = time.monotonic(), ledger_of(self.client)
        cases = [c for c in self.golden.cases if self.shard is None or self.shard.holds(c.id)]
        if case_ids is not None:
            wanted = set(case_ids)
            cases = [c for c in cases if c.id in wanted]
        results = self.answer_all(cases, fresh=fresh, previous=None if previous is None else previous.case_map,
                                  progress=progress)
        eval_s = time.monotonic() - started
        return build_result(self, results, {"index_s": round(self.index_seconds, 3), "eval_s": round(eval_s, 3),
                                            "total_s": round(self.index_seconds + eval_s, 3)},
                            Cost.of(ledger_of(self.client).since(before), len(results)))


#: cases an app answers per batch: its retrieval for a block is held at full depth until scored
BLOCK = 256
#: retrieved items a search of the builtin app may hold at full depth until its cases are scored
HELD = 16_384
#: equal metric tables, check results, slices and usages of a run's cases: one object each
SHARED = Shared()


def blocks(items: Sequence[Case], size: int) -> Iterator[Sequence[Case]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def reusable(case: CaseResult | None, store_k: int) -> Trace | None:
    """The first run's trace an App may reuse on a re-run: only when its retrieval was kept whole
    (fewer items than ``retrieval.store_k``); a cut one would score the deeper cut-offs wrong."""
    if case is None or (case.retrieved is not None and len(case.retrieved) >= store_k):
        return None
    return trace_of(case)


def missing_sections(golden: GoldenSet, corpus: Corpus) -> dict[str, list[str]]:
    """Case id → its expected sections that no corpus file has."""
    known = set(corpus.ids())
    out: dict[str, list[str]] = {}
    for case in golden.cases:
        gone = [s for s in case.expected_sections if s not in known]
        if gone:
            out[case.id] = gone
    return out


def trace_of(case: CaseResult) -> Trace:
    """The trace a scored case was made from (what an App may reuse on a re-run)."""
    return Trace(case.id, case.answer, case.retrieved, dict(case.usage), case.latency_ms, case.error)


def needs_model(cfg: Config) -> bool:
    """Whether a pipeline stage or a check calls a model under ``cfg`` (then a client is built)."""
    return cfg.generation.provider == "openai" or cfg.embedding.provider == "openai" or checks_need_model(cfg)


def prepare(cfg: Config, *, env: Mapping[str, str], subset: str | None = None, app_spec: str | None = None,
            client: LLMClient | None = None, judge: CaseJudge | None = None, corpus: Corpus | None = None,
            golden: GoldenSet | None = None, sections_checked: bool = False,
            shard: Shard | None = None, clock: Clock | None = None) -> Evaluation:
    """Load the golden set and corpus (unless ``golden`` / ``corpus`` are given: the whole set and
    corpus ``cfg`` names, already loaded), check them against each other, build the model client
    (only when a stage needs one), the judge and the App. ``env`` is the environment the model
    client and the user's app may see (the caller decides what it holds); its RAGEVAL_PROCESSES caps
    the worker processes of the builtin app's deterministic pipeline (rageval.pipeline.workers); capped
    at one (or on one core), this process computes on one core, numpy's BLAS included."""
    processes = workers.processes_wanted(env)
    if processes == 1:
        workers.one_blas_thread()
    golden = golden if golden is not None else load_golden(cfg.golden)
    corpus = corpus if corpus is not None else load_corpus(cfg.corpus, cfg.root)
    if not sections_checked:
        if cfg.golden_checks.missing_sections == "fail":
            golden.check_sections(corpus.ids())
        lifecycle.check_slice_gates(cfg, golden)
    chosen = golden.subset(subset)
    if client is None and needs_model(cfg):
        client = LLMClient(cfg.llm, env=env)
    if judge is None and cfg.judge.model:
        judge = ModelJudge(client, cfg.judge, generator=cfg.generation.model if cfg.generation.provider == "openai"
                           else None)
    app = make_app(cfg, corpus, app_spec, client, env)
    return Evaluation(cfg, chosen, subset, corpus, app, client, judge or CaseJudge(),
                      getattr(app, "index_seconds", 0.0), dict(env), shard, clock or Clock(), processes)


#: app.type -> how that App is made from the config (the builtin one also needs the corpus and model client)
APP_FACTORIES: dict[str, Callable[[Config, Corpus, LLMClient | None, Mapping[str, str]], App]] = {
    "builtin": lambda cfg, corpus, client, env: BuiltinApp(cfg, corpus, client),
    "replay": lambda cfg, corpus, client, env: ReplayApp(cfg.app.path),  # type: ignore[arg-type]
    "command": lambda cfg, corpus, client, env: CommandApp(cfg.app.command or (), cfg.root, cfg.app.timeout_s,
                                                           env=env),
    "http": lambda cfg, corpus, client, env: HttpApp(cfg.app.url or "", cfg.app.timeout_s, cfg.app.headers, env=env),
}


def make_app(cfg: Config, corpus: Corpus, app_spec: str | None, client: LLMClient | None,
             env: Mapping[str, str]) -> App:
    """The App the config names; ``app_spec`` ``replay:FILE`` (the command line's ``--app``) overrides it."""
    kind, _, arg = (app_spec or "").partition(":")
    if app_spec and kind != "replay":
        raise RagevalError(f"--app {app_spec!r}: only replay:FILE overrides the config's app on the command line.")
    if kind == "replay":
        return ReplayApp(Path(arg))
    return APP_FACTORIES[cfg.app.type](cfg, corpus, client, env)


# --- scoring ------------------------------------------------------------------------------

def score_case(case: Case, trace: Trace, corpus: Corpus, cfg: Config, judge: CaseJudge, *,
               fresh: bool = False, holders: Mapping[str, Sequence[frozenset[str]]] | None = None,
               keep: int | None = None, latency: Callable[[float | None], float | None] | None = None
               ) -> CaseResult:
    """Every check of one answered case, in the registry's order (retrieval, rules, then model
    checks, told which rules the case already fails), and its verdict: passed when no applicable
    check failed; an App error or a check error makes the case an error (``passed`` None), not a
    fail. ``fresh``: model checks bypass the response cache (the gate's re-runs). ``holders``:
    section → the sections of the index's chunks holding it, when the app says (nDCG's ideal).
    The result keeps the top ``keep`` retrieved items (the metrics see them all) and ``latency`` of
    the trace's latency (:meth:`rageval.clock.Clock.latency`); the result is made once, at the end."""
    case_fields = dict(
        id=case.id, question=case.question, expected_answer=case.expected_answer,
        expected_sections=tuple(case.expected_sections), slice=SHARED.mapping(dict(case.slice)),
        tags=tuple(case.tags), out_of_scope=case.out_of_scope, answer=trace.answer,
        retrieved=trace.retrieved if trace.retrieved is None or keep is None else trace.retrieved[:keep],
        usage=SHARED.mapping(dict(trace.usage)),
        latency_ms=trace.latency_ms if latency is None else latency(trace.latency_ms))
    if trace.error:
        return CaseResult(**case_fields, error=trace.error)
    # chunk sizes: as the app reported them, else counted with our tokenizer
    tokens = None if trace.retrieved is None else [
        r.tokens if r.tokens is not None else count_tokens(r.text) for r in trace.retrieved]
    relevance = case_relevance(case, corpus, cfg, holders)
    metrics: Mapping[str, float] | None = None
    rank = None
    if trace.retrieved is not None and tokens is not None and relevance.grades:
        ranking = [set(r.sections) for r in trace.retrieved]
        metrics = metric_table(cfg.metric_names(), ranking, tokens, relevance, share=SHARED.mapping)
        rank = first_relevant_rank(ranking, relevance)
    sources = tuple(corpus.texts_of([s for s, g in relevance.grades.items() if g > 0]))
    source = joined(sources)
    x = CaseInput(id=case.id, question=case.question, expected_answer=case.expected_answer,
                  expected_sections=tuple(relevance.grades), answer=trace.answer, retrieved=trace.retrieved,
                  source=source, sources=sources, must_include=tuple(case.must_include),
                  must_not_include=tuple(case.must_not_include),
                  out_of_scope=case.out_of_scope, first_relevant_rank=rank,
                  relevant_sections=tuple(s for s in relevance.grades if s in relevance.relevant),
                  k=max(cfg.retrieval.k), units=cfg.checks.units, refusal_markers=cfg.checks.refusal_markers,
                  model=lambda failed: judge.check(case, trace, source, failed, fresh=fresh))
    checks: dict[str, CheckResult] = {}
    for check in REGISTRY.ordered_checks():
        if check.applies(cfg):
            checks[check.name] = result = SHARED.check(check.run(x))  # type: ignore[misc]
            if check.stage == RULE and result.status == FAIL:
                x.failed_rules.append(check.name)
    passed, failures, error = verdict_of(checks)
    return CaseResult(**case_fields, context_tokens=None if tokens is None else sum(tokens[: len(trace.context)]),
                      first_relevant_rank=rank, metrics=SHARED.mapping({}) if metrics is None else metrics,
                      checks=checks, passed=passed, failures=failures, error=error)


def case_relevance(case: Case, corpus: Corpus, cfg: Config,
                   holders: Mapping[str, Sequence[frozenset[str]]] | None) -> Relevance:
    """The case's graded sections as its metrics see them: under ``golden_checks.missing_sections:
    skip`` the sections no corpus file has are left out; ``retrieval.relevance_min`` applies."""
    grades = case.relevance()
    if cfg.golden_checks.missing_sections == "skip":
        known = corpus.by_id()
        grades = {s: g for s, g in grades.items() if s in known}
    held = None if holders is None else [h for s in grades for h in holders.get(s, ())]
    return Relevance.of(grades, cfg.retrieval.relevance_min, held)


# --- the RunResult --------------------------------------------------------------------------

def build_result(ev: Evaluation, cases: list[CaseResult], timings: dict[str, float], cost: Cost) -> RunResult:
    """The RunResult of ``cases`` (built with the garbage collector paused: rageval.files.paused_gc)."""
    with paused_gc():
        return _build_result(ev, cases, timings, cost)


def _build_result(ev: Evaluation, cases: list[CaseResult], timings: dict[str, float], cost: Cost) -> RunResult:
    names = ev.cfg.metric_names()
    golden = ev.golden.describe(ev.subset)
    config = ev.cfg.to_dict()
    config["judge"].update(JUDGE_PARAMETERS)     # the evaluator's identity: rageval.metrics.judge.judge_signature
    return RunResult(
        tool={"name": "rageval", "version": __version__},
        created_at=ev.clock.created_at(),
        git_sha=git_sha(ev.cfg.root),
        golden=GoldenInfo(**golden, n_total=len(ev.golden.full.cases), cases=ev.snapshots[0]),
        corpus={"sections": ev.snapshots[1]},
        golden_checks=ev.golden_audit,
        app={"name": getattr(ev.app, "name", type(ev.app).__name__), "deterministic": ev.deterministic,
             **({"chunks": len(ev.app.chunks), "language": ev.app.language} if isinstance(ev.app, BuiltinApp)
                else {})},
        config=config,
        config_fingerprint=ev.cfg.fingerprint(),
        metric_names=tuple(names),
        summary=summarize(cases, names),
        cases=tuple(cases),
        cost=cost,
        timings=ev.clock.timings(timings),
        shard=ev.shard,
        files=config_files(ev.cfg),
    )


def ledger_of(client: LLMClient | None) -> Usage:
    """The model client's running counts (nothing for a run without one)."""
    return client.ledger() if client is not None else Usage()


def git_sha(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None

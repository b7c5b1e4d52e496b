"""Run an App over the golden cases concurrently, score every case, aggregate → RunResult.

The RunResult is a plain JSON-able dict (schema in docs/runresult.md); ``write_json`` writes it
atomically so a failed run never leaves half a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from rageval import __version__
from rageval.pipeline.apps import Trace, trace_from_dict
from rageval.config import Config
from rageval.golden.corpus import Corpus, load_corpus
from rageval.errors import BaselineError, RagevalError
from rageval.golden.set import Case, GoldenSet, load_golden, slice_labels
from rageval.metrics.base import ERROR, FAIL, PASS, SKIPPED, CheckResult
from rageval.metrics.numbers import check_numbers
from rageval.metrics.retrieval import case_metrics, first_relevant_rank
from rageval.metrics.rules import (
    check_must_include,
    check_must_not_include,
    check_refusal,
)
from rageval.text import count_tokens

SCHEMA_VERSION = 1
Progress = Callable[[int, int], None]
#: check name -> the summary rate it feeds
RATE_OF_CHECK = {"numbers": "numbers_pass", "refusal": "refusal_pass", "judge": "judge_pass"}
RULE_CHECKS = ("must_include", "must_not_include")


class CaseJudge:
    """Model-backed checks of one case (judge, faithfulness). The default reports them skipped."""

    def check(self, case: Case, trace: Trace, expected_text: str) -> dict[str, CheckResult]:
        return {"judge": CheckResult.skipped("no model configured (judge.model)")}


@dataclass
class Evaluation:
    """Everything one evaluation needs, built once; ``run`` may be called again for re-runs."""

    cfg: Config
    golden: GoldenSet
    subset: str | None
    corpus: Corpus
    app: Any
    client: Any = None
    judge: CaseJudge = CaseJudge()
    index_seconds: float = 0.0

    @cached_property
    def golden_checks(self) -> dict[str, Any]:
        """Leaks of golden questions and coverage of sections and slices (the whole golden set);
        computed once per evaluation, recorded in every RunResult it builds."""
        from rageval.golden import lifecycle

        leaks, coverage = lifecycle.check_golden(self.cfg, self.golden, self.corpus)
        return {"leaks": None if leaks is None else [x.to_dict() for x in leaks], "coverage": coverage}

    @cached_property
    def snapshots(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(golden cases, corpus sections) as the next run's policy-drift and golden-diff checks need them."""
        from rageval.golden import lifecycle

        units = self.cfg.checks.units
        return lifecycle.golden_snapshot(self.golden, units), lifecycle.corpus_snapshot(self.corpus, self.golden, units)

    @property
    def deterministic(self) -> bool:
        return bool(getattr(self.app, "deterministic", False)) and not self.cfg.judge.model

    def answer_all(self, cases: Sequence[Case], *, fresh: bool = False,
                   previous: dict[str, dict[str, Any]] | None = None,
                   progress: Progress | None = None) -> list[dict[str, Any]]:
        """Answer and score ``cases`` concurrently; returns case dicts in the input order."""
        prepare = getattr(self.app, "prepare", None)
        if prepare is not None:
            prepare(cases)
        done = 0
        total = len(cases)

        def one(case: Case) -> dict[str, Any]:
            prev = _trace_of(previous.get(case.id)) if previous and case.id in previous else None
            try:
                trace = self.app.answer(case, fresh=fresh, previous=prev)
            except RagevalError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's app failing is a per-case error
                trace = Trace(case.id, error=f"{type(exc).__name__}: {exc}")
            return score_case(case, trace, self.corpus, self.cfg, self.judge)

        out: list[dict[str, Any]] = []
        workers = max(1, min(self.cfg.app.concurrency, total))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for result in pool.map(one, cases):
                out.append(result)
                done += 1
                if progress:
                    progress(done, total)
        return out

    def run(self, *, fresh: bool = False, case_ids: Sequence[str] | None = None,
            previous: dict[str, Any] | None = None, progress: Progress | None = None) -> dict[str, Any]:
        """One pass over the subset (or ``case_ids``) → a RunResult dict."""
        started = time.monotonic()
        if hasattr(self.judge, "fresh"):
            self.judge.fresh = fresh
        cases = list(self.golden.cases)
        if case_ids is not None:
            wanted = set(case_ids)
            cases = [c for c in cases if c.id in wanted]
        prev = {c["id"]: c for c in previous["cases"]} if previous else None
        results = self.answer_all(cases, fresh=fresh, previous=prev, progress=progress)
        eval_s = time.monotonic() - started
        return build_result(self, results, {"index_s": round(self.index_seconds, 3), "eval_s": round(eval_s, 3),
                                            "total_s": round(self.index_seconds + eval_s, 3)})


def _trace_of(case_dict: dict[str, Any] | None) -> Trace | None:
    if not case_dict:
        return None
    data = {k: case_dict.get(k) for k in ("id", "answer", "retrieved", "usage", "latency_ms", "error")}
    return trace_from_dict(data, f"previous result of case {case_dict['id']}")


def needs_model(cfg: Config) -> bool:
    return (cfg.generation.provider == "openai" or cfg.embedding.provider == "openai" or cfg.judge.model is not None)


def prepare(cfg: Config, *, subset: str | None = None, app_spec: str | None = None,
            client: Any = None, judge: CaseJudge | None = None, env: Any = None) -> Evaluation:
    """Load the golden set and corpus, check them against each other, build the model client
    (only when a stage needs one), the judge and the App."""
    golden = load_golden(cfg.golden)
    corpus = load_corpus(cfg.corpus, cfg.root)
    golden.check_sections(corpus.ids())
    chosen = golden.subset(subset)
    if client is None and needs_model(cfg):
        from rageval.pipeline.llm import LLMClient
        client = LLMClient(cfg.llm, env=env if env is not None else os.environ)
    if judge is None and cfg.judge.model:
        from rageval.pipeline.judging import ModelJudge
        judge = ModelJudge(client, cfg.judge)
    app = make_app(cfg, corpus, app_spec, client)
    return Evaluation(cfg, chosen, subset, corpus, app, client, judge or CaseJudge(),
                      getattr(app, "index_seconds", 0.0))


def make_app(cfg: Config, corpus: Corpus, app_spec: str | None, client: Any) -> Any:
    kind, _, arg = (app_spec or "").partition(":")
    if app_spec and kind not in ("replay",):
        raise RagevalError(f"--app {app_spec!r}: only replay:FILE overrides the config's app on the command line.")
    if kind == "replay":
        from rageval.pipeline.apps.replay import ReplayApp
        return ReplayApp(Path(arg))
    a = cfg.app
    if a.type == "replay":
        from rageval.pipeline.apps.replay import ReplayApp
        return ReplayApp(a.path)  # type: ignore[arg-type]
    if a.type == "command":
        from rageval.pipeline.apps.command import CommandApp
        return CommandApp(a.command or (), cfg.root, a.timeout_s)
    if a.type == "http":
        from rageval.pipeline.apps.http import HttpApp
        return HttpApp(a.url or "", a.timeout_s, a.headers)
    from rageval.pipeline.apps.builtin import BuiltinApp
    return BuiltinApp(cfg, corpus, client)


# --- scoring ------------------------------------------------------------------------------

def score_case(case: Case, trace: Trace, corpus: Corpus, cfg: Config, judge: CaseJudge) -> dict[str, Any]:
    expected = set(case.expected_sections)
    # chunk sizes: as the app reported them, else counted with our tokenizer
    tokens = None if trace.retrieved is None else [
        r.tokens if r.tokens is not None else count_tokens(r.text) for r in trace.retrieved]
    out: dict[str, Any] = {
        "id": case.id, "question": case.question, "expected_answer": case.expected_answer,
        "expected_sections": list(case.expected_sections), "slice": dict(case.slice), "tags": list(case.tags),
        "out_of_scope": case.out_of_scope, "answer": trace.answer,
        "retrieved": None if trace.retrieved is None else [r.to_dict() for r in trace.retrieved],
        "context_tokens": None if tokens is None else sum(tokens[: len(trace.context)]), "first_relevant_rank": None, "metrics": {},
        "checks": {}, "passed": None, "failures": [], "error": trace.error,
        "usage": dict(trace.usage), "latency_ms": trace.latency_ms,
    }
    if trace.error:
        return out
    checks: dict[str, CheckResult] = {}
    if trace.retrieved is not None and tokens is not None and expected:
        ranking = [set(r.sections) for r in trace.retrieved]
        out["metrics"] = {k: round(v, 6) for k, v in case_metrics(cfg.metric_names(), ranking, tokens, expected).items()}
        rank = first_relevant_rank(ranking, expected)
        out["first_relevant_rank"] = rank
        k = max(cfg.retrieval.k)
        checks["retrieval"] = (CheckResult.ok(f"first relevant chunk at rank {rank}", k=k) if rank is not None and rank <= k
                               else CheckResult.fail(f"no chunk with {', '.join(sorted(expected))} in the top {k}", k=k))
    else:
        checks["retrieval"] = CheckResult.skipped("out of scope: no expected sections" if not expected
                                                  else "the app reported no retrieval")
    source = corpus.text_of(case.expected_sections)
    units = cfg.checks.units
    checks["numbers"] = check_numbers(trace.answer, case.expected_answer, source, units)
    checks["must_include"] = check_must_include(trace.answer, case.must_include)
    checks["must_not_include"] = check_must_not_include(trace.answer, case.must_not_include)
    checks["refusal"] = check_refusal(trace.answer, case.out_of_scope, cfg.checks.refusal_markers)
    if trace.answer is None:
        checks["judge"] = CheckResult.skipped("no answer: retrieval-only case")
    else:
        checks.update(judge.check(case, trace, source))
    out["checks"] = {name: c.to_dict() for name, c in checks.items()}
    errors = [f"{name}: {c.reason}" for name, c in checks.items() if c.status == ERROR]
    if errors:
        out["error"] = "; ".join(errors)
        return out
    out["failures"] = [f"{name}: {c.reason}" for name, c in checks.items() if c.status == FAIL]
    out["passed"] = not out["failures"]
    return out


# --- aggregation --------------------------------------------------------------------------

def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 6) if values else None


def summarize_cases(cases: Sequence[dict[str, Any]], metric_names: Sequence[str]) -> dict[str, Any]:
    """Summary metrics over case dicts: retrieval means, generation rates, n's. Empty → None."""
    metrics: dict[str, float | None] = {}
    for name in metric_names:
        metrics[name] = _mean([c["metrics"][name] for c in cases if name in c.get("metrics", {})])
    ctx = [c["context_tokens"] for c in cases if c.get("context_tokens") is not None and not c.get("error")]
    metrics["context_tokens"] = _mean([float(v) for v in ctx])
    metrics["pass_rate"] = _mean([1.0 if c.get("passed") else 0.0 for c in cases])
    for check, rate in RATE_OF_CHECK.items():
        vals = [_check_value(c, check) for c in cases]
        metrics[rate] = _mean([v for v in vals if v is not None])
    rule_vals = []
    for c in cases:
        statuses = [c.get("checks", {}).get(r, {}).get("status") for r in RULE_CHECKS]
        if not c.get("error") and any(s in (PASS, FAIL) for s in statuses):
            rule_vals.append(0.0 if FAIL in statuses else 1.0)
    metrics["rules_pass"] = _mean(rule_vals)
    for name in ("faithfulness", "groundedness"):
        vals = [c["checks"]["faithfulness"].get(name) for c in cases
                if isinstance(c.get("checks", {}).get("faithfulness"), dict)]
        metrics[name] = _mean([float(v) for v in vals if isinstance(v, (int, float))])
    return {
        "n_cases": len(cases),
        "n_passed": sum(1 for c in cases if c.get("passed") is True),
        "n_failed": sum(1 for c in cases if c.get("passed") is False),
        "n_errors": sum(1 for c in cases if c.get("error")),
        "metrics": metrics,
    }


def _check_value(case: dict[str, Any], check: str) -> float | None:
    """1/0 for a pass/fail check; None if it did not apply or the case errored (the gate's
    `errors` policy decides about errored cases; pass_rate counts them as not passing)."""
    c = case.get("checks", {}).get(check)
    if case.get("error") or c is None or c.get("status") == SKIPPED:
        return None
    return 1.0 if c.get("status") == PASS else 0.0


def summarize(cases: Sequence[dict[str, Any]], metric_names: Sequence[str]) -> dict[str, Any]:
    summary = summarize_cases(cases, metric_names)
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        for label in slice_labels(c.get("slice") or {}):
            groups.setdefault(label, []).append(c)
    summary["by_slice"] = {label: summarize_cases(group, metric_names) for label, group in sorted(groups.items())}
    return summary


def build_result(ev: Evaluation, cases: list[dict[str, Any]], timings: dict[str, float]) -> dict[str, Any]:
    names = ev.cfg.metric_names()
    cost = cost_of(ev.client, len(cases))
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "rageval", "version": __version__},
        "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_sha": git_sha(ev.cfg.root),
        "golden": {**ev.golden.describe(ev.subset), "n_total": len(ev.golden.full.cases),
                   "cases": ev.snapshots[0]},
        "corpus": {"sections": ev.snapshots[1]},
        "golden_checks": ev.golden_checks,
        "app": {"name": getattr(ev.app, "name", type(ev.app).__name__), "deterministic": ev.deterministic},
        "config": ev.cfg.to_dict(),
        "config_fingerprint": ev.cfg.fingerprint(),
        "metric_names": names,
        "summary": summarize(cases, names),
        "cases": cases,
        "repeats": 1,
        "noise": None,
        "flaky": [],
        "cost": cost,
        "timings": timings,
    }


def cost_of(client: Any, n_cases: int) -> dict[str, Any]:
    usage = client.usage() if client is not None and hasattr(client, "usage") else {}
    calls = dict(usage.get("calls", {}))
    total = sum(calls.values())
    return {"calls": calls, "calls_total": total, "calls_per_case": round(total / n_cases, 3) if n_cases else 0.0,
            "prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
            "cache_hits": usage.get("cache_hits", 0), "usd": round(usage.get("usd", 0.0), 6)}


def git_sha(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


# --- files --------------------------------------------------------------------------------

def write_json(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write JSON atomically (see write_text)."""
    write_text(path, json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write atomically: a temp file in the same folder, then rename, so a failed run never
    leaves half a file where a results file or report used to be."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a RunResult JSON, refusing what is not one (BaselineError names the file)."""
    path = Path(path)
    if not path.is_file():
        raise BaselineError(f"{path}: results file not found.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: not a RunResult: invalid JSON ({exc}).") from None
    return check_result(data, str(path))


def check_result(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or "schema_version" not in data:
        raise BaselineError(f"{where}: not a RunResult (no schema_version). Produce it with `rageval run --out`.")
    if data["schema_version"] != SCHEMA_VERSION:
        raise BaselineError(f"{where}: RunResult schema_version {data['schema_version']!r} is not supported "
                            f"(this rageval reads {SCHEMA_VERSION}). Re-create the baseline with this version.")
    for key in ("golden", "summary", "cases", "metric_names", "config"):
        if key not in data:
            raise BaselineError(f"{where}: RunResult is missing '{key}'. The file is truncated or not ours.")
    if not isinstance(data["cases"], list) or not all(isinstance(c, dict) and "id" in c for c in data["cases"]):
        raise BaselineError(f"{where}: RunResult 'cases' must be a list of case objects with ids.")
    return data


# --- repeats (baseline mode) ----------------------------------------------------------------

def run_repeats(ev: Evaluation, repeats: int, progress: Progress | None = None) -> dict[str, Any]:
    """Run the eval ``repeats`` times to measure noise. Deterministic stages run once: later runs
    reuse the first run's retrieval and call only the model stages, with the cache bypassed. When
    nothing in the pipeline calls a model, the runs would be identical, so one run is made and
    its noise is recorded as zero. The result's summary metrics are the mean over the runs."""
    if repeats < 1:
        raise RagevalError(f"--repeats must be at least 1, got {repeats}.")
    first = ev.run(progress=progress)
    runs = [first]
    if not ev.deterministic:
        for _ in range(repeats - 1):
            runs.append(ev.run(fresh=True, previous=first, progress=progress))
    from rageval.gate import stats
    summaries = [r["summary"]["metrics"] for r in runs]
    sigma = stats.sigma_over_runs(summaries) if len(runs) > 1 else {k: 0.0 for k in first["summary"]["metrics"]}
    slice_sigma = {}
    for label in first["summary"]["by_slice"]:
        per_run = [r["summary"]["by_slice"].get(label, {}).get("metrics", {}) for r in runs]
        slice_sigma[label] = stats.sigma_over_runs(per_run) if len(runs) > 1 else {k: 0.0 for k in per_run[0]}
    passes = [{c["id"]: c.get("passed") for c in r["cases"]} for r in runs]
    flaky = stats.flaky_cases(passes) if len(runs) > 1 else []
    result = dict(first)
    result["summary"] = dict(first["summary"])
    result["summary"]["metrics"] = {k: stats.mean_or_none([s.get(k) for s in summaries]) for k in summaries[0]}
    result["repeats"] = repeats
    result["noise"] = {"sigma": sigma, "by_slice": slice_sigma, "runs": summaries, "runs_executed": len(runs),
                       "deterministic": ev.deterministic}
    result["flaky"] = flaky
    result["cost"] = cost_of(ev.client, sum(len(r["cases"]) for r in runs))
    result["timings"] = {k: round(sum(r["timings"].get(k, 0.0) for r in runs), 3) for k in first["timings"]}
    return result


def narrow_baseline(baseline: dict[str, Any], case_ids: list[str]) -> dict[str, Any]:
    """The baseline restricted to ``case_ids`` (the candidate's subset), summary recomputed.

    A PR runs the ``pr`` subset while main's baseline covers the whole golden set; the gate counts
    a baseline case the candidate did not answer as pass→fail, so the cases outside the subset
    are dropped first. Cases of the subset that the candidate failed to answer still count.
    """
    wanted = set(case_ids)
    cases = baseline.get("cases") or []
    if all(c.get("id") in wanted for c in cases):
        return baseline
    kept = [c for c in cases if c.get("id") in wanted]
    narrowed = dict(baseline)
    narrowed["cases"] = kept
    narrowed["summary"] = summarize(kept, list(baseline.get("metric_names") or []))
    narrowed["golden"] = {**(baseline.get("golden") or {}), "narrowed_to": len(kept)}
    return narrowed

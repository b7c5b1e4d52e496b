"""The one way tests build RunResults: real records from rageval.results, summaries computed by
rageval.metrics.aggregate exactly as the runner computes them (so a test cannot hand the gate a
summary that disagrees with its cases)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rageval.cost import Cost
from rageval.metrics.aggregate import summarize
from rageval.records import CaseResult, CheckResult
from rageval.results import GoldenInfo, Noise, RunResult

RETRIEVAL = ("hit@1", "hit@3", "recall@3", "mrr@5")
GOLDEN_SHA = "9f86d081884c7d659a2feaa0c55ad015"


def retrieval_metrics(rank: int | None, recall: float = 1.0) -> dict[str, float]:
    return {"hit@1": float(rank == 1), "hit@3": float(rank is not None and rank <= 3), "recall@3": recall,
            "mrr@5": 1.0 / rank if rank is not None and rank <= 5 else 0.0}


def case(cid: str, rank: int | None = 1, *, passed: bool = True, numbers: tuple | None = None,
         answer: str | None = "ok", question: str = "?", expected: str = "", slice_: Mapping[str, Any] | None = None,
         tags: Sequence[str] = ("pr",), error: str | None = None, recall: float = 1.0,
         metrics: Mapping[str, float] | None = None, judge: str | None = None, context_tokens: int = 100,
         usage: Mapping[str, int] | None = None, latency_ms: float = 1.0, sections: Sequence[str] = ("DT-1",),
         checks: Mapping[str, CheckResult] | None = None) -> CaseResult:
    """One scored case. ``numbers`` = (missing, outside_source) makes the number rule fail;
    ``judge`` = "pass" / "fail" adds a judge check (a failing judge fails the case); ``passed=False``
    alone fails the case through a failing judge; ``error`` makes it an error."""
    all_checks: dict[str, CheckResult] = {"numbers": CheckResult.ok("")}
    if numbers is not None:
        missing, outside = numbers
        reason = "; ".join(p for p in (f"missing {', '.join(missing)}" if missing else "",
                                       f"outside source {', '.join(outside)}" if outside else "") if p)
        all_checks["numbers"] = CheckResult.fail(reason, missing=list(missing), outside_source=list(outside))
    if judge is None and not passed and numbers is None:
        judge = "fail"
    if judge is not None:
        all_checks["judge"] = (CheckResult.ok("judge: correct") if judge == "pass"
                               else CheckResult.fail("wrong claim"))
    all_checks.update(checks or {})
    failures = tuple(f"{n}: {c.reason}" for n, c in all_checks.items() if c.status == "fail")
    return CaseResult(
        id=cid, question=question, expected_answer=expected, expected_sections=tuple(sections),
        slice=dict(slice_ or {"type": "lookup"}), tags=tuple(tags), out_of_scope=False, answer=answer,
        retrieved=(), context_tokens=context_tokens, first_relevant_rank=rank,
        metrics=dict(metrics) if metrics is not None else retrieval_metrics(rank, recall),
        checks={} if error else all_checks, passed=None if error else not failures,
        failures=() if error else failures, error=error, usage=dict(usage or {}), latency_ms=latency_ms)


def run(cases: Sequence[CaseResult], *, version: int | str = 3, config: Mapping[str, Any] | None = None,
        sigma: Mapping[str, float] | None = None, metric_names: Sequence[str] = RETRIEVAL, sha: str | None = None,
        cost: Cost | None = None, timings: Mapping[str, float] | None = None,
        golden_cases: Mapping[str, Any] | None = None, corpus: Mapping[str, Any] | None = None,
        changelog: str = "", subset: str | None = None, name: str = "banhang-returns",
        golden_checks: Mapping[str, Any] | None = None) -> RunResult:
    """A RunResult of ``cases``; its summary is computed from them."""
    return RunResult(
        golden=GoldenInfo(name=name, version=version, sha256=GOLDEN_SHA, content_sha256=None, path="golden.yaml",
                          subset=subset, n_total=len(cases), changelog=changelog, cases=golden_cases),
        config=dict(config or {"chunking": {"size": 200}}), metric_names=tuple(metric_names),
        summary=summarize(cases, metric_names), cases=tuple(cases), tool={"name": "rageval", "version": "0.1.0"},
        created_at="2026-11-29T21:00:00Z", git_sha=sha, corpus=corpus, golden_checks=golden_checks,
        app={"name": "test", "deterministic": False}, config_fingerprint="f" * 64,
        noise=Noise(sigma=dict(sigma)) if sigma is not None else None, cost=cost or Cost(),
        timings=dict(timings or {}))


def rate_cases(rate: float, n: int = 200, *, prefix: str = "q", metric: str | None = "mrr@5") -> list[CaseResult]:
    """``n`` cases of which round(rate·n) pass (the first ones), each with ``metric`` = rate, so both
    ``pass_rate`` and ``metric`` average to ``rate``."""
    n_pass = round(rate * n)
    metrics = None if metric is None else {**retrieval_metrics(1), metric: rate}
    return [case(f"{prefix}{i}", passed=i < n_pass, metrics=metrics) for i in range(n)]


def as_dict(result: RunResult) -> dict[str, Any]:
    """A RunResult as plain JSON with every case field inline (the file packs texts and golden
    fields; rageval.packing), for tests that read a run as a dict."""
    return {**result.to_dict(), "cases": [c.to_dict() for c in result.cases]}

"""A run audits the golden set (the leak check over the whole corpus) before it answers a case: the
audit's working memory comes and goes before the cases' results are held, so the two never add up
at the run's peak (issue 25 §3: 20,000 cases over 10,000 chunks peaked at 425 MB with the audit
last, 370 MB with it first). The RunResult records the same audit either way."""

from __future__ import annotations

from rageval.config import load_config
from rageval.golden import lifecycle
from rageval.pipeline import runner, workers
from rageval.pipeline.runner import prepare


def test_the_golden_set_is_audited_before_any_case_is_answered(tmp_path, copy_demo, monkeypatch):
    project = copy_demo(tmp_path / "demo")
    events: list[str] = []
    audit, score = lifecycle.audit_golden, runner.score_case

    def audited(*args, **kwargs):
        events.append("audit")
        return audit(*args, **kwargs)

    def scored(*args, **kwargs):
        events.append("case")
        return score(*args, **kwargs)
    monkeypatch.setattr(lifecycle, "audit_golden", audited)
    monkeypatch.setattr(runner, "score_case", scored)
    ev = prepare(load_config(project / "rageval.yml"), env={"RAGEVAL_PROCESSES": "1"})
    result = ev.run()
    assert events[0] == "audit" and events.count("audit") == 1
    assert events.count("case") == result.summary.n_cases > 0
    assert result.golden_checks["coverage"] == ev.golden_audit["coverage"]
    ev.run()                                       # a second pass (a re-run) does not audit again
    assert events.count("audit") == 1


def test_worker_processes_inherit_the_snapshots_read_before_they_start(tmp_path, copy_demo, monkeypatch):
    """With worker processes, the golden set's and corpus's quantities (the snapshots) are read in
    this process before the workers fork: the workers find every expected answer and section read,
    instead of each reading its cases' and this process reading them all again afterwards."""
    project = copy_demo(tmp_path / "demo")
    monkeypatch.setattr(runner, "BLOCK", 8)                 # the demo's cases in several blocks
    started = workers.in_processes
    seen: list[bool] = []

    def watched(job, count, processes):
        seen.append("snapshots" in ev.__dict__)
        return started(job, count, processes)
    monkeypatch.setattr(workers, "in_processes", watched)
    ev = prepare(load_config(project / "rageval.yml"), env={"RAGEVAL_PROCESSES": "2"})
    one = prepare(load_config(project / "rageval.yml"), env={"RAGEVAL_PROCESSES": "1"}).run()
    two = ev.run()
    assert seen == [True]
    assert two.golden.cases == one.golden.cases and two.corpus == one.corpus
    assert [c.to_dict() for c in two.cases] == [
        {**c.to_dict(), "latency_ms": d.latency_ms} for c, d in zip(one.cases, two.cases, strict=True)]

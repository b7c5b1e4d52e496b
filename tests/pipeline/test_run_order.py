"""A run audits the golden set (the leak check over the whole corpus) before it answers a case: the
audit's working memory comes and goes before the cases' results are held, so the two never add up
at the run's peak (issue 25 §3: 20,000 cases over 10,000 chunks peaked at 425 MB with the audit
last, 370 MB with it first). The RunResult records the same audit either way."""

from __future__ import annotations

from rageval.config import load_config
from rageval.golden import lifecycle
from rageval.pipeline import runner
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

"""Which judge judged (issue 21 §4): the identity two runs' judge metrics are compared under is the
model the endpoint served, with the prompt version and temperature; after a judge change (or a
first judge) the judge metrics are shown, not compared, and their floors are shown, not gated, until
main's baseline uses the same judge. A judge endpoint that serves the generator's model is refused."""

from __future__ import annotations

import random

import pytest
from builders import case, run
from openai_server import OpenAIServer

from rageval.errors import ConfigError
from rageval.gate.compare import judge_identity
from rageval.gate.decide import verdict_on
from rageval.golden.set import Case
from rageval.metrics.judge import JUDGE_PARAMETERS
from rageval.pipeline.apps import Trace
from rageval.pipeline.judging import ModelJudge
from rageval.pipeline.llm import LLMClient
from rageval.records import CheckResult
from rageval.settings import GateConfig, JudgeConfig, LLMConfig

GATE = GateConfig(floors={"judge_pass": 0.9}, max_drop={"judge_pass": 0.05})


def judged(served: str, passes: int, n: int = 10, configured: str = "gpt-4o", **params):
    cases = [case(f"q{i:02d}", checks={"judge": (CheckResult.ok if i < passes else CheckResult.fail)(
        "judge", model=served)}) for i in range(n)]
    return run(cases, config={"judge": {"model": configured, **JUDGE_PARAMETERS, **params}})


def reasons(verdict, rule=None):
    return [r for r in verdict.reasons if rule is None or r.rule == rule]


def test_the_identity_is_the_model_the_endpoint_served():
    assert judge_identity(judged("gpt-4o-2024-05-13", 9))["model"] == ("gpt-4o-2024-05-13",)
    assert judge_identity(judged("gpt-4o-2024-05-13", 9)) != judge_identity(judged("gpt-4o-2024-08-06", 9))
    # configured as the alias on one side and the snapshot on the other, served the same: one judge
    assert judge_identity(judged("gpt-4o-2024-08-06", 9, configured="gpt-4o")) == judge_identity(
        judged("gpt-4o-2024-08-06", 9, configured="openai/gpt-4o-2024-08-06"))
    assert judge_identity(judged("gpt-4o", 9)) != judge_identity(judged("gpt-4o", 9, temperature=0.5))
    assert judge_identity(judged("gpt-4o", 9)) != judge_identity(judged("gpt-4o", 9, prompt_version="2"))
    # nothing judged (every case failed a rule first): the configured name, as written
    unjudged = run([case("q01")], config={"judge": {"model": "GPT-4o-2024-05-13", **JUDGE_PARAMETERS}})
    assert judge_identity(unjudged)["model"] == ("gpt-4o-2024-05-13",)
    assert judge_identity(run([case("q01")], config={"judge": {"model": None}})) is None


def test_two_dated_snapshots_are_two_judges_and_the_new_judges_floor_does_not_block():
    before, after = judged("gpt-4o-2024-05-13", 10), judged("gpt-4o-2024-08-06", 7)     # judge_pass 1.0 -> 0.7
    verdict = verdict_on(before, after, GATE)
    (changed,) = reasons(verdict, "judge_changed")
    assert "gpt-4o-2024-05-13" in changed.message and "gpt-4o-2024-08-06" in changed.message
    assert "floors are shown, not gated, until main's baseline uses this judge" in changed.message
    (floor,) = reasons(verdict, "floor")
    assert floor.blocking is False and floor.message.startswith("judge_pass 0.70 < 0.90 — shown, not gated")
    assert not reasons(verdict, "max_drop") and verdict.verdict == "pass"


def test_under_the_same_served_judge_the_floor_and_the_drop_gate():
    verdict = verdict_on(judged("gpt-4o-2024-08-06", 10), judged("gpt-4o-2024-08-06", 7), GATE)
    assert not reasons(verdict, "judge_changed") and verdict.verdict == "fail"
    assert {r.rule for r in verdict.reasons if r.blocking} == {"floor", "max_drop"}


def test_a_first_judge_is_shown_not_gated_until_main_has_it():
    before = run([case(f"q{i:02d}") for i in range(10)], config={"judge": {"model": None}})
    verdict = verdict_on(before, judged("gpt-4o-2024-08-06", 7), GATE)
    (changed,) = reasons(verdict, "judge_changed")
    assert changed.message.startswith("judge_pass shown but not compared: main's baseline has no judge")
    assert verdict.verdict == "pass" and not any(r.blocking for r in verdict.reasons)


def test_without_a_baseline_the_judge_floor_still_gates():
    verdict = verdict_on(None, judged("gpt-4o", 7), GateConfig(floors={"judge_pass": 0.9}))
    assert verdict.verdict == "fail" and any(r.rule == "floor" and r.blocking for r in verdict.reasons)


def test_a_judge_endpoint_serving_the_generators_model_is_refused(tmp_path):
    gc = Case(id="q01", question="Q?", expected_answer="7 ngày", expected_sections=["DT-1"])
    with OpenAIServer(responder=lambda body: '{"verdict": "pass"}', served={"judge-alias": "gpt-4o-mini-2024-07-18"}) \
            as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url), env={}, cache_dir=tmp_path, sleep=lambda s: None,
                           rng=random.Random(1))
        judge = ModelJudge(client, JudgeConfig(model="judge-alias"), generator="openai/gpt-4o-mini")
        with pytest.raises(ConfigError, match=r"judge.model 'judge-alias': the endpoint served "
                                              r"'gpt-4o-mini-2024-07-18', which is the generator's model "
                                              r"\(generation.model 'openai/gpt-4o-mini'\)"):
            judge.check(gc, Trace("q01", "7 ngày"), "DT-1: 7 ngày")
        allowed = ModelJudge(client, JudgeConfig(model="judge-alias", allow_same_model=True), generator="gpt-4o-mini")
        assert allowed.check(gc, Trace("q01", "7 ngày"), "DT-1: 7 ngày")["judge"].status == "pass"
        other = ModelJudge(client, JudgeConfig(model="judge-alias"), generator="gpt-4.1")
        assert other.check(gc, Trace("q01", "7 ngày"), "DT-1: 7 ngày")["judge"].status == "pass"

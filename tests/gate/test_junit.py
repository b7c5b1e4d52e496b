"""`rageval gate --junit`: the JUnit XML that GitLab, Jenkins and the test-report actions read.

Every report a test writes is validated against the JUnit schema of Jenkins' xUnit plugin
(tests/data/junit/junit-10.xsd, vendored) with xmlschema, and its structure read back with the
standard library's parser."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import builders
import pytest
import xmlschema

from rageval.gate.decide import verdict_on
from rageval.gate.junit import render_junit
from rageval.gate.verdict import MetricRow, Threshold
from rageval.settings import GateConfig

SCHEMA = xmlschema.XMLSchema(Path(__file__).parents[1] / "data" / "junit" / "junit-10.xsd")
SEED_GATE = GateConfig(floors={"hit@3": 0.95, "mrr@5": 0.85}, zero_tolerance=("numbers",))
Q01_800 = "Bạn có 30 ngày để đổi trả áo, miễn là hàng còn tem và nhãn."


def parsed(xml: str) -> ET.Element:
    """The report, valid against the schema, parsed."""
    SCHEMA.validate(xml)
    return ET.fromstring(xml)


def suite(root: ET.Element, name: str) -> ET.Element:
    (found,) = [s for s in root.findall("testsuite") if s.get("name") == name]
    return found


def cases_of(root: ET.Element, suite_name: str) -> dict[str, ET.Element]:
    return {t.get("name"): t for t in suite(root, suite_name).findall("testcase")}


def outcome(testcase: ET.Element) -> str:
    kinds = [child.tag for child in testcase if child.tag in ("failure", "error", "skipped")]
    assert len(kinds) <= 1
    return kinds[0] if kinds else "pass"


def seed_runs() -> tuple:
    """The seed incident on five cases: q01 and q03 fall from rank 1 to 3 and fail the number rule
    at 800 tokens; mrr@5 falls 0.90 → 0.63 under its 0.85 floor."""
    ranks_200, ranks_800 = (1, 1, 1, 2, 1), (3, 1, 3, 2, 1)
    numbers = {"q01": (["7 ngày"], ["30 ngày"]), "q03": (["5 ngày làm việc"], ["5 ngày"])}
    ids = ("q01", "q02", "q03", "q04", "q05")
    before = builders.run([builders.case(i, r, question=f"question {i}", expected=f"expected {i}")
                           for i, r in zip(ids, ranks_200)])
    after = builders.run([builders.case(i, r, question=f"question {i}", expected=f"expected {i}",
                                        answer=Q01_800 if i == "q01" else "ok", numbers=numbers.get(i),
                                        latency_ms=812.0)
                          for i, r in zip(ids, ranks_800)])
    return before, after


def test_one_testcase_per_golden_case_and_per_gated_metric_and_the_verdict():
    before, after = seed_runs()
    verdict = verdict_on(before, after, SEED_GATE)
    root = parsed(render_junit(verdict, after, before, title="RAG eval gate"))
    assert [s.get("name") for s in root.findall("testsuite")] == ["golden cases", "gated metrics", "gate"]
    cases = cases_of(root, "golden cases")
    assert list(cases) == ["q01", "q02", "q03", "q04", "q05"]
    assert {n: outcome(t) for n, t in cases.items()} == {"q01": "failure", "q02": "pass", "q03": "failure",
                                                          "q04": "pass", "q05": "pass"}
    assert cases["q01"].get("classname") == "banhang-returns" and cases["q01"].get("time") == "0.812"
    failure = cases["q01"].find("failure")
    assert failure.get("type") == "numbers"
    assert failure.get("message") == "numbers: missing 7 ngày; outside source 30 ngày"
    assert "passed on the baseline (pass → fail)" in failure.text
    assert "first relevant rank: 1 → 3" in failure.text
    assert f"answer: {Q01_800}" in failure.text and "question: question q01" in failure.text
    assert "5 ngày làm việc" in cases["q03"].find("failure").get("message")
    metrics = cases_of(root, "gated metrics")
    assert list(metrics) == ["hit@3", "mrr@5"]                # gated ones only, not hit@1 or recall@3
    assert outcome(metrics["hit@3"]) == "pass" and outcome(metrics["mrr@5"]) == "failure"
    assert metrics["mrr@5"].find("failure").get("message") == "mrr@5 0.63 < 0.85"
    assert metrics["mrr@5"].find("failure").get("type") == "floor"
    assert "0.90 → 0.63 (Δ −0.27); floor 0.85" in metrics["mrr@5"].find("failure").text
    (gate,) = suite(root, "gate").findall("testcase")
    assert gate.get("name") == "verdict" and outcome(gate) == "failure"
    assert gate.find("failure").get("type") == "floor,zero_tolerance"


def test_counts_add_up_at_every_level():
    before, after = seed_runs()
    root = parsed(render_junit(verdict_on(before, after, SEED_GATE), after, before))
    for element in root.findall("testsuite"):
        kids = element.findall("testcase")
        assert int(element.get("tests")) == len(kids)
        for kind, attr in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            assert int(element.get(attr)) == sum(1 for t in kids if outcome(t) == kind), (element.get("name"), kind)
    for attr in ("tests", "failures", "errors"):
        assert int(root.get(attr)) == sum(int(s.get(attr)) for s in root.findall("testsuite"))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("8", "4", "0")


def test_a_passing_gate_is_all_green():
    before, _ = seed_runs()
    root = parsed(render_junit(verdict_on(before, before, SEED_GATE), before, before))
    assert root.get("failures") == "0" and root.get("errors") == "0"
    (gate,) = suite(root, "gate").findall("testcase")
    assert gate.find("system-out").text.startswith("rag-eval-gate: passed")


def test_a_gate_blocked_by_a_rule_that_is_no_case_or_metric_still_fails_a_testcase():
    """No baseline under gate.missing_baseline: fail — every case and metric passes, the verdict's
    testcase fails, so the report is never all green for a blocked change."""
    before, _ = seed_runs()
    verdict = verdict_on(None, before, GateConfig(missing_baseline="fail"))
    assert verdict.blocked
    root = parsed(render_junit(verdict, before))
    assert all(outcome(t) == "pass" for t in cases_of(root, "golden cases").values())
    (gate,) = suite(root, "gate").findall("testcase")
    assert outcome(gate) == "failure" and gate.find("failure").get("type") == "missing_baseline"
    assert root.get("failures") == "1"


def test_known_failures_are_skipped_not_failed():
    """q03 fails the number rule on the baseline too: a known failure, skipped under the default
    gate.known_failures: report; a failure under block (it blocks)."""
    before, after = seed_runs()
    before = builders.run([c if c.id != "q03" else builders.case("q03", 3, question=c.question,
                                                                 expected=c.expected_answer,
                                                                 numbers=(["5 ngày làm việc"], ["5 ngày"]))
                           for c in before.cases])
    verdict = verdict_on(before, after, SEED_GATE)
    assert verdict.known_failures == ("q03",)
    root = parsed(render_junit(verdict, after, before))
    cases = cases_of(root, "golden cases")
    assert outcome(cases["q03"]) == "skipped" and outcome(cases["q01"]) == "failure"
    assert cases["q03"].find("skipped").get("message").startswith("known failure (fails on the baseline too")
    assert suite(root, "golden cases").get("skipped") == "1"
    blocking = verdict_on(before, after, replace(SEED_GATE, known_failures="block"))
    assert outcome(cases_of(parsed(render_junit(blocking, after, before)), "golden cases")["q03"]) == "failure"


def test_holdout_cases_are_counted_never_named_or_quoted():
    before, after = seed_runs()
    secret_q, secret_a = "secret holdout question", "secret holdout answer 99 ngày"
    hold = builders.case("h-7", numbers=(["7 ngày"], ["99 ngày"]), tags=("holdout",), question=secret_q,
                         answer=secret_a)
    after = builders.run([*after.cases, hold, builders.case("h-8", tags=("holdout",))])
    before = builders.run([*before.cases, builders.case("h-7", tags=("holdout",)), builders.case("h-8", tags=("holdout",))])
    xml = render_junit(verdict_on(before, after, SEED_GATE), after, before)
    root = parsed(xml)
    assert "h-7" not in xml and "h-8" not in xml and secret_q not in xml and "99 ngày" not in xml
    holdout = cases_of(root, "golden cases")["holdout cases"]
    assert holdout.find("failure").get("message") == "1 of 2 holdout cases did not pass (details hidden)"


def test_an_errored_case_is_an_error():
    before, after = seed_runs()
    after = builders.run([*after.cases[:4], builders.case("q05", error="HTTP 500 from the app")])
    root = parsed(render_junit(verdict_on(before, after, SEED_GATE), after, before))
    error = cases_of(root, "golden cases")["q05"].find("error")
    assert error.get("message") == "error: HTTP 500 from the app" and "error: HTTP 500 from the app" in error.text
    assert suite(root, "golden cases").get("errors") == "1"


@pytest.mark.parametrize("status, expected", [("n/a", "skipped"), ("insufficient_data", "skipped"),
                                              ("warn", "pass"), ("fail", "failure"), ("pass", "pass")])
def test_a_gated_metric_row_by_status(status, expected):
    before, after = seed_runs()
    verdict = verdict_on(before, after, SEED_GATE)
    row = MetricRow("judge_pass", None, None if status == "n/a" else 0.8, None, Threshold(floor=0.9), status)
    root = parsed(render_junit(verdict.replace(metrics=(row,)), after, before))
    assert outcome(cases_of(root, "gated metrics")["judge_pass"]) == expected


def test_hostile_text_stays_well_formed_xml_and_visible():
    """An answer with NUL, an escape sequence, a lone surrogate, U+FFFF, a bidi override and text
    that closes the element: the report still parses and validates, and shows all of it."""
    before, after = seed_runs()
    hostile = "30 ngày\x00\x1b[31m\ud800\uffff\u202e]]></failure><failure>&amp;<!--"
    after = builders.run([builders.case("q01", 3, numbers=(["7 ngày"], ["30 ngày"]), answer=hostile,
                                        question="q</testcase>\n<x>"), *after.cases[1:]])
    xml = render_junit(verdict_on(before, after, SEED_GATE), after, before)
    text = cases_of(parsed(xml), "golden cases")["q01"].find("failure").text
    assert "answer: 30 ngày\\x00\\x1b[31mU+D800U+FFFFU+202E]]></failure><failure>&amp;<!--" in text
    assert "question: q</testcase>\n<x>" in text


def test_a_long_answer_is_cut_and_so_is_a_reason_quoting_it():
    before, after = seed_runs()
    after = builders.run([builders.case("q01", 3, numbers=(["7 ngày"], ["y" * 100_000]), answer="x" * 200_000),
                          *after.cases[1:]])
    xml = render_junit(verdict_on(before, after, SEED_GATE), after, before)
    assert len(xml) < 20_000 and "more characters)" in xml


# --- the command -------------------------------------------------------------------------------

def test_rageval_gate_writes_the_junit_file(seed_project, run_cli, tmp_path):
    base, junit, verdict_path = tmp_path / "baseline.json", tmp_path / "out" / "junit.xml", tmp_path / "v.json"
    assert run_cli("baseline", "--config", seed_project["chunk-200"], "--out", base)[0] == 0
    junit.parent.mkdir()
    code, _, stderr = run_cli("gate", "--config", seed_project["chunk-800"], "--baseline", base,
                              "--junit", junit, "--out", verdict_path)
    assert code == 1, stderr
    root = parsed(junit.read_text(encoding="utf-8"))
    verdict = json.loads(verdict_path.read_text(encoding="utf-8"))
    cases = cases_of(root, "golden cases")
    assert sorted(n for n, t in cases.items() if outcome(t) == "failure") == sorted(verdict["pass_to_fail"])
    assert len(cases) == 5
    gated = [r["metric"] for r in verdict["metrics"] if r["threshold"] is not None]
    assert list(cases_of(root, "gated metrics")) == gated
    assert root.get("name") == "RAG eval gate"


def test_a_junit_path_that_is_a_folder_is_exit_2_naming_it(seed_project, run_cli, tmp_path):
    folder = tmp_path / "junit.xml"
    folder.mkdir()
    code, _, stderr = run_cli("gate", "--config", seed_project["chunk-200"], "--junit", folder)
    assert code == 2 and "junit.xml" in stderr and "Traceback" not in stderr

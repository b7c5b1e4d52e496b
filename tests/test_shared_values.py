"""A run holds each distinct metric table, check result, slice and usage of its cases once
(rageval.records.Shared; issue 25 §3: 20,000 cases over 10,000 chunks peaked at 354 MB holding a
copy per case, 314 MB sharing them), and sharing changes nothing a user can see: equal as JSON is
the only way two values are taken for one."""

from __future__ import annotations

from rageval.config import load_config
from rageval.files import to_json
from rageval.pipeline.runner import prepare
from rageval.records import CheckResult, Shared


def test_only_values_that_write_the_same_json_are_shared():
    shared = Shared()
    first = {"hit@1": 1.0, "mrr@5": 0.5}
    assert shared.mapping(dict(first)) is shared.mapping(dict(first))
    # equal in Python, not in JSON: 1 / 1.0 / True and 0.0 / -0.0 stay apart
    ints, floats, bools = shared.mapping({"x": 1}), shared.mapping({"x": 1.0}), shared.mapping({"x": True})
    assert (ints["x"], floats["x"], bools["x"]) == (1, 1.0, True)
    assert [type(v["x"]) for v in (ints, floats, bools)] == [int, float, bool]
    assert str(shared.mapping({"x": -0.0})["x"]) == "-0.0" and str(shared.mapping({"x": 0.0})["x"]) == "0.0"
    # key order is part of the JSON too
    assert list(shared.mapping({"b": 1, "a": 2})) == ["b", "a"]
    assert list(shared.mapping({"a": 2, "b": 1})) == ["a", "b"]


def test_check_results_are_shared_when_status_score_reason_and_details_agree():
    shared = Shared()
    a = shared.check(CheckResult.ok("first relevant chunk at rank 1", k=5))
    assert shared.check(CheckResult.ok("first relevant chunk at rank 1", k=5)) is a
    assert shared.check(CheckResult.ok("first relevant chunk at rank 1", k=5.0)).details["k"] == 5.0
    assert shared.check(CheckResult.ok("first relevant chunk at rank 1", k=3)).details["k"] == 3
    assert shared.check(CheckResult.fail("first relevant chunk at rank 1", k=5)).status == "fail"
    missing = shared.check(CheckResult.fail("missing 7 ngày", missing=["7 ngày"]))
    assert shared.check(CheckResult.fail("missing 7 ngày", missing=["7 ngày"])) is missing
    assert shared.check(CheckResult.fail("missing 7 ngày", missing=("7 ngày",))) is not missing


def test_the_store_is_bounded():
    shared = Shared(limit=10)
    for i in range(1000):
        shared.mapping({"i": i})
    assert len(shared._known) <= 10


def test_a_run_holds_a_few_metric_tables_and_writes_what_it_wrote_before(tmp_path, copy_demo):
    project = copy_demo(tmp_path / "demo")
    result = prepare(load_config(project / "rageval.yml"), env={"RAGEVAL_PROCESSES": "1"}).run()
    cases = result.cases
    assert len({id(c.metrics) for c in cases}) == len({to_json(c.metrics) for c in cases}) < len(cases)
    assert len({id(c.checks["numbers"]) for c in cases}) == len({to_json(c.checks["numbers"].to_dict()) for c in cases})
    # each case's record is its own values: the JSON of a shared table is the case's own
    for c in cases:
        assert c.metrics == {k: v for k, v in c.to_dict()["metrics"].items()}

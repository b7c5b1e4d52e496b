"""rageval/cost.py: the Cost record of a RunResult — per stage, per case, the re-runs apart — and
the Usage counts it is made from. Old RunResults (no stages, no re-run) read and write back as they were."""

import json

import pytest
from conftest import ROOT

from rageval.cost import Cost, StageCost, Usage
from rageval.errors import ResultError
from rageval.files import Reader

GEN = StageCost(calls=2, cache_hits=1, prompt_tokens=300, completion_tokens=40, usd=0.00006)
JUDGE = StageCost(calls=1, cache_hits=0, prompt_tokens=500, completion_tokens=30, usd=0.00155)


def read(data):
    return Cost.from_dict(data, "cost", Reader("r.json"))


def test_a_cost_of_rageval_0_1_0_reads_and_writes_back_byte_for_byte():
    data = json.loads((ROOT / "tests" / "data" / "release-0.1.0" / "runresult.json").read_text(encoding="utf-8"))["cost"]
    assert set(data) == {"calls", "calls_total", "calls_per_case", "prompt_tokens", "completion_tokens",
                         "cache_hits", "usd"}
    assert json.dumps(read(data).to_dict()) == json.dumps(data)


def test_cost_of_a_usage_sums_its_stages_and_keeps_stages_and_cases():
    usage = Usage({"judge": JUDGE, "generation": GEN}, {"q02": {"judge": JUDGE}, "q01": {"generation": GEN}})
    cost = Cost.of(usage, n_cases=2)
    assert (cost.calls, cost.calls_total, cost.calls_per_case) == ({"generation": 2, "judge": 1}, 3, 1.5)
    assert (cost.prompt_tokens, cost.completion_tokens, cost.cache_hits) == (800, 70, 1)
    assert cost.usd == pytest.approx(0.00161)
    assert list(cost.stages) == ["generation", "judge"] and list(cost.by_case) == ["q01", "q02"]
    again = read(json.loads(json.dumps(cost.with_rerun(Cost.of(usage, 1)).to_dict())))
    assert again == cost.with_rerun(Cost.of(usage, 1))
    assert again.to_dict()["rerun"]["calls_per_case"] == 3.0


def test_a_stage_with_only_cache_hits_is_no_call():
    cost = Cost.of(Usage({"judge": StageCost(cache_hits=5)}), n_cases=5)
    assert cost.calls == {} and cost.calls_total == 0 and cost.cache_hits == 5


def test_usage_since_is_what_happened_after_a_snapshot():
    before = Usage({"generation": GEN}, {"q01": {"generation": GEN}})
    after = Usage({"generation": GEN.plus(GEN), "judge": JUDGE},
                  {"q01": {"generation": GEN, "judge": JUDGE}, "q02": {"generation": GEN}})
    since = after.since(before)
    assert since.stages == {"generation": GEN, "judge": JUDGE}
    assert since.by_case == {"q01": {"judge": JUDGE}, "q02": {"generation": GEN}}


def test_the_total_of_several_runs():
    one = Cost.of(Usage({"generation": GEN}, {"q01": {"generation": GEN}}), 1)
    two = Cost.of(Usage({"generation": GEN, "judge": JUDGE}, {"q01": {"generation": GEN, "judge": JUDGE}}), 1)
    total = Cost.total([one, two], n_cases=2)
    assert total.calls == {"generation": 4, "judge": 1} and total.calls_per_case == 2.5
    assert total.by_case == {"q01": {"generation": GEN.plus(GEN), "judge": JUDGE}}


@pytest.mark.parametrize("data, message", [
    ({"stages": {"judge": {"calls": -1}}}, r"cost\.stages\.judge\.calls: expected an integer ≥ 0"),
    ({"stages": {"judge": {"calls": 1, "tokens": 3}}}, r"cost\.stages\.judge\.tokens: unknown key"),
    ({"by_case": {"q01": {"judge": {"usd": "free"}}}}, r"cost\.by_case\.q01\.judge\.usd: expected a finite number"),
    ({"rerun": {"calls_total": 1.5}}, r"cost\.rerun\.calls_total: expected an integer"),
    ({"rerun": {"rerun": {}}}, r"cost\.rerun\.rerun: unknown key"),
    ({"by_case": []}, r"cost\.by_case: expected an object"),
])
def test_a_bad_cost_names_its_key(data, message):
    with pytest.raises(ResultError, match=message):
        read(data)

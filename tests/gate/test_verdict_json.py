"""The verdict JSON (docs/verdict.md): its numbers are rounded to 6 decimals, as the RunResult's
summaries are, the decision stays the one taken on the unrounded values, and it reads back."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import builders

from rageval.cost import Cost
from rageval.gate.decide import verdict_on
from rageval.gate.verdict import Reason, Verdict
from rageval.settings import GateConfig


def floats(value: Any, key: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(value, float):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from floats(v, f"{key}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from floats(v, f"{key}[{i}]")


def thirds() -> tuple[Any, Any]:
    """mrr@5 of the baseline (1 + 1 + 0)/3 = 0.666667 and of the candidate (1 + 0.5 + 0.25)/3 =
    0.583333 (both as the summary rounds them): Δ = −0.083334, which float subtraction makes
    −0.08333400000000002."""
    def cases(values: tuple[float, ...]) -> list:
        return [builders.case(f"q{i}", metrics={**builders.retrieval_metrics(1), "mrr@5": v})
                for i, v in enumerate(values)]
    return builders.run(cases((1.0, 1.0, 0.0))), builders.run(cases((1.0, 0.5, 0.25)))


def test_the_verdicts_numbers_are_rounded_to_six_decimals():
    before, after = thirds()
    assert after.summary.metrics["mrr@5"] - before.summary.metrics["mrr@5"] == -0.08333400000000002
    verdict = verdict_on(before, after, GateConfig(max_drop={"mrr@5": 0.05}))
    data = verdict.to_dict()
    row = next(r for r in data["metrics"] if r["metric"] == "mrr@5")
    assert row["delta"] == -0.083334 and row["status"] == "fail"
    reason = next(r for r in data["reasons"] if r["rule"] == "max_drop")
    assert reason["value"] == -0.083334
    long = [(key, value) for key, value in floats(data) if value != round(value, 6)]
    assert long == []
    assert "-0.08333400000000002" not in json.dumps(data)


def test_rounding_leaves_the_decision_to_the_unrounded_values():
    """A drop of 0.0300004 is over a max drop of 0.03 although it is written 0.03: the decision is
    the unrounded value's; the file only stops carrying binary noise."""
    before, after = thirds()
    verdict = verdict_on(before, after, GateConfig(max_drop={"mrr@5": 0.0833335}))
    assert verdict.blocked and next(r for r in verdict.metrics if r.metric == "mrr@5").delta == -0.08333400000000002


def test_the_rounded_json_reads_back_to_the_same_json():
    before, after = thirds()
    data = json.loads(json.dumps(verdict_on(before, after, GateConfig(max_drop={"mrr@5": 0.05})).to_dict()))
    assert Verdict.read(data).to_dict() == data


def test_minus_zero_is_written_as_zero_and_reason_values_nested_are_rounded():
    reason = Reason("max_drop", "m", True, metric="mrr@5", value={"delta": -1e-9, "runs": [0.1 + 0.2]},
                    threshold=-0.0)
    assert reason.to_dict()["value"] == {"delta": 0.0, "runs": [0.3]}
    assert json.dumps(reason.to_dict()["threshold"]) == "0.0"


# --- docs/verdict.md documents every key ---------------------------------------------------------

DOC = Path(__file__).parents[2] / "docs" / "verdict.md"


def record_fields(cls: type, seen: set[type] | None = None) -> set[str]:
    """The names of ``cls``'s fields and of every record nested in it (the verdict JSON's keys)."""
    seen = set() if seen is None else seen
    if cls in seen or not dataclasses.is_dataclass(cls) or cls is Cost:    # Cost: docs/runresult.md
        return set()
    seen.add(cls)
    names: set[str] = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        stack = [typing.get_type_hints(cls)[f.name]]
        while stack:
            tp = stack.pop()
            stack.extend(typing.get_args(tp))
            if isinstance(tp, type):
                names |= record_fields(tp, seen)
    return names


def test_docs_verdict_md_names_every_key_of_the_verdict_json():
    text = DOC.read_text(encoding="utf-8")
    keys = record_fields(Verdict) | record_fields(Reason)
    assert {"verdict", "reasons", "bootstrap", "left_when_reverted", "thin_sections", "sigma_diff"} <= keys
    assert sorted(k for k in keys if f'"{k}"' not in text) == []

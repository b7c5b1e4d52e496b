"""What the clock writes into a RunResult: SOURCE_DATE_EPOCH (the reproducible-builds convention)
stamps ``created_at``; ``--reproducible`` leaves durations out; a malformed epoch is bad input.
The byte-for-byte comparison of two demo runs is in tests/pipeline/test_determinism.py."""

from __future__ import annotations

import json

import pytest

from rageval.clock import Clock
from rageval.errors import RagevalError
from rageval.results import load_result


@pytest.mark.parametrize(("epoch", "stamp"), [("0", "1970-01-01T00:00:00Z"),
                                               ("1764547200", "2025-12-01T00:00:00Z"),      # date -u -d @1764547200
                                               ("253402300799", "9999-12-31T23:59:59Z")])
def test_source_date_epoch_is_the_stamp(epoch, stamp):
    assert Clock.from_env({"SOURCE_DATE_EPOCH": epoch}).created_at() == stamp
    assert Clock.from_env({"SOURCE_DATE_EPOCH": epoch}, reproducible=True).created_at() == stamp


def test_without_an_epoch_the_stamp_is_now_or_none_when_reproducible():
    assert Clock.from_env({"SOURCE_DATE_EPOCH": ""}, reproducible=True).created_at() is None
    stamp = Clock.from_env({}).created_at()
    assert stamp is not None and stamp.endswith("Z") and len(stamp) == 20


@pytest.mark.parametrize("bad", ["abc", "-1", "1.5", " 12", "1e9", "253402300800", "٣"])
def test_a_malformed_epoch_is_refused(bad):
    with pytest.raises(RagevalError, match="SOURCE_DATE_EPOCH is .*whole number of seconds"):
        Clock.from_env({"SOURCE_DATE_EPOCH": bad})


def test_reproducible_drops_durations_only():
    assert Clock(reproducible=True).timings({"eval_s": 1.5}) == {} and Clock(reproducible=True).latency(3.0) is None
    assert Clock().timings({"eval_s": 1.5}) == {"eval_s": 1.5} and Clock().latency(3.0) == 3.0


def _run(run_cli, demo, out, *flags):
    code, _, err = run_cli("run", "--config", demo / "rageval.yml", "--subset", "pr", "--out", out, *flags)
    assert code == 0, err
    return json.loads(out.read_text(encoding="utf-8")), load_result(out)


def test_run_honours_source_date_epoch_and_keeps_timings(run_cli, copy_demo, tmp_path, monkeypatch):
    demo = copy_demo(tmp_path / "demo")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764547200")
    data, result = _run(run_cli, demo, tmp_path / "a.json")
    assert data["created_at"] == result.created_at == "2025-12-01T00:00:00Z"
    assert set(data["timings"]) == {"index_s", "eval_s", "total_s"}
    assert all(c["latency_ms"] is not None for c in data["cases"])


def test_reproducible_run_without_epoch_has_no_clock_and_loads(run_cli, copy_demo, tmp_path, monkeypatch):
    demo = copy_demo(tmp_path / "demo")
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    data, result = _run(run_cli, demo, tmp_path / "a.json", "--reproducible")
    assert "created_at" in data and data["created_at"] is None and result.created_at is None
    assert data["timings"] == {} and result.timings == {}
    assert [c["latency_ms"] for c in data["cases"]] == [None] * 44
    assert [c.passed for c in result.cases] == [True] * 44          # the README: passed 44 · failed 0


def test_baseline_takes_the_flag_too(run_cli, copy_demo, tmp_path, monkeypatch):
    demo = copy_demo(tmp_path / "demo")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    out = tmp_path / "b.json"
    code, _, err = run_cli("baseline", "--config", demo / "rageval.yml", "--subset", "pr", "--out", out,
                           "--reproducible")
    assert code == 0, err
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["created_at"] == "1970-01-01T00:00:00Z" and data["timings"] == {}


def test_a_malformed_epoch_exits_2_naming_it(run_cli, copy_demo, tmp_path, monkeypatch):
    demo = copy_demo(tmp_path / "demo")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    out = tmp_path / "a.json"
    code, _, err = run_cli("run", "--config", demo / "rageval.yml", "--out", out, "--reproducible")
    assert code == 2 and "SOURCE_DATE_EPOCH is 'yesterday'" in err and not out.exists()

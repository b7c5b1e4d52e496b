"""rageval.results: the one validator of a results file, and the JSON it writes.

The files under tests/data/release-0.1.0/ were written by rageval 0.1.0 before the typed records
(commit 449be4a, the seeds' incident as a replay project): they must load and re-serialise to the
same records, key for key; rageval writes them back packed (schema_version 2: rageval/packing.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
from pathlib import Path

import pytest
from builders import case, run

from rageval import files, records
from rageval.errors import BaselineError, ResultError
from rageval.files import to_json, write_json
from rageval.gate.verdict import Verdict
from rageval.results import RunResult, load_result

RELEASE = Path(__file__).parent / "data" / "release-0.1.0"


def as_release_wrote(result: RunResult) -> dict:
    """What release 0.1.0 wrote for ``result``: schema 1, every case field and chunk text inline."""
    data = {**result.to_dict(), "schema_version": 1, "cases": [c.to_dict() for c in result.cases]}
    del data["chunks"]
    return data


@pytest.mark.parametrize("name", ["runresult.json", "candidate.json"])
def test_the_quick_case_readers_build_what_the_strict_ones_build(name, monkeypatch):
    """rageval.records reads a plain, valid case with quick type checks; the strict reader (the
    one that names a bad key) must build the very same records from the same file."""
    quick = load_result(RELEASE / name)
    monkeypatch.setattr(records, "_fast_case", lambda data: None)
    monkeypatch.setattr(records, "_fast_check", lambda data: None)
    strict = load_result(RELEASE / name)
    assert quick == strict and quick.to_dict() == strict.to_dict()
    assert [type(v) for c in quick.cases for v in c.metrics.values()] == \
        [type(v) for c in strict.cases for v in c.metrics.values()]


@pytest.mark.parametrize("name", ["runresult.json", "candidate.json"])
def test_runresults_of_the_release_load_and_reserialise_byte_for_byte(name):
    text = (RELEASE / name).read_text(encoding="utf-8")
    result = load_result(RELEASE / name)
    assert to_json(as_release_wrote(result)) == text        # nothing lost, key for key
    written = result.to_dict()                               # schema 2: packed
    assert written["schema_version"] == 2
    assert RunResult.from_dict(json.loads(to_json(written, compact=True))) == result
    assert result.case_ids == ["q01", "q02", "q03", "q04", "q05"]


def test_a_case_field_the_golden_snapshot_holds_is_written_once():
    result = load_result(RELEASE / "runresult.json")
    written = result.to_dict()
    assert all("question" not in c and "expected_answer" not in c for c in written["cases"])
    assert all("sections" not in item and "tokens" not in item for c in written["cases"] for item in c["retrieved"])
    snapshot = written["golden"]["cases"]
    del snapshot["q02"]                                       # a case the snapshot does not hold …
    with pytest.raises(ResultError, match=r"cases\[1\]\.question: missing"):
        RunResult.from_dict(json.loads(to_json(written)))
    edited = result.replace(cases=tuple(c.replace(question="asked otherwise") if c.id == "q02" else c
                                        for c in result.cases))
    packed = edited.to_dict()                                 # … or a case that differs from it keeps its own
    assert packed["cases"][1]["question"] == "asked otherwise"
    assert RunResult.from_dict(json.loads(to_json(packed))) == edited


def test_each_chunk_text_is_written_once_per_run():
    data = release()
    result = RunResult.from_dict(data)
    written = result.to_dict()
    mentions = sum(len(c["retrieved"]) for c in data["cases"])
    assert len(written["chunks"]) < mentions
    assert all("text" not in item for c in written["cases"] for item in c["retrieved"])
    for chunk_id, entry in written["chunks"].items():
        assert entry["sha256"] == hashlib.sha256(entry["text"].encode("utf-8")).hexdigest()
    again = RunResult.from_dict(json.loads(to_json(written)))
    assert [[r.text for r in c.retrieved] for c in again.cases] == [[r.text for r in c.retrieved] for c in result.cases]


def test_a_reused_chunk_id_with_another_text_keeps_its_text_inline():
    data = release()
    data["cases"][1]["retrieved"][0] = {**data["cases"][0]["retrieved"][0], "text": "another text"}
    written = RunResult.from_dict(data).to_dict()
    assert written["cases"][1]["retrieved"][0]["text"] == "another text"
    assert RunResult.from_dict(json.loads(to_json(written))).cases[1].retrieved[0].text == "another text"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["chunks"][next(iter(d["chunks"]))].update(text="edited"), r"chunks\..*\.sha256.*does not match"),
    (lambda d: d["chunks"].pop(next(iter(d["chunks"]))), r"retrieved\[\d\].*no text here and none in the chunk table"),
    (lambda d: d["cases"][0]["retrieved"][0].update(chunk_id=["c1"]),
     r"cases\[0\]\.retrieved\[0\]\.chunk_id: expected a string, got list"),
    (lambda d: d["cases"][0]["retrieved"][1].pop("chunk_id"),
     r"cases\[0\]\.retrieved\[1\]: chunk None has no text here and none in the chunk table"),
])
def test_a_broken_chunk_table_is_bad_input_naming_the_key(edit, message):
    written = json.loads(to_json(RunResult.from_dict(release()).to_dict()))
    edit(written)
    with pytest.raises(ResultError, match=message):
        RunResult.from_dict(written)


def six_decimals(value):
    """``value`` with every float rounded to 6 decimals (what a verdict writes since 0.2)."""
    if isinstance(value, float):
        return round(value, 6) + 0.0
    if isinstance(value, dict):
        return {k: six_decimals(v) for k, v in value.items()}
    if isinstance(value, list):
        return [six_decimals(v) for v in value]
    return value


def test_the_verdict_of_the_release_loads_with_the_same_keys():
    data = json.loads((RELEASE / "verdict.json").read_text(encoding="utf-8"))
    verdict = Verdict.read(data)
    # the same keys and values, written to 6 decimals, plus the keys added since with their empty values
    assert verdict.to_dict() == {**six_decimals(data), "known_failures": []}
    assert verdict.verdict == "fail" and verdict.pass_to_fail == ("q01", "q03") and verdict.policy is None


def release() -> dict:
    return json.loads((RELEASE / "runresult.json").read_text(encoding="utf-8"))


def set_path(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(("path", "value", "message"), [
    (("summary", "metrics", "pass_rate"), math.nan, r"summary\.metrics\.pass_rate: expected a finite number or null, got nan"),
    (("summary", "metrics", "pass_rate"), "1.0", r"summary\.metrics\.pass_rate: expected a finite number or null, got '1\.0'"),
    (("summary", "metrics", "mrr@5"), -math.inf, r"summary\.metrics\.mrr@5: expected a finite number"),
    (("cases", 1, "context_tokens"), 1.5, r"cases\[q02\]\.context_tokens: expected an integer or null, got 1\.5"),
    (("summary", "metrics"), KeyError, r"summary\.metrics: missing"),
    (("summary",), KeyError, r"summary: missing"),
    (("cases", 0, "metrics", "mrr@5"), None, r"cases\[q01\]\.metrics\.mrr@5: expected a finite number, got None"),
    (("cases", 0, "metrics", "mrr@5"), "0.5", r"cases\[q01\]\.metrics\.mrr@5: expected a finite number, got '0\.5'"),
    (("cases", 0, "passed"), "yes", r"cases\[q01\]\.passed: expected true or false, got 'yes'"),
    (("cases", 0, "checks", "numbers", "score"), math.nan, r"cases\[q01\]\.checks\.numbers\.score: expected a finite number"),
    (("cases", 0, "checks", "numbers", "status"), "maybe", r"cases\[q01\]\.checks\.numbers\.status: expected one of"),
    (("cases", 0, "retrieved", 0, "score"), math.nan, r"cases\[q01\]\.retrieved\[0\]\.score: expected a finite number"),
    (("cases", 0, "id"), KeyError, r"cases\[0\]\.id: missing"),
    (("cases", 0, "first_relevant_rank"), 0, r"cases\[q01\]\.first_relevant_rank: expected an integer ≥ 1"),
    (("cases", 0, "surprise"), 1, r"cases\[0\]\.surprise: unknown key"),
    (("noise",), {"sigma": {"mrr@5": math.inf}}, r"noise\.sigma\.mrr@5: expected a finite number"),
    (("noise",), {"sigma": {"mrr@5": -0.1}}, r"noise\.sigma\.mrr@5: expected a number from 0 to 1, got -0\.1"),
    # a σ this large would widen every tolerance past the metric's range: bad input, not noise
    (("noise",), {"sigma": {"mrr@5": 1e308}}, r"noise\.sigma\.mrr@5: expected a number from 0 to 1, got 1e\+308"),
    (("noise",), {"sigma": {"context_tokens": -3}}, r"noise\.sigma\.context_tokens: expected a number ≥ 0"),
    (("summary", "metrics", "pass_rate"), 1.5, r"summary\.metrics\.pass_rate: expected a number from 0 to 1"),
    (("summary", "metrics", "pass_rate"), -1, r"summary\.metrics\.pass_rate: expected a number from 0 to 1"),
    (("cases", 0, "metrics", "hit@1"), 2.0, r"cases\[q01\]\.metrics\.hit@1: expected a number from 0 to 1"),
    (("golden", "version"), None, r"golden\.version: expected an integer or a string"),
    (("golden",), KeyError, r"golden: missing"),
    (("metric_names",), "hit@1", r"metric_names: expected a list"),
    (("config", "gate", "floors", "mrr@5"), math.nan, r"config\.gate\.floors\.mrr@5: expected a finite number"),
    (("cost", "usd"), "free", r"cost\.usd: expected a finite number"),
    # an integer no float can hold: bad input (exit 2), not an OverflowError (exit 3)
    (("summary", "metrics", "pass_rate"), 10**400, r"summary\.metrics\.pass_rate: expected a finite number or null, got 1000"),
    (("timings", "index_s"), 10**400, r"timings\.index_s: expected a finite number, got 1000"),
    (("corpus", "sections", "DT-1"), "x", r"corpus\.sections\.DT-1: expected an object, got 'x'"),
    (("corpus",), {}, r"corpus\.sections: missing"),
    (("golden", "cases", "q01", "numbers"), "7 ngày", r"golden\.cases\.q01\.numbers: expected a list"),
    (("golden", "cases", "q01", "question"), 7, r"golden\.cases\.q01\.question: expected a string"),
    (("repeats",), True, r"repeats: expected an integer"),
    (("schema_version",), 3, r"RunResult schema_version 3 is not supported \(this rageval reads 1 and 2\)"),
    # what the quick readers of a case (rageval.records) do not take goes to the strict reader's message
    (("cases", 0, "metrics", "hit@1"), True, r"cases\[q01\]\.metrics\.hit@1: expected a finite number, got True"),
    (("cases", 0, "metrics", "hit@1"), math.nan, r"cases\[q01\]\.metrics\.hit@1: expected a finite number, got nan"),
    (("cases", 0, "usage"), {"tokens": -1}, r"cases\[q01\]\.usage\.tokens: expected an integer ≥ 0, got -1"),
    (("cases", 0, "retrieved", 0, "sections"), None, r"cases\[q01\]\.retrieved\[0\]\.sections: expected a list"),
    (("cases", 0, "tags"), ["pr", 3], r"cases\[q01\]\.tags\[1\]: expected a string, got 3"),
    (("cases", 0, "checks", "numbers", "missing"), [1, math.inf],
     r"cases\[q01\]\.checks\.numbers\.missing\[1\]: expected a finite number, got inf"),
    (("cases", 0, "latency_ms"), math.inf, r"cases\[q01\]\.latency_ms: expected a finite number or null, got inf"),
    (("cases", 0, "slice"), {"type": math.nan}, r"cases\[q01\]\.slice\.type: expected a string, number or boolean"),
    (("cases", 0, "checks", "numbers", "reason"), None, r"cases\[q01\]\.checks\.numbers\.reason: expected a string"),
    (("cases", 0, "out_of_scope"), None, r"cases\[q01\]\.out_of_scope: expected true or false, got None"),
])
def test_from_dict_names_the_key_of_what_is_wrong(path, value, message):
    with pytest.raises(ResultError, match=r"^baseline\.json: " + message):
        RunResult.from_dict(set_path(release(), path, value), "baseline.json")


def test_duplicate_case_ids_and_the_error_class_are_the_callers():
    data = release()
    data["cases"].append(copy.deepcopy(data["cases"][0]))
    with pytest.raises(BaselineError, match=r"main\.json: cases: case id 'q01' appears twice"):
        RunResult.from_dict(data, "main.json", error=BaselineError)
    with pytest.raises(ResultError, match=r"x: not a RunResult \(no schema_version\)"):
        RunResult.from_dict({"cases": []}, "x")


def test_a_file_with_nan_or_infinity_is_not_json(tmp_path):
    text = (RELEASE / "runresult.json").read_text(encoding="utf-8")
    for constant in ("NaN", "Infinity", "-Infinity"):
        path = tmp_path / f"{constant}.json"
        path.write_text(text.replace('"repeats": 1', f'"repeats": {constant}'), encoding="utf-8")
        with pytest.raises(ResultError, match=rf"{path}: line \d+: {constant} is not a finite number"):
            load_result(path)
    with pytest.raises(ResultError, match="missing.json: RunResult file not found"):
        load_result(tmp_path / "missing.json")


def test_a_key_twice_in_a_results_file_names_both_lines(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('{"schema_version": 1,\n "repeats": 1,\n "repeats": 3}', encoding="utf-8")
    with pytest.raises(ResultError, match=r"dup\.json: line 3: key 'repeats' appears twice \(lines 2 and 3\)"):
        load_result(path)


def test_rageval_never_writes_nan(tmp_path):
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_json(tmp_path / "x.json", {"pass_rate": math.nan})
    assert not (tmp_path / "x.json").exists()


def test_records_round_trip():
    result = run([case("q1"), case("q2", rank=3, numbers=(["7 ngày"], ["30 ngày"]))], sigma={"mrr@5": 0.01})
    again = RunResult.from_dict(json.loads(to_json(result.to_dict())))
    assert again == result and again.to_dict() == result.to_dict()
    assert again.case_map["q2"].status("numbers") == "fail" and again.sigma("mrr@5") == 0.01


@pytest.mark.parametrize(("key", "value", "message"), [
    ("metrics", "oops", r"metrics: expected a list"),
    ("verdict", "maybe", r"verdict: expected one of pass, fail, got 'maybe'"),
    ("state", "bad", r"state: expected one of pass, fail"),
    ("reasons", [{"rule": "floor", "message": 1, "blocking": True}], r"reasons\[0\]\.message: expected a string"),
    ("pass_to_fail", [1], r"pass_to_fail\[0\]: expected a string"),
])
def test_a_verdict_with_wrong_types_is_refused_naming_the_key(key, value, message):
    data = json.loads((RELEASE / "verdict.json").read_text(encoding="utf-8"))
    data[key] = value
    with pytest.raises(ResultError, match=r"^verdict\.json: " + message):
        Verdict.read(data, "verdict.json")


def test_rows_of_a_verdict_need_numbers_where_numbers_belong():
    data = json.loads((RELEASE / "verdict.json").read_text(encoding="utf-8"))
    data["metrics"][0]["candidate"] = "high"
    with pytest.raises(ResultError, match=r"metrics\[0\]\.candidate: expected a finite number or null"):
        Verdict.read(data, "verdict.json")
    assert Verdict.from_json((RELEASE / "verdict.json").read_bytes(), "verdict.json").verdict == "fail"


# --- one strict entry: RunResult.from_json and Verdict.from_json -------------------------------

def test_from_json_reads_bytes_as_strictly_as_a_file():
    data = (RELEASE / "runresult.json").read_bytes()
    assert RunResult.from_json(data, "artifact member") == load_result(RELEASE / "runresult.json")
    twice = data.replace(b'"git_sha":', b'"git_sha": "evil", "git_sha":', 1)
    with pytest.raises(BaselineError, match=r"^member x: line \d+: key 'git_sha' appears twice"):
        RunResult.from_json(twice, "member x", error=BaselineError)
    with pytest.raises(ResultError, match=r"^m: line 1: nested more than 64 levels deep"):
        RunResult.from_json(b"[" * 100_000 + b"]" * 100_000, "m")
    with pytest.raises(ResultError, match=r"^m: not UTF-8"):
        RunResult.from_json(data.replace(b"Mua", b"M\xffa", 1), "m")


def test_a_result_remembers_where_it_was_read_from_without_writing_it():
    result = load_result(RELEASE / "runresult.json")
    assert result.source == str(RELEASE / "runresult.json")
    assert "source" not in result.to_dict() and RunResult.from_json(to_json(result.to_dict()).encode(), "b") == result


def test_a_results_file_over_the_size_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as fh:          # 512 MiB + 1 byte of nothing: refused from its size alone
        fh.truncate(files.MAX_RESULT_BYTES + 1)
    with pytest.raises(ResultError, match=r"huge\.json: more than 536,870,912 bytes"):
        load_result(sparse)
    monkeypatch.setattr(files, "MAX_RESULT_BYTES", 1000)
    data = (RELEASE / "runresult.json").read_bytes()
    assert len(data) > 1000
    with pytest.raises(BaselineError, match=r"^member: more than 1,000 bytes"):
        RunResult.from_json(data, "member", error=BaselineError)
    with pytest.raises(ResultError, match=r"verdict\.json: more than 1,000 bytes"):
        Verdict.from_json(data, "verdict.json")


@pytest.mark.parametrize("kind", ["fifo", "folder", "link-to-dev-null"])
def test_a_results_path_that_is_no_regular_file_is_refused_without_waiting(tmp_path, kind):
    path = tmp_path / "base.json"
    if kind == "fifo":
        os.mkfifo(path)                      # nobody writes: reading would wait forever
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/null")
    expected = {"fifo": "a pipe", "folder": "a folder", "link-to-dev-null": "a character device"}[kind]
    with pytest.raises(ResultError, match=rf"base\.json: not a regular file but {expected}"):
        load_result(path)


def test_a_symlink_to_a_results_file_is_followed(tmp_path):
    link = tmp_path / "latest.json"
    link.symlink_to(RELEASE / "runresult.json")
    assert load_result(link).git_sha == load_result(RELEASE / "runresult.json").git_sha


def test_verdict_from_json_is_the_strict_entry_for_verdict_files():
    data = (RELEASE / "verdict.json").read_bytes()
    assert Verdict.from_json(data, "verdict.json") == Verdict.read(json.loads(data), "verdict.json")
    with pytest.raises(ResultError, match=r"^verdict\.json: line \d+: key 'verdict' appears twice"):
        Verdict.from_json(data.replace(b'"verdict":', b'"verdict": "pass", "verdict":', 1), "verdict.json")
    with pytest.raises(ResultError, match=r"^verdict\.json: line \d+: NaN is not a finite number"):
        Verdict.from_json(data.replace(b'"comparable": true', b'"comparable": NaN', 1), "verdict.json")


SNAPSHOT_CASE = {"question": "Đổi trả trong mấy ngày?", "expected_sections": ["DT-1"], "expected_answer": "7 ngày",
                 "slice": {"type": "lookup", "numeric": True}, "tags": ["pr"], "numbers": ["7 ngày"],
                 "out_of_scope": False, "grades": {"DT-1": 2}}


@pytest.mark.parametrize(("change", "message"), [
    ({"tags": "pr"}, "golden.cases.q1.tags: expected a list, got 'pr'"),
    ({"numbers": [7]}, r"golden.cases.q1.numbers\[0\]: expected a string, got 7"),
    ({"grades": {"DT-1": True}}, "golden.cases.q1.grades.DT-1: expected an integer, got True"),
    ({"grades": {"DT-1": -1}}, "golden.cases.q1.grades.DT-1: expected an integer ≥ 0, got -1"),
    ({"out_of_scope": "no"}, "golden.cases.q1.out_of_scope: expected true or false, got 'no'"),
    ({"question": None}, "golden.cases.q1.question: expected a string, got None"),
    ({"slice": {"deep": {"deeper": [1e308 * 10]}}}, "golden.cases.q1.slice.deep.deeper"),
])
def test_a_golden_snapshot_case_is_read_strictly(change, message):
    data = run([case("q1")]).to_dict()
    data["golden"]["cases"] = {"q1": {**SNAPSHOT_CASE, **change}}
    with pytest.raises(ResultError, match=message):
        RunResult.from_dict(data, "baseline.json")


@pytest.mark.parametrize("change", [{}, {"expected_answer": None, "tags": None, "grades": None},
                                    {"slice": {"lang": "vi", "size": 2.5}, "source": {"file": "a.md", "line": 3}}])
def test_a_golden_snapshot_case_reads_back_as_written(change):
    data = run([case("q1")]).to_dict()
    data["golden"]["cases"] = {"q1": {**SNAPSHOT_CASE, **change}}
    assert RunResult.from_dict(copy.deepcopy(data), "baseline.json").golden.cases == data["golden"]["cases"]

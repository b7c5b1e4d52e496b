"""Bad input: one clear message naming the file and the problem, exit code 2, nothing written."""

import json

import pytest


def break_file(project, name, text):
    (project["chunk-200"].parent / name).write_text(text, encoding="utf-8")


BROKEN = [
    # (file to overwrite, its new content, fragments the message must contain)
    ("chunk-200.yml", "golden: golden.json\ncorpus: corpus.yaml\ngate:\n  floors: {hit@3: 0.95\n",
     ["chunk-200.yml", "line", "not valid YAML"]),
    ("chunk-200.yml", "golden: golden.json\ncorpus: corpus.yaml\nchunking: {size: big}\n",
     ["chunk-200.yml", "line 3", "chunking.size", "integer"]),
    ("chunk-200.yml", "golden: golden.json\ncorpus: corpus.yaml\ngaet: {floors: {hit@3: 0.9}}\n",
     ["chunk-200.yml", "line 3", "unknown key 'gaet'", "did you mean 'gate'"]),
    ("chunk-200.yml", "golden: missing.yaml\ncorpus: corpus.yaml\n",
     ["missing.yaml", "not found"]),
    ("golden.json", json.dumps([{"id": "q01", "cau_hoi": "a?", "muc_ky_vong": ["DT-1"]},
                                {"id": "q01", "cau_hoi": "b?", "muc_ky_vong": ["DT-2"]}]),
     ["golden.json", "q01", "appears twice"]),
    ("golden.json", json.dumps([{"id": "q01", "cau_hoi": "a?", "muc_ky_vong": ["DT-9"]}]),
     ["golden.json", "q01", "DT-9", "no corpus document has"]),
    ("golden.json", json.dumps([{"id": "q01", "muc_ky_vong": ["DT-1"]}]),
     ["golden.json", "q01", "missing 'question'"]),
    ("golden.json", json.dumps([{"id": "q01", "cau_hoi": "a?", "muc_ky_vong": "DT-1", "tags": 5}]),
     ["golden.json", "q01", "'tags' must be a list"]),
    ("chunk-200.jsonl", '{"id": "q01", "answer": "x", "retrieved": []}\n{"id": "q02", "answer": \n',
     ["chunk-200.jsonl", "line 2", "not valid JSON"]),
    ("chunk-200.jsonl", '{"id": "q01", "answer": 5}\n',
     ["chunk-200.jsonl", "line 1", "'answer' must be a string"]),
    ("corpus.yaml", "DT-1: [not, text]\n", ["corpus.yaml", "DT-1", "non-empty text"]),
]


@pytest.mark.parametrize("name, content, fragments", BROKEN, ids=[f"{b[0]}-{i}" for i, b in enumerate(BROKEN)])
def test_bad_input_exits_2_names_the_file_and_writes_nothing(seed_project, run_cli, tmp_path, name, content, fragments):
    break_file(seed_project, name, content)
    out = tmp_path / "result.json"
    code, stdout, stderr = run_cli("run", "--config", seed_project["chunk-200"], "--out", out)
    assert code == 2
    assert not out.exists()
    assert stderr.startswith("ERROR ")
    assert len(stderr.strip().splitlines()) == 1, stderr  # one message, no traceback
    for fragment in fragments:
        assert fragment in stderr


def test_missing_config_file(run_cli, tmp_path):
    code, _, stderr = run_cli("validate", "--config", tmp_path / "nope.yml")
    assert code == 2
    assert "nope.yml" in stderr and "not found" in stderr


def test_validate_ok(seed_project, run_cli):
    code, stdout, _ = run_cli("validate", "--config", seed_project["chunk-200"])
    assert code == 0
    assert "5 cases" in stdout and "10 sections" in stdout


def test_validate_catches_a_broken_trace_file(seed_project, run_cli):
    break_file(seed_project, "chunk-200.jsonl", "not json\n")
    code, _, stderr = run_cli("validate", "--config", seed_project["chunk-200"])
    assert code == 2 and "chunk-200.jsonl: line 1" in stderr


def test_existing_output_is_left_untouched_on_bad_input(seed_project, run_cli, tmp_path):
    out = tmp_path / "result.json"
    out.write_text("previous", encoding="utf-8")
    break_file(seed_project, "golden.json", "[")
    code, _, _ = run_cli("run", "--config", seed_project["chunk-200"], "--out", out)
    assert code == 2
    assert out.read_text(encoding="utf-8") == "previous"


def test_unknown_subset(seed_project, run_cli):
    code, _, stderr = run_cli("run", "--config", seed_project["chunk-200"], "--subset", "nightly")
    assert code == 2 and "no case is tagged 'nightly'" in stderr

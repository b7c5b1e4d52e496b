"""Issue 11's paths that turned a blocked change into a pass, each reproduced on the banhang demo:
the 800-token config (rageval-800.yml) against main's 200-token baseline must block, whatever
happens to the output, the files handed to the gate, or the golden set's version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEMO, unwrapped

QUESTION = "Áo khoác mua online mặc chật thì đổi size trong bao nhiêu ngày?"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, copy_demo) -> dict[str, Path]:
    """A copy of the demo, main's baseline of its pr subset, and the PR's candidate (800 tokens)."""
    from rageval.cli import main

    root = tmp_path_factory.mktemp("fail-closed")
    project = copy_demo(root / "banhang")
    paths = {"project": project, "baseline": root / "baseline.json", "candidate": root / "candidate.json"}
    assert main(["baseline", "--config", str(project / "rageval.yml"), "--subset", "pr", "--repeats", "1",
                 "--out", str(paths["baseline"])]) == 0
    assert main(["gate", "--config", str(project / "rageval-800.yml"), "--subset", "pr", "--baseline",
                 str(paths["baseline"]), "--candidate-out", str(paths["candidate"])]) == 1
    return paths


def gate(run_cli, demo, *extra, config="rageval-800.yml", out=None):
    out = out or demo["project"].parent / "verdict.json"
    code, stdout, err = run_cli("gate", "--config", demo["project"] / config, "--subset", "pr",
                                "--baseline", demo["baseline"], "--out", out, *extra)
    verdict = json.loads(out.read_text(encoding="utf-8")) if code in (0, 1) else None
    return code, unwrapped(stdout), err, verdict


def blocking(verdict) -> list[str]:
    return [r["message"] for r in verdict["reasons"] if r["blocking"]]


# 1 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("reader", ["head -n 1", "true"])
def test_a_closed_output_pipe_keeps_the_blocked_exit_code(demo, reader):
    cmd = (f"set -o pipefail; {sys.executable} -m rageval gate --config {demo['project'] / 'rageval-800.yml'} "
           f"--subset pr --candidate {demo['candidate']} --baseline {demo['baseline']} 2>&1 | {reader}")
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "BrokenPipeError" not in proc.stderr


# 2 ------------------------------------------------------------------------------------------

def test_a_config_key_written_twice_is_an_error_not_the_last_one_winning(demo, run_cli, tmp_path):
    config = tmp_path / "rageval.yml"
    config.write_text(f"golden: {DEMO / 'golden.yaml'}\ncorpus: {DEMO / 'docs'}\n"
                      "gate: {floors: {pass_rate: 1.0}}\ngate: {}\n", encoding="utf-8")
    code, _, err = run_cli("gate", "--config", config, "--baseline", demo["baseline"])
    assert code == 2
    assert "key 'gate' appears twice (lines 3 and 4)" in err and "Traceback" not in err


# 3 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "message"), [
    ("NaN", "NaN is not a finite number"),
    ("-Infinity", "-Infinity is not a finite number"),
    ('"1.0"', "summary.metrics.pass_rate: expected a finite number or null, got '1.0'"),
])
def test_a_baseline_with_a_non_finite_or_non_numeric_rate_is_bad_input(demo, run_cli, tmp_path, value, message):
    text = demo["baseline"].read_text(encoding="utf-8")
    bad = tmp_path / "baseline.json"
    assert '"pass_rate":1.0' in text                     # RunResults are written compact
    bad.write_text(text.replace('"pass_rate":1.0', f'"pass_rate":{value}', 1), encoding="utf-8")
    code, _, err = run_cli("gate", "--config", demo["project"] / "rageval-800.yml", "--subset", "pr",
                           "--baseline", bad, "--candidate", demo["candidate"])
    assert code == 2 and message in err and str(bad) in err


def test_a_null_rate_in_the_baseline_is_recomputed_from_its_cases_and_the_drop_blocks(demo, run_cli, tmp_path):
    data = json.loads(demo["baseline"].read_text(encoding="utf-8"))
    data["summary"]["metrics"]["pass_rate"] = None
    data["summary"]["metrics"]["mrr@5"] = None
    bad = tmp_path / "baseline.json"
    bad.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code, _, _, verdict = gate(run_cli, {**demo, "baseline": bad}, "--candidate", demo["candidate"])
    assert code == 1
    assert any(m.startswith("pass_rate dropped 1.00 → 0.93") for m in blocking(verdict))


@pytest.mark.parametrize(("sigma", "message"), [
    ("Infinity", "Infinity is not a finite number"),
    ("1e308", "noise.sigma.pass_rate: expected a number from 0 to 1, got 1e+308"),
])
def test_a_baseline_noise_that_would_swallow_every_drop_is_bad_input(demo, run_cli, tmp_path, sigma, message):
    data = json.loads(demo["baseline"].read_text(encoding="utf-8"))
    data["noise"]["sigma"]["pass_rate"] = "SIGMA"
    bad = tmp_path / "baseline.json"
    bad.write_text(json.dumps(data, ensure_ascii=False).replace('"SIGMA"', sigma), encoding="utf-8")
    code, _, err = run_cli("gate", "--config", demo["project"] / "rageval-800.yml", "--subset", "pr",
                           "--baseline", bad, "--candidate", demo["candidate"])
    assert code == 2 and message in err and "Traceback" not in err


def test_a_nan_floor_is_refused(demo, run_cli, tmp_path):
    config = tmp_path / "rageval.yml"
    config.write_text(f"golden: {DEMO / 'golden.yaml'}\ncorpus: {DEMO / 'docs'}\n"
                      "gate: {floors: {pass_rate: .nan}}\n", encoding="utf-8")
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 2 and "'gate.floors.pass_rate' must be a finite number" in err


# 4 ------------------------------------------------------------------------------------------

def _edited_candidate(demo, tmp_path, edit) -> Path:
    data = json.loads(demo["candidate"].read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "candidate.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _omit_a_failing_case(data):
    data["cases"] = [c for c in data["cases"] if c["id"] != "q01"]
    data["golden"]["subset"] = "smoke"


def _claim_passed(data):
    for case in data["cases"]:
        case.update(passed=True, failures=[])


def _claim_a_perfect_summary(data):
    data["summary"]["metrics"].update({"pass_rate": 1.0, "mrr@5": 0.91, "numbers_pass": 1.0})


@pytest.mark.parametrize("edit", [_omit_a_failing_case, _claim_passed, _claim_a_perfect_summary],
                         ids=["omits a failing case and edits golden.subset", "sets passed: true",
                              "claims pass_rate 1.0"])
def test_an_edited_candidate_still_blocks(demo, run_cli, tmp_path, edit):
    code, _, _, verdict = gate(run_cli, demo, "--candidate", _edited_candidate(demo, tmp_path, edit))
    assert code == 1
    messages = blocking(verdict)
    # an omitted case fails and retrieved nothing, so the drop can only look worse
    assert any(m.startswith(("mrr@5 dropped 0.91 → 0.87", "mrr@5 dropped 0.91 → 0.86")) for m in messages)
    assert any(m.startswith("pass_rate dropped 1.00 → 0.93") for m in messages)
    assert "q01" in verdict["pass_to_fail"]


def test_a_case_missing_from_the_candidate_fails_and_is_listed(demo, run_cli, tmp_path):
    code, _, _, verdict = gate(run_cli, demo, "--candidate", _edited_candidate(demo, tmp_path, _omit_a_failing_case),
                               "--report-md", tmp_path / "report.md")
    assert code == 1
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "the candidate has no result for this case" in report and "Mua áo mặc không vừa" in report


# 5 ------------------------------------------------------------------------------------------

def test_adding_a_golden_case_keeps_the_drop_checks_and_the_pass_to_fail_list(demo, run_cli, tmp_path, copy_demo):
    project = copy_demo(tmp_path / "banhang")
    code, stdout, err = run_cli("golden", "add", "--config", project / "rageval.yml", "--question", QUESTION,
                                "--expected-sections", "DT-1", "--expected-answer",
                                "Trong 7 ngày kể từ ngày nhận hàng, hàng còn tem và nhãn.",
                                "--source", "incident-2026-11-30", "--tags", "pr")
    assert code == 0, err
    assert "version 4 → 5" in stdout
    code, _, _, verdict = gate(run_cli, {**demo, "project": project})
    assert code == 1 and verdict["comparable"] is True and verdict["state"] == "fail"
    messages = blocking(verdict)
    assert any(m.startswith("mrr@5 dropped 0.91 → 0.87 (Δ −0.04") for m in messages)
    assert any(m.startswith("pass_rate dropped 1.00 → 0.93 (Δ −0.07") for m in messages)
    assert {"q01", "q64", "q121"} <= set(verdict["pass_to_fail"])
    notes = [r["message"] for r in verdict["reasons"] if r["rule"] == "golden_changes"]
    assert notes == ["golden set v4 → v5: 1 added; drops, pass→fail cases and statistics are compared on the "
                     "44 unchanged cases, floors on all 45"]


# 6 ------------------------------------------------------------------------------------------

def test_not_comparable_is_said_in_the_title_and_blocks_unless_main_says_pass(demo, run_cli, tmp_path, copy_demo):
    """A baseline of another project's golden set cannot be compared: it blocks, whatever the PR's
    own config says; only main's policy (in the baseline) can let it pass."""
    data = json.loads(demo["baseline"].read_text(encoding="utf-8"))
    data["golden"]["name"] = "another-team-faq"
    old = tmp_path / "baseline-other.json"
    old.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    project = copy_demo(tmp_path / "banhang")
    config = project / "rageval.yml"
    code, stdout, _, verdict = gate(run_cli, {**demo, "baseline": old, "project": project}, config="rageval.yml",
                                    out=tmp_path / "v.json")
    assert (code, verdict["state"]) == (1, "not_comparable")
    # one short headline (issue 20 §5.6); the reason in full on the next line
    assert stdout.startswith("RAG eval gate: blocked (not comparable) — main's baseline cannot be compared with this "
                             "PR\n  BLOCK the baseline is another project's (golden set 'another-team-faq', not "
                             "'banhang-returns')")
    assert verdict["reasons"][0]["message"] == (
        "the baseline is another project's (golden set 'another-team-faq', not 'banhang-returns'): gate against a "
        "baseline of 'banhang-returns' from this repository's main")
    # the PR writing not_comparable: pass loosens main's policy: main's value applies, and that is said
    config.write_text(config.read_text(encoding="utf-8").replace("gate:\n", "gate:\n  not_comparable: pass\n", 1),
                      encoding="utf-8")
    code, stdout, _, verdict = gate(run_cli, {**demo, "baseline": old, "project": project}, config="rageval.yml",
                                    out=tmp_path / "v2.json")
    assert code == 1 and verdict["policy"]["loosened"] == [
        {"key": "gate.not_comparable", "main": "fail", "pr": "pass"}]
    assert "this PR loosens the gate: gate.not_comparable; main's values apply until it is merged" in stdout
    # main itself saying pass (its baseline records it) lets a not-comparable run pass, said in the title
    data["config"]["gate"]["not_comparable"] = "pass"
    old.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code, stdout, _, verdict = gate(run_cli, {**demo, "baseline": old, "project": project}, config="rageval.yml",
                                    out=tmp_path / "v3.json")
    assert (code, verdict["state"]) == (0, "not_comparable")
    assert stdout.startswith("RAG eval gate: passed (not comparable) — main's baseline cannot be compared with this PR")
    assert "  note  the baseline is another project's" in stdout

"""`rageval validate` as a library function (rageval.validation.validate): a typed report the CLI
prints and the action can use, and no environment read — the caller names the git ref."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest
import yaml
from conftest import DEMO

from rageval.config import load_config
from rageval.errors import DatasetError
from rageval.golden.lifecycle import Leak
from rageval.pipeline.runner import prepare
from rageval.results import load_result
from rageval.validation import ValidationReport, validate


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=30)


def demo_figures() -> dict:
    """What examples/banhang holds, read from its files rather than from rageval."""
    golden = yaml.safe_load((DEMO / "golden.yaml").read_text(encoding="utf-8"))
    docs = sorted((DEMO / "docs").glob("*.md"))
    headings = sum(1 for d in docs for line in d.read_text(encoding="utf-8").splitlines() if line.startswith("## "))
    return {"name": golden["dataset"], "version": golden["version"], "cases": len(golden["cases"]),
            "files": len(docs), "sections": headings}


def test_the_demo_validates_into_a_typed_report():
    report = validate(load_config(DEMO / "rageval.yml"))
    facts = demo_figures()
    assert isinstance(report, ValidationReport)
    assert (report.golden, report.version, report.cases, report.files, report.sections) == (
        facts["name"], facts["version"], facts["cases"], facts["files"], facts["sections"])
    assert report.chunk_size == 200 and report.chunks >= report.sections      # a chunk never spans two sections
    assert report.checked == () and report.notes == ()                      # no baseline, git not asked
    assert report.lines()[0] == (f"ok: rageval.yml: golden set {facts['name']} v{facts['version']} "
                                 f"({facts['cases']} cases), corpus {facts['sections']} sections in {facts['files']} "
                                 f"files → {report.chunks} chunks of ≤200 tokens")
    assert report.lines()[-1].startswith("coverage:")


def test_the_library_reads_no_ci_variable_the_caller_names_the_ref(tmp_path, copy_demo, monkeypatch):
    project = copy_demo(tmp_path / "banhang")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "golden v4")
    monkeypatch.setenv("GITHUB_BASE_REF", "never-fetched")     # would give origin/never-fetched if it were read
    cfg = load_config(project / "rageval.yml")
    report = validate(cfg, git_ref="HEAD")
    assert report.notes == ()
    assert report.checked == ("git HEAD", "the ids used in 1 commit of golden.yaml")
    assert validate(cfg).checked == ()                          # no ref: git is not asked at all
    report = validate(cfg, git_ref="origin/main")
    assert report.notes == ("version discipline not checked against git: golden.yaml does not exist at origin/main",)
    assert report.lines()[0] == "note: " + report.notes[0]


def test_a_baseline_without_a_golden_snapshot_is_a_note_and_a_changed_set_an_error(tmp_path, copy_demo, run_cli):
    project = copy_demo(tmp_path / "banhang")
    baseline = tmp_path / "baseline.json"
    assert run_cli("run", project, "--subset", "pr", "--out", baseline)[0] == 0
    cfg = load_config(project / "rageval.yml")
    result = load_result(baseline)
    assert validate(cfg, baseline=(result, "b.json")).checked == ("the baseline b.json",)
    golden = project / "golden.yaml"
    golden.write_text(golden.read_text(encoding="utf-8").replace("Trong 7 ngày", "Trong 8 ngày", 1), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"the cases changed since the baseline b.json \(cases edited\) but "
                                           r"`version` is still 4"):
        validate(cfg, baseline=(result, "b.json"))
    older = replace(result, golden=replace(result.golden, cases=None))       # as rageval 0.1.0 wrote it
    assert validate(cfg, baseline=(older, "old.json")).notes == (
        "old.json has no golden snapshot (written by an older rageval); version discipline not checked against it",)


def test_leaks_are_warnings_or_an_error_as_configured(tmp_path, copy_demo):
    project = copy_demo(tmp_path / "banhang")
    question = yaml.safe_load((project / "golden.yaml").read_text(encoding="utf-8"))["cases"][0]["question"]
    (project / "notes.md").write_text(f"Ghi chú cho người viết prompt: {question}\n", encoding="utf-8")
    config = project / "rageval.yml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("leaks: warn,", "leak_files: [notes.md], leaks: warn,"), encoding="utf-8")
    report = validate(load_config(config))
    assert [leak.where for leak in report.leaks] == ["notes.md line 1"] and isinstance(report.leaks[0], Leak)
    assert any(line.startswith("warning: leak: the question of") for line in report.lines())
    config.write_text(text.replace("leaks: warn,", "leak_files: [notes.md], leaks: fail,"), encoding="utf-8")
    with pytest.raises(DatasetError, match="appears in notes.md line 1") as caught:
        validate(load_config(config))
    assert "set it to 'warn'" in caught.value.tip


# --- policy drift against the baseline (issue 21 §6) ---------------------------------------------
@pytest.fixture(scope="module")
def drifted(tmp_path_factory, copy_demo):
    """The demo with a baseline run, then its policy edited: at most 3 size/colour exchanges instead
    of 2 (DT-9, case q75 still expects 2 lần) and free installation within 30 km instead of 20 (VC-9,
    case q93 still expects 20 km) — units outside the old built-in list."""
    project = copy_demo(tmp_path_factory.mktemp("drift") / "banhang")
    base = prepare(load_config(project / "rageval.yml"), env={}).run()
    docs = project / "docs"
    for name, old, new in (("doi-tra.md", "tối đa 2 lần", "tối đa 3 lần"),
                           ("van-chuyen.md", "bán kính 20 km", "bán kính 30 km")):
        text = (docs / name).read_text(encoding="utf-8")
        assert old in text
        (docs / name).write_text(text.replace(old, new), encoding="utf-8")
    return project, base


def test_validate_with_a_baseline_blocks_on_policy_drift_in_any_unit(drifted):
    project, base = drifted
    with pytest.raises(DatasetError) as info:
        validate(load_config(project / "rageval.yml"), baseline=(base, "base.json"))
    message = info.value.message
    assert "policy drift: DT-9 no longer states 2 lần (it now states 3 lần), but q75 still expects" in message
    assert "policy drift: VC-9 no longer states 20 km (it now states 30 km), but q93 still expects" in message
    assert "golden.yaml" in message and "(against the baseline base.json)" in message
    assert "golden_checks.policy_drift is 'block'" in info.value.tip


def test_validate_reports_drift_as_a_warning_under_warn_and_not_at_all_under_off(drifted):
    project, base = drifted
    cfg = load_config(project / "rageval.yml")
    warn = replace(cfg, golden_checks=replace(cfg.golden_checks, policy_drift="warn"))
    report = validate(warn, baseline=(base, "base.json"))
    assert len(report.drift) == 2 and any(line.startswith("warning: policy drift: DT-9") for line in report.lines())
    off = replace(cfg, golden_checks=replace(cfg.golden_checks, policy_drift="off"))
    assert validate(off, baseline=(base, "base.json")).drift == ()
    assert validate(cfg).drift == ()                                 # no baseline: nothing to drift from

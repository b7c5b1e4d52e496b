"""Golden set lifecycle on the banhang demo: policy drift (the seeds' 7 → 10 ngày example),
version discipline, the golden diff in the report, holdout privacy, leaks and coverage."""

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from rageval.gate.report import render_markdown
from rageval.gate.verdict import Verdict
from rageval.golden import lifecycle
from rageval.golden.set import Case
from rageval.results import load_result
from rageval.settings import ReportConfig


@pytest.fixture
def project(tmp_path, copy_demo):
    return copy_demo(tmp_path / "banhang")


@pytest.fixture
def baseline(project, run_cli, tmp_path):
    """main's baseline of the unchanged demo, the whole golden set (holdout included)."""
    out = tmp_path / "baseline.json"
    code, _, err = run_cli("baseline", "--config", project / "rageval.yml", "--repeats", "1", "--out", out)
    assert code == 0, err
    return out


def edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= count, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def change_dt1_to_10_days(project: Path) -> None:
    """The policy change of the seeds: DT-1's return window goes from 7 to 10 ngày (DT-1 only)."""
    docs = project / "docs" / "doi-tra.md"
    text = docs.read_text(encoding="utf-8")
    start, end = text.index("## DT-1 "), text.index("## DT-2 ")
    section = text[start:end]
    assert section.count("7 ngày") == 2
    docs.write_text(text[:start] + section.replace("7 ngày", "10 ngày") + text[end:], encoding="utf-8")


def update_case(project: Path, case_id: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` inside one case's block of golden.yaml."""
    golden = project / "golden.yaml"
    text = golden.read_text(encoding="utf-8")
    start = text.index(f"  - id: {case_id}\n")
    end = text.find("\n  - id: ", start + 1)
    end = len(text) if end == -1 else end
    block = text[start:end]
    assert old in block, f"{old!r} not in {case_id}"
    golden.write_text(text[:start] + block.replace(old, new) + text[end:], encoding="utf-8")


def bump_version(project: Path, line: str) -> None:
    edit(project / "golden.yaml", "version: 4\n", "version: 5\n")
    edit(project / "golden.yaml", "changelog: \"v3 -> v4", f"changelog: \"{line}; v3 -> v4")


def gate(run_cli, project, baseline, tmp_path, *extra):
    verdict, report = tmp_path / "verdict.json", tmp_path / "report.md"
    code, out, err = run_cli("gate", "--config", project / "rageval.yml", "--baseline", baseline,
                             "--out", verdict, "--report-md", report, *extra)
    assert code in (0, 1), err
    return code, json.loads(verdict.read_text()), report.read_text(encoding="utf-8"), out


def drift_reasons(verdict):
    return [r for r in verdict["reasons"] if r["rule"] == "policy_drift"]


# --- policy drift ------------------------------------------------------------------------------

def test_policy_change_without_golden_update_is_blocked_naming_the_section_and_the_case(
        project, baseline, run_cli, tmp_path):
    change_dt1_to_10_days(project)
    code, verdict, report, out = gate(run_cli, project, baseline, tmp_path)
    assert code == 1
    (reason,) = drift_reasons(verdict)
    assert reason["blocking"] and reason["slice"] == "DT-1"
    assert "DT-1 no longer states 7 ngày (it now states 10 ngày)" in reason["message"]
    # q06 also expects DT-9, which still says 7 ngày: not drifted. q07 expects no number.
    assert reason["value"] == ["q01", "q50", "q56", "q64"]
    assert "q01" in reason["message"] and "1 holdout case" in reason["message"]
    assert "q08" not in reason["message"]          # the holdout case is counted, never named
    assert "BLOCK policy drift: DT-1" in out
    assert "| DT-1 | 7 ngày | 10 ngày | q01, q06, q07, q50, q56, q64, 1 holdout |" in report


def test_the_same_pr_with_the_cases_updated_passes_the_drift_rule(project, baseline, run_cli, tmp_path):
    change_dt1_to_10_days(project)
    update_case(project, "q01", "Trong 7 ngày", "Trong 10 ngày")
    update_case(project, "q01", 'must_include: ["7 ngày"]', 'must_include: ["10 ngày"]')
    _, verdict, _, _ = gate(run_cli, project, baseline, tmp_path)
    (reason,) = drift_reasons(verdict)
    assert "q01" not in reason["value"] and reason["value"] == ["q50", "q56", "q64"]

    for case_id in ("q50", "q56", "q64", "q08"):
        golden = (project / "golden.yaml").read_text(encoding="utf-8")
        block = golden[golden.index(f"  - id: {case_id}\n"):]
        block = block[:block.index("\n  - id: ")] if "\n  - id: " in block else block
        answer = re.search(r'expected_answer: "([^"]*)"', block).group(1)
        update_case(project, case_id, answer, answer.replace("7 ngày", "10 ngày", 1))
    bump_version(project, "v4 -> v5: DT-1 return window 7 -> 10 ngày")
    code, verdict, report, _ = gate(run_cli, project, baseline, tmp_path)
    assert drift_reasons(verdict) == []
    assert verdict["golden"]["section_changes"] == [
        {"section": "DT-1", "removed": ["7 ngày"], "added": ["10 ngày"],
         "cases": ["q01", "q06", "q07", "q08", "q50", "q56", "q64"]}]
    assert "Golden set changes (v4 → v5)" in report
    assert "v4 -&gt; v5: DT-1 return window 7 -&gt; 10 ngày" in report


def main_says(baseline: Path, tmp_path: Path, policy_drift: str) -> Path:
    """main's baseline as it would be had main's config set ``golden_checks.policy_drift``."""
    data = json.loads(baseline.read_text(encoding="utf-8"))
    data["config"]["golden_checks"]["policy_drift"] = policy_drift
    out = tmp_path / f"baseline-{policy_drift}.json"
    out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return out


def test_policy_drift_can_be_a_warning_or_off(project, baseline, run_cli, tmp_path):
    change_dt1_to_10_days(project)
    config = project / "rageval.yml"
    edit(config, "policy_drift: block", "policy_drift: warn")  # a second golden_checks: key would be an error
    # the PR alone cannot lower the severity: main's block applies, and the loosening is said
    _, verdict, _, _ = gate(run_cli, project, baseline, tmp_path)
    assert [r["blocking"] for r in drift_reasons(verdict)] == [True]
    assert [c["key"] for c in verdict["policy"]["loosened"]] == ["golden_checks.policy_drift"]
    _, verdict, _, _ = gate(run_cli, project, main_says(baseline, tmp_path, "warn"), tmp_path)
    assert [r["blocking"] for r in drift_reasons(verdict)] == [False]
    edit(config, "policy_drift: warn", "policy_drift: off")
    _, verdict, _, _ = gate(run_cli, project, main_says(baseline, tmp_path, "off"), tmp_path)
    assert drift_reasons(verdict) == [] and verdict["golden"]["section_changes"] == []


def test_a_reworded_section_with_the_same_numbers_is_not_drift():
    before = {"DT-1": {"sha256": "a", "numbers": ["7 ngày"]}}
    after = {"DT-1": {"sha256": "b", "numbers": ["7 ngày"]}}
    cases = {"q01": {"expected_sections": ["DT-1"], "numbers": ["7 ngày"], "tags": []}}
    assert lifecycle.policy_drift(before, after, cases) == ([], [])


def test_a_number_still_stated_by_another_expected_section_is_not_stale():
    before = {"DT-1": {"sha256": "a", "numbers": ["7 ngày"]}, "DT-9": {"sha256": "c", "numbers": ["7 ngày"]}}
    after = {"DT-1": {"sha256": "b", "numbers": ["10 ngày"]}, "DT-9": {"sha256": "c", "numbers": ["7 ngày"]}}
    cases = {"q06": {"expected_sections": ["DT-1", "DT-9"], "numbers": ["7 ngày"]},
             "q01": {"expected_sections": ["DT-1"], "numbers": ["7 ngày"]},
             "q02": {"expected_sections": ["DT-1"], "numbers": ["10 ngày"]}}
    changes, drifts = lifecycle.policy_drift(before, after, cases)
    assert [(c.section, c.removed, c.added, c.cases) for c in changes] == [
        ("DT-1", ("7 ngày",), ("10 ngày",), ("q06", "q01", "q02"))]
    assert [(d.case, d.stale) for d in drifts] == [("q01", ("7 ngày",))]


# --- version discipline ------------------------------------------------------------------------

def test_changed_golden_content_without_a_version_bump_fails_validate(project, baseline, run_cli):
    update_case(project, "q02", "bảo hành 12 tháng tại hãng", "bảo hành 24 tháng tại hãng")
    code, _, err = run_cli("validate", "--config", project / "rageval.yml", "--baseline", baseline, "--no-git")
    assert code == 2
    assert "golden.yaml: the cases changed since the baseline" in err
    assert "but `version` is still 4. Bump `version` and add a `changelog` line" in err

    bump_version(project, "v4 -> v5: q02 warranty")
    code, out, err = run_cli("validate", "--config", project / "rageval.yml", "--baseline", baseline, "--no-git")
    assert code == 0, err
    assert "version 5 is consistent with the baseline" in out


def test_comments_and_formatting_are_not_content(project, baseline, run_cli):
    edit(project / "golden.yaml", "  - id: q02\n", "  # a reviewer's note\n  - id: q02\n")
    code, _, err = run_cli("validate", "--config", project / "rageval.yml", "--baseline", baseline, "--no-git")
    assert code == 0, err


def test_a_case_id_reused_for_a_different_question_fails_validate(project, baseline, run_cli):
    update_case(project, "q02", "laptop moi nhan bi soc man hinh thi doi sao",
                "phí vận chuyển đơn hàng cồng kềnh tính thế nào")
    bump_version(project, "v4 -> v5: q02 replaced")
    code, _, err = run_cli("validate", "--config", project / "rageval.yml", "--baseline", baseline, "--no-git")
    assert code == 2
    assert "case id 'q02' is reused for a different question" in err
    assert "'laptop moi nhan bi soc man hinh thi doi sao'" in err


def test_fixing_a_typo_in_a_question_is_not_id_reuse():
    before = lifecycle.Reference("the baseline", 4, "a", {"q02": "laptop moi nhan bi soc man hinh thi doi sao"})
    after = lifecycle.Reference("this PR", 5, "b", {"q02": "laptop mới nhận bị sọc màn hình thì đổi sao"})
    assert lifecycle.version_problems(before, after, "golden.yaml") == []
    assert lifecycle.reused_ids([before], after, "golden.yaml") == []


def git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def test_version_discipline_against_git_history(project, run_cli, monkeypatch):
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    git(project, "init", "-q")
    git(project, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    git(project, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "golden v4")
    config = project / "rageval.yml"
    code, out, _ = run_cli("validate", "--config", config)
    assert code == 0 and "version 4 is consistent with git HEAD and the ids used in 1 commit of golden.yaml" in out

    update_case(project, "q02", "bảo hành 12 tháng tại hãng", "bảo hành 24 tháng tại hãng")
    code, _, err = run_cli("validate", "--config", config)
    assert code == 2 and "the cases changed since git HEAD" in err
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 0, err
    monkeypatch.setenv("GITHUB_BASE_REF", "main")          # a PR whose base was never fetched
    code, out, _ = run_cli("validate", "--config", config)
    assert code == 0 and "not checked against git: golden.yaml does not exist at origin/main" in out


def test_gate_blocks_a_golden_change_without_version_bump(project, baseline, run_cli, tmp_path):
    update_case(project, "q02", "bảo hành 12 tháng tại hãng", "bảo hành 24 tháng tại hãng")
    _, verdict, _, _ = gate(run_cli, project, baseline, tmp_path)
    (reason,) = [r for r in verdict["reasons"] if r["rule"] == "golden_version"]
    assert reason["blocking"] and "but `version` is still 4" in reason["message"]


# --- golden diff and holdout privacy -----------------------------------------------------------

def test_golden_diff_in_the_report_and_holdout_text_appears_nowhere(project, baseline, run_cli, tmp_path):
    golden = yaml.safe_load((project / "golden.yaml").read_text(encoding="utf-8"))
    holdout = [c for c in golden["cases"] if "holdout" in c.get("tags", [])]
    assert len(holdout) == 6
    # a holdout case goes pass→fail (its section loses its number) and another holdout case changes
    q08 = next(c for c in holdout if c["id"] == "q08")
    change_dt1_to_10_days(project)
    other = next(c for c in holdout if c["id"] != "q08")
    update_case(project, other["id"], other["expected_answer"], other["expected_answer"] + " ")
    update_case(project, "q02", "bảo hành 12 tháng tại hãng", "bảo hành 12 tháng tại hãng.")
    code, out, err = run_cli("golden", "add", "--config", project / "rageval.yml",
                             "--question", "Tôi nhận hàng hôm qua, đổi size áo khoác được không?",
                             "--expected-sections", "DT-9", "--source", "incident-2026-11-29", "--tags", "pr")
    assert code == 0, err
    code, out, err = run_cli("golden", "add", "--config", project / "rageval.yml",
                             "--question", "Khách hỏi về hạn đổi trả khi nhận hàng trễ vì đi công tác",
                             "--expected-sections", "DT-1", "--source", "incident-2026-11-30",
                             "--tags", "holdout")
    assert code == 0, err
    code, verdict, report, _ = gate(run_cli, project, baseline, tmp_path)
    assert code == 1
    assert verdict["golden"]["diff"] == {"added": ["q124", "q125"], "removed": [],
                                         "changed": [{"id": "q02", "fields": ["expected_answer"]},
                                                     {"id": other["id"], "fields": ["expected_answer"]}]}
    assert "Golden set changes (v4 → v6)" in report
    assert "v5 -&gt; v6: + 1 holdout case (incident-2026-11-30)" in report
    assert "**Added (2):** q124 “Tôi nhận hàng hôm qua, đổi size áo khoác được không?”; 1 holdout" in report
    assert "**Changed (2):** q02 (expected_answer); 1 holdout" in report
    assert "q08" in verdict["pass_to_fail"] or any("holdout" in r["message"] for r in verdict["reasons"])
    for case in [*holdout, {"question": "Khách hỏi về hạn đổi trả khi nhận hàng trễ vì đi công tác",
                            "expected_answer": "", "id": "q125"}]:
        assert case["question"] not in report
        if case["expected_answer"]:
            assert case["expected_answer"] not in report
        assert re.search(rf"\b{case['id']}\b", report) is None, case["id"]
    assert q08["question"] not in out


# --- leaks -------------------------------------------------------------------------------------

def test_a_golden_question_in_the_few_shot_file_is_a_warning_naming_file_and_line(project, run_cli, tmp_path):
    shots = project / "few-shot.md"
    shots.write_text("Ví dụ 1\nKhách: Phí ship đơn 300k là bao nhiêu?\n"
                     # q01 without diacritics and with different punctuation: still the same question
                     "Khách: mua ao mac khong vua thi duoc tra trong may ngay\nTrả lời: Trong 7 ngày.\n",
                     encoding="utf-8")
    config = project / "rageval.yml"
    edit(config, "golden_checks: {policy_drift: block, leaks: warn, min_cases_per_section: 2}",
         "golden_checks: {leak_files: [few-shot.md]}")
    code, out, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 0, err
    assert "warning: leak: the question of q01 appears in few-shot.md line 3 (100% of its word 3-grams)" in out

    edit(config, "golden_checks: {leak_files: [few-shot.md]}", "golden_checks: {leak_files: [few-shot.md], leaks: fail}")
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 2 and "q01 appears in few-shot.md line 3" in err and "TIP golden_checks.leaks is 'fail'" in err

    code, out, _ = run_cli("run", config, "--subset", "pr")
    assert code == 0
    assert "warning: 1 golden question found in few-shot.md line 3 (leak check; details: rageval validate)" in out
    verdict_path = tmp_path / "v.json"
    code, _, err = run_cli("gate", "--config", config, "--subset", "pr", "--out", verdict_path)
    leaks = [r for r in json.loads(verdict_path.read_text())["reasons"] if r["rule"] == "leak"]
    assert code == 1 and [r["case"] for r in leaks] == ["q01"] and leaks[0]["blocking"]


def test_a_question_pasted_into_the_corpus_names_the_section(project, run_cli):
    edit(project / "docs" / "van-chuyen.md", "## VC-2 ",
         "Câu hỏi thường gặp: laptop moi nhan bi soc man hinh thi doi sao?\n\n## VC-2 ")
    code, out, _ = run_cli("validate", "--config", project / "rageval.yml", "--no-git")
    assert code == 0
    assert "warning: leak: the question of q02 appears in corpus VC-1 (van-chuyen)" in out


def test_find_leaks_threshold_and_short_questions():
    cases = [Case("a", "đổi trả trong mấy ngày vậy shop", ("DT-1",)), Case("b", "phí ship?", ("VC-1",))]
    places = [("p.txt", "khach hoi: doi tra trong may ngay\nphí ship?", True)]
    # a has 5 word 3-grams, 3 of them in p.txt: 60%
    assert [(x.case, x.overlap) for x in lifecycle.find_leaks(cases, places, 0.6)] == [("a", 0.6)]
    assert lifecycle.find_leaks(cases, places, 0.8) == []          # "b" is too short to look for


# --- coverage ----------------------------------------------------------------------------------

def test_coverage_per_section_and_slice_matches_an_independent_count(project, run_cli):
    config = project / "rageval.yml"
    edit(config, "min_cases_per_section: 2}", "min_cases_per_section: 3}")
    code, out, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 0, err
    golden = yaml.safe_load((project / "golden.yaml").read_text(encoding="utf-8"))
    per_section = Counter(s for c in golden["cases"] for s in c.get("expected_sections") or [])
    thin = sorted(s for s, n in per_section.items() if n < 3)
    assert thin == ["BH-8", "TV-3"]
    assert f"coverage: sections with fewer than 3 cases: {', '.join(thin)}" in out
    # a gated slice no case has is an error (a typo would never gate), naming the labels there are
    edit(config, 'slices: {"type=injection": {floors: {pass_rate: 0.75}}}',
         'slices: {"type=injection": {floors: {pass_rate: 0.75}}, "type=chitchat": {floors: {pass_rate: 0.5}}}')
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 2 and "no case of golden.yaml has the slice label 'type=chitchat'" in err
    assert f"DT-1 {per_section['DT-1']}," in out and "type=injection 6" in out


# --- logs → candidates (the CLI; the scrubber's tables are in test_candidates.py) ----------------

def test_golden_candidates_from_logs_leaves_no_personal_data(project, run_cli, tmp_path):
    logs = ROOT / "tests" / "data" / "chat-logs.jsonl"
    names = tmp_path / "names.txt"
    names.write_text("Trần Thị Bích\nNguyễn Văn An\n", encoding="utf-8")
    out = tmp_path / "candidates.yaml"
    code, stdout, err = run_cli("golden", "candidates", "--config", project / "rageval.yml", "--logs", logs,
                                "--names", names, "--out", out, "-n", "60")
    assert code == 0, err
    assert "61 messages →" in stdout and f"wrote {out}" in stdout
    text = out.read_text(encoding="utf-8")
    for secret in ("0912 345 678", "912345678", "0987.654.321", "903 123 456", "415 555 0132",
                   "nguyen.van.an@gmail.com", "lethihoa88@yahoo.com", "DH-2026-0012345", "dh-2026-0012399",
                   "Trần Thị Bích", "nguyen van an"):
        assert secret.casefold() not in text.casefold(), secret
    questions = [c["question"] for c in yaml.safe_load(text)["cases"]]
    # the customers' own spelling is kept, only the personal data is replaced
    assert "ao mac ko vua thi tra dc ko, sdt em <PHONE>" in questions
    assert "Em mua áo mặc không vừa, trả lại được không shop? Đơn <ORDER> ạ" in questions
    # a question already in the golden set is not proposed again
    golden_questions = {c["question"] for c in yaml.safe_load((project / "golden.yaml").read_text())["cases"]}
    assert not golden_questions & set(questions)


def test_coverage_in_the_pr_comment_lists_thin_sections_and_stays_bounded(project, baseline, run_cli, tmp_path):
    config = project / "rageval.yml"
    edit(config, "min_cases_per_section: 2}", "min_cases_per_section: 3}")
    _, verdict, report, _ = gate(run_cli, project, baseline, tmp_path)
    assert "<details><summary>Coverage: 32/32 sections have a case; 2 with fewer than 3</summary>" in report
    assert "Fewer than 3 cases: BH-8, TV-3." in report

    # ten thousand sections: the comment names the first 60 and counts the rest
    sections = {f"S-{i}": i % 3 for i in range(10_000)}
    verdict["golden"]["coverage"] = {"by_section": sections, "by_slice": {}, "min_cases": 2, "empty_slices": [],
                                     "thin_sections": [s for s, n in sections.items() if n < 2]}
    markdown = render_markdown(Verdict.read(verdict), load_result(baseline), load_result(baseline),
                               ReportConfig())
    assert "Coverage: 6666/10000 sections have a case; 6667 with fewer than 2" in markdown
    assert "S-59 2 …and 9940 more." in markdown and "S-60 " not in markdown
    assert "…and 6607 more." in markdown and len(markdown) < 20_000


def remove_case(project: Path, case_id: str) -> None:
    golden = project / "golden.yaml"
    text = golden.read_text(encoding="utf-8")
    start = text.index(f"  - id: {case_id}\n")
    end = text.find("\n  - id: ", start + 1)
    golden.write_text(text[:start] + (text[end + 1:] if end != -1 else ""), encoding="utf-8")


def commit(project: Path, message: str) -> None:
    ident = ("-c", "user.name=t", "-c", "user.email=t@example.com")
    git(project, *ident, "add", "-A")
    git(project, *ident, "commit", "-qm", message)


def test_an_id_retired_in_an_earlier_commit_is_not_reused(project, run_cli, monkeypatch):
    monkeypatch.delenv("GITHUB_BASE_REF", raising=False)
    git(project, "init", "-q")
    commit(project, "golden v4")
    remove_case(project, "q123")                 # the newest case is retired in v5
    bump_version(project, "v4 -> v5: - q123")
    commit(project, "golden v5")
    config = project / "rageval.yml"

    # `golden add` does not hand q123 out again: HEAD no longer has it, history does
    code, out, err = run_cli("golden", "add", config, "--question", "Đổi size giày cần giữ hộp không?",
                             "--expected-sections", "DT-9", "--source", "incident-2026-11-29")
    assert code == 0, err
    assert out.startswith("added q124 to golden.yaml; version 5 → 6")
    git(project, "checkout", "-q", "--", "golden.yaml")

    # a hand edit that brings q123 back for another question fails validate, naming the old commit
    golden = project / "golden.yaml"
    golden.write_text(golden.read_text(encoding="utf-8").replace("version: 5", "version: 6")
                      + '  - id: q123\n    question: "Đổi size giày cần giữ hộp không?"\n'
                        '    expected_sections: [DT-9]\n', encoding="utf-8")
    code, _, err = run_cli("validate", config)
    assert code == 2
    assert re.search(r"case id 'q123' is reused for a different question: at git [0-9a-f]{7,} \(v4\) it asked", err)


def test_validate_names_at_most_100_sections_but_every_thin_one():
    cov = lifecycle.Coverage({f"S-{i}": i % 3 for i in range(250)}, {"type=lookup": 4},
                             tuple(f"S-{i}" for i in range(250) if i % 3 < 2), (), 2)
    first, slices, thin = lifecycle.coverage_lines(cov)
    assert first.startswith("coverage: 166/250 sections have a case; cases per section: S-0 0, S-1 1, S-2 2,")
    assert first.endswith("S-99 0 …and 150 more (all in golden_checks.coverage of `rageval run --out`)")
    assert slices == "coverage: cases per slice: type=lookup 4"
    assert thin.count("S-") == 167 and thin.endswith("S-246, S-247, S-249")


def test_reused_ids_in_the_pr_comment_do_not_quote_questions_or_name_holdout_cases():
    before = lifecycle.Reference("the baseline", 4, "a", {"q02": "laptop moi nhan bi soc man hinh thi doi sao",
                                                          "q08": "nhan hang hom thu 2 thi den khi nao het han"},
                                 frozenset({"q08"}))
    after = lifecycle.Reference("this PR", 5, "b", {"q02": "phí vận chuyển đơn cồng kềnh tính thế nào",
                                                    "q08": "thành viên Plus được mấy mã freeship"}, frozenset({"q08"}))
    assert lifecycle.reused_ids([before], after, "golden.yaml", quote=False) == [
        "golden.yaml: case id 'q02' is reused for a different question: at the baseline (v4) it asked another "
        "question. Baselines and old reports refer to cases by id; give the new question a new id.",
        "golden.yaml: a holdout case id is reused for a different question (details hidden). "
        "Give the new question a new id."]

"""The golden file as committed in git (rageval/golden/history.py), read directly; the CLI's use of
it (validate, golden add) is in test_lifecycle.py."""

import subprocess

import pytest

from rageval.golden.history import default_git_ref, git_history, reference_from_git

GOLDEN = """\
dataset: shop
version: {version}
changelog: "v{version}"
cases:
  - id: q01
    question: "{question}"
    expected_sections: [DT-1]
"""


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd, check=True,
                   capture_output=True, timeout=30)


def commit(repo, text, message):
    (repo / "golden.yaml").write_text(text, encoding="utf-8")
    git(repo, "add", "golden.yaml")
    git(repo, "commit", "-qm", message)


def test_default_ref_is_the_pull_requests_base_else_head(monkeypatch):
    monkeypatch.setenv("GITHUB_BASE_REF", "from-the-environment")      # read by the CLI, never here
    assert default_git_ref("main") == "origin/main"
    assert default_git_ref("") == "HEAD"
    assert default_git_ref(None) == "HEAD"


def test_outside_a_work_tree_says_why_instead_of_raising(tmp_path):
    golden = tmp_path / "golden.yaml"
    golden.write_text(GOLDEN.format(version=1, question="a"), encoding="utf-8")
    if subprocess.run(["git", "rev-parse"], cwd=tmp_path, capture_output=True).returncode == 0:
        pytest.skip("the temporary folder is inside a git work tree on this machine")
    assert reference_from_git(golden, "HEAD") == (None, f"{tmp_path.resolve()} is not in a git work tree")
    assert git_history(golden) == ([], f"{tmp_path.resolve()} is not in a git work tree")


def test_reference_at_a_ref_and_history_newest_first_skipping_what_does_not_load(tmp_path):
    git(tmp_path, "init", "-q")
    commit(tmp_path, GOLDEN.format(version=1, question="đổi trả mấy ngày"), "v1")
    commit(tmp_path, "cases: [", "broken")
    commit(tmp_path, GOLDEN.format(version=2, question="phí ship bao nhiêu"), "v2")
    golden = tmp_path / "golden.yaml"

    ref, why = reference_from_git(golden, "HEAD~2")
    assert why == "" and ref.label == "git HEAD~2" and ref.version == 1
    assert dict(ref.questions) == {"q01": "đổi trả mấy ngày"}
    ref, why = reference_from_git(golden, "HEAD~1")
    assert ref is None and why.startswith("the version at HEAD~1 does not load")
    assert reference_from_git(golden, "no-such-ref") == (None, "golden.yaml does not exist at no-such-ref")

    refs, why = git_history(golden)
    assert why == "" and [r.version for r in refs] == [2, 1]
    assert [dict(r.questions) for r in refs] == [{"q01": "phí ship bao nhiêu"}, {"q01": "đổi trả mấy ngày"}]
    assert len(git_history(golden, max_commits=1)[0]) == 1

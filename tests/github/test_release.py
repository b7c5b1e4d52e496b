"""Issue #23 §4: the release workflow publishes the image and points the release at it.

The steps that decide what a release is run here as the runner runs a `run:` step (bash with
``-e -o pipefail``, the step's ``env:``), in a scratch clone with a bare repository as ``origin``:
the version check, the rewrite of action.yml's ``runs.image`` and the release commit with its
tags. The Docker build and push are not run (no registry here); their digest is given.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from action_harness import ROOT

RELEASE = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
JOB = RELEASE["jobs"]["release"]
DIGEST = "ghcr.io/acme/rag-eval-gate@sha256:" + "ab" * 32

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def step(name_start: str) -> dict:
    (found,) = [s for s in JOB["steps"] if s.get("name", "").startswith(name_start)]
    return found


def run_step(found: dict, cwd: Path, env: dict[str, str], outputs: Path) -> subprocess.CompletedProcess:
    """The step's script as the runner runs it; ``${{ … }}`` never appears in a script (only in env)."""
    script = found["run"]
    assert "${{" not in script, "expressions belong in env:, never inline in a script"
    outputs.write_text("", encoding="utf-8")
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                          env={"PATH": os.environ["PATH"], "HOME": str(cwd), "GITHUB_OUTPUT": str(outputs),
                               "GITHUB_STEP_SUMMARY": str(outputs.with_suffix(".md")), **env},
                          capture_output=True, text=True, timeout=60)


def test_the_workflow_asks_for_a_version_and_only_the_permissions_it_needs():
    on = RELEASE.get("on", RELEASE.get(True))
    assert list(on) == ["workflow_dispatch"] and on["workflow_dispatch"]["inputs"]["version"]["required"]
    assert RELEASE["permissions"] == {}
    assert JOB["permissions"] == {"contents": "write", "packages": "write"}
    names = [s.get("name", s.get("uses")) for s in JOB["steps"]]
    assert names.index("Push the image") < names.index("Point action.yml at the published image") < names.index(
        "Release commit, vX.Y.Z and the moved vX tag")


@needs_git
@pytest.mark.parametrize(("version", "ok"), [("v1.2.0", True), ("1.2.0", False), ("v1.2", False), ("v1.2.0-rc1", False)])
def test_the_version_check(tmp_path, version, ok):
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    out = tmp_path / "out"
    proc = run_step(step("Check the version"), tmp_path / "repo",
                    {"VERSION": version, "GITHUB_REPOSITORY": "Acme/Rag-Eval-Gate"}, out)
    assert (proc.returncode == 0) is ok, proc.stdout + proc.stderr
    if ok:
        assert out.read_text(encoding="utf-8").split() == ["major=v1", "number=1.2.0",
                                                            "image=ghcr.io/acme/rag-eval-gate"]
    else:
        assert "::error::version must look like v1.2.0" in proc.stdout


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@needs_git
def test_the_release_commit_runs_the_published_image_and_main_keeps_the_dockerfile(tmp_path):
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    _git(tmp_path, "init", "-q", "-b", "main", str(work))
    shutil.copy(ROOT / "action.yml", work / "action.yml")
    _git(work, "add", "action.yml")
    _git(work, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "main")
    _git(work, "remote", "add", "origin", str(origin))
    _git(work, "push", "-q", "origin", "main")
    main_sha = _git(work, "rev-parse", "HEAD")
    out = tmp_path / "out"

    proc = run_step(step("Point action.yml at the published image"), work, {"IMAGE_REF": DIGEST}, out)
    assert proc.returncode == 0, proc.stderr
    proc = run_step(step("Release commit"), work, {"VERSION": "v1.2.0", "MAJOR": "v1", "IMAGE_REF": DIGEST}, out)
    assert proc.returncode == 0, proc.stderr

    before = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for tag in ("v1.2.0", "v1"):
        released = yaml.safe_load(_git(origin, "show", f"{tag}:action.yml"))
        assert released["runs"] == {"using": "docker", "image": f"docker://{DIGEST}"}
        assert {k: v for k, v in released.items() if k != "runs"} == {k: v for k, v in before.items() if k != "runs"}
        assert _git(origin, "rev-parse", f"{tag}^{{commit}}^") == main_sha     # one commit on top of main
    assert _git(origin, "rev-parse", "main") == main_sha                     # main still builds the Dockerfile
    assert yaml.safe_load(_git(origin, "show", "main:action.yml"))["runs"]["image"] == "Dockerfile"

    # a second release moves v1 and leaves v1.2.0 where it was
    _git(work, "checkout", "-q", main_sha)
    run_step(step("Point action.yml at the published image"), work, {"IMAGE_REF": DIGEST.replace("ab", "cd")}, out)
    proc = run_step(step("Release commit"), work, {"VERSION": "v1.3.0", "MAJOR": "v1",
                                                   "IMAGE_REF": DIGEST.replace("ab", "cd")}, out)
    assert proc.returncode == 0, proc.stderr
    assert _git(origin, "rev-parse", "v1^{commit}") == _git(origin, "rev-parse", "v1.3.0^{commit}")
    assert _git(origin, "rev-parse", "v1.2.0^{commit}") != _git(origin, "rev-parse", "v1^{commit}")


def test_the_rewrite_refuses_an_action_yml_that_no_longer_builds_the_dockerfile(tmp_path):
    (tmp_path / "action.yml").write_text(re.sub(r"image: Dockerfile", "image: docker://elsewhere:1",
                                                (ROOT / "action.yml").read_text(encoding="utf-8")), encoding="utf-8")
    proc = run_step(step("Point action.yml at the published image"), tmp_path, {"IMAGE_REF": DIGEST}, tmp_path / "o")
    assert proc.returncode != 0
    assert "docker://elsewhere:1" in (tmp_path / "action.yml").read_text(encoding="utf-8")

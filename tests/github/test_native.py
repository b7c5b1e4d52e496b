"""The native mode (native/action.yml, a composite action) end to end: its own command lines, run
the way the runner runs a composite action (`composite.run_composite`), pip-install rag-eval-gate
from a copy of the action's files into a job's Python that holds the team's own app (`myapp`),
then gate the seed article's incident against a fake GitHub: the 800-token traces, served by the
team's adapter, are blocked against main's 200-token baseline artifact, with the comment and the
commit status — and the decision is the Docker action's, byte for byte."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import seed_data
import setuptools
import yaml
from action_harness import (
    ARTIFACT,
    HEAD_SHA,
    ROOT,
    TOKEN,
    make_env,
    pr_payload,
    run_action,
)
from composite import job_path, run_composite
from github_server import FakeGitHub
from runner_log import RunnerLog

from rageval.config import load_config
from rageval.files import write_json
from rageval.flow import run_repeats
from rageval.github.comment import comment_marker
from rageval.pipeline.runner import prepare

HERE = Path(__file__).parent
APP = "app: {type: command, command: [python, -m, myapp.eval_adapter]}"


def _pip_args() -> str:
    """Offline when this test environment's setuptools can build the package itself (the build
    backend needs setuptools ≥ 77 for the SPDX `license` field); otherwise pip builds in an
    isolated environment and fetches setuptools, as in a user's job."""
    major = int(setuptools.__version__.split(".")[0])
    return "--no-index --no-build-isolation" if major >= 77 else ""


@pytest.fixture(scope="session")
def action_checkout(tmp_path_factory) -> Path:
    """The action's files as the runner downloads them for `uses: org/rag-eval-gate/native@v1`."""
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    dest = tmp_path_factory.mktemp("_actions") / "org" / "rag-eval-gate" / "v1"
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


@pytest.fixture(scope="session")
def job_python(tmp_path_factory) -> Path:
    """A job's Python: a fresh venv holding the team's app (myapp); third-party packages come from
    this test environment (linked, without rageval), so the install needs no download."""
    root = tmp_path_factory.mktemp("job")
    deps = root / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("rageval", "__editable__", "_rageval")):
            (deps / entry.name).symlink_to(entry)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    (purelib / "_job_deps.pth").write_text(str(deps) + "\n", encoding="utf-8")
    shutil.copytree(HERE / "myapp", purelib / "myapp")
    return python


def _baseline_zip(config: Path) -> bytes:
    buf, result = io.BytesIO(), run_repeats(prepare(load_config(config), env={}), 1)
    tmp = config.parent / "baseline.json"
    write_json(tmp, result)
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(tmp, "rageval-baseline.json")
    tmp.unlink()
    return buf.getvalue()


def test_native_inputs_and_outputs_are_the_docker_actions_plus_python_and_pip_args():
    docker = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    native = yaml.safe_load((ROOT / "native" / "action.yml").read_text(encoding="utf-8"))
    assert set(native["inputs"]) == set(docker["inputs"]) | {"python", "pip-args"}
    for name, spec in docker["inputs"].items():
        assert str(native["inputs"][name]["default"]) == str(spec["default"]), name
    assert set(native["outputs"]) == set(docker["outputs"])
    gate = next(s for s in native["runs"]["steps"] if s.get("id") == "gate")
    passed = {k.removeprefix("INPUT_").lower().replace("_", "-") for k in gate["env"] if k.startswith("INPUT_")}
    assert passed == set(docker["inputs"])   # every input reaches the entry point


def test_native_mode_blocks_the_seed_incident_with_the_teams_own_app(tmp_path, action_checkout, job_python):
    ws = tmp_path / "ws"
    paths = seed_data.write_project(ws / "seed")
    config = ws / "seed" / "rageval.yml"
    config.write_text(paths["chunk-200"].read_text(encoding="utf-8").replace(
        "app: {type: replay, path: chunk-200.jsonl}", APP), encoding="utf-8")
    assert APP in config.read_text(encoding="utf-8")
    job_env = {k: v for k, v in make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge").items()
               if not k.startswith("INPUT_")}
    job_env.update({"PATH": job_path(job_python.parent), "HOME": str(tmp_path), "GITHUB_TOKEN": TOKEN,
                    "ACTIONS_RUNTIME_TOKEN": "runtime-secret", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                    "MYAPP_TRACES": str(ws / "seed" / "chunk-800.jsonl"),      # the incident's answers
                    "MYAPP_ENV_DUMP": str(tmp_path / "app-env.json")})
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_artifact(ARTIFACT, zip_bytes=_baseline_zip(paths["chunk-200"]), branch="main")
        job_env["GITHUB_API_URL"] = gh.api_url
        run = run_composite(action_checkout / "native", {
            "config": "seed/rageval.yml", "python": str(job_python), "pip-args": _pip_args(),
            "status-context": "rag-eval", "results-path": "out/native.json"}, job_env, tmp_path)
        comments = [c["body"] for c in gh.comments.get(7, [])]
        states = [s["state"] for s in gh.statuses.get(HEAD_SHA, [])]

    assert run.code == 1, run.out[-3000:]
    assert run.outputs == {"verdict": "fail", "results": "out/native.json", "report": "out/native.md",
                           "html": "out/native.html", "pass-to-fail": "q01,q03"}      # the article: q01 says 30 days, q03 drops "làm việc"
    report = (ws / "out" / "native.md").read_text(encoding="utf-8")
    assert comments == [f"{comment_marker('seed/rageval.yml')}\n{report}"]
    assert states == ["pending", "failure"]
    log = RunnerLog().feed(run.out)
    assert log.masks == [TOKEN] and not any(TOKEN in line for line in log.shown)
    where = subprocess.run([str(job_python), "-c", "import rageval; print(rageval.__file__)"], capture_output=True,
                           text=True, check=True, timeout=60, cwd=tmp_path).stdout
    assert str(job_python.parent.parent) in where          # installed into the job's Python
    seen = set(json.loads((tmp_path / "app-env.json").read_text(encoding="utf-8")))
    assert not seen & {"GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"} and not any(k.startswith("INPUT_") for k in seen)

    # the Docker action's entry point on the same event decides the same, with the same report
    env = make_env(ws, tmp_path, None, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config="seed/rageval.yml", baseline_path="seed/main.json", results_path="out/docker.json",
                   comment="false")
    write_json(ws / "seed" / "main.json", run_repeats(prepare(load_config(paths["chunk-200"]), env={}), 1))
    env.update({k: job_env[k] for k in ("PATH", "MYAPP_TRACES")})
    docker = run_action(env)
    assert (docker.code, docker.outputs["verdict"], docker.outputs["pass-to-fail"]) == (1, "fail", "q01,q03")
    strip = [line for line in report.splitlines() if " s (index " not in line]
    assert [line for line in docker.file("out/docker.md").splitlines() if " s (index " not in line] == strip
    assert os.path.exists(ws / "out" / "native.json")

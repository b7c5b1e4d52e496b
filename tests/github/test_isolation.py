"""Issue #23 §1: the evaluated app can neither speak to the runner nor read the token.

A hostile command app (``hostile_app.py``) writes workflow commands to its stderr (``::error::``,
``::add-mask::``, ``::stop-commands::X`` — which, run, would switch off the action's own later
``::endgroup::`` and its final "blocked" annotation), reads ``/proc/<pid>/environ`` and ``cmdline``
of every ancestor, writes into its parent's stdout and into the runner's GITHUB_OUTPUT. The job log
is parsed with the runner's rules (`runner_log`). Three ways to run it: in-process; as the entry
point's child process, with the token in the entry point's initial environment (what the runner
does in native and Docker mode); and, as root with ``RAGEVAL_APP_USER`` (the Docker image's
setting), with the app run as an unprivileged user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from action_fixtures import baseline, baseline_zip, gh, ws  # noqa: F401 - fixtures
from action_harness import ROOT, TOKEN, Run, make_env, pr_payload, run_action

from rageval.github.workflow import neutralise
from rageval.golden.set import load_golden

HERE = Path(__file__).parent
SYSTEM_PYTHON = Path("/usr/bin/python3")
NOBODY = "65534:65534"
FORGED_LINES = ("::error::FORGED-stderr", "::add-mask::RAG", "##[warning]FORGED-old", "::stop-commands::X",
                "  ::error title=t::FORGED-after-stop")


@pytest.fixture
def hostile_ws(ws, baseline):
    """A workspace every user may read (the app may run as another user), holding the demo, the
    hostile app and its traces (three numeric cases answered without their number: blocked), and a
    folder the app may write its report to."""
    root = Path(tempfile.mkdtemp(prefix="rageval-hostile-"))
    root.chmod(0o755)
    shutil.copytree(ws / "examples", root / "examples")
    shutil.copytree(ws / "baseline", root / "baseline")
    folder = root / "examples" / "banhang"
    shutil.copy(HERE / "hostile_app.py", folder / "hostile_app.py")
    pr_ids = {c.id for c in load_golden(folder / "golden.yaml").subset("pr").cases}
    numeric = [c.id for c in baseline.cases if c.id in pr_ids and c.passed and c.status("numbers") == "pass"][:3]
    with (folder / "hostile.jsonl").open("w", encoding="utf-8") as fh:
        for case in baseline.cases:
            answer = "Vui lòng liên hệ bộ phận hỗ trợ." if case.id in numeric else case.answer
            fh.write(json.dumps({"id": case.id, "answer": answer,
                                 "retrieved": [r.to_dict() for r in case.retrieved or ()]}, ensure_ascii=False) + "\n")
    report = root / "report"
    report.mkdir()
    report.chmod(0o777)
    for path in root.rglob("*"):
        path.chmod(0o777 if path == report else 0o755 if path.is_dir() else 0o644)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _config(root: Path, python: str) -> str:
    folder = root / "examples" / "banhang"
    data = yaml.safe_load((folder / "rageval-lenient.yml").read_text(encoding="utf-8"))
    data["app"] = {"type": "command", "command": [python, "hostile_app.py"]}
    data["gate"]["zero_tolerance"] = ["numbers"]
    (folder / "rageval-hostile.yml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    (folder / "rageval-hostile.yml").chmod(0o644)
    return "examples/banhang/rageval-hostile.yml"


def _env(root: Path, tmp_path: Path, gh, python: str) -> dict[str, str]:
    env = make_env(root, tmp_path, gh, "pull_request", pr_payload(), "refs/pull/7/merge",
                   config=_config(root, python), baseline_path="baseline/main.json", results_path="out/pr.json")
    env.update({"HOSTILE_TRACES": str(root / "examples" / "banhang" / "hostile.jsonl"),
                "HOSTILE_REPORT": str(root / "report"), "HOSTILE_NEEDLE": TOKEN,
                "HOSTILE_FILES": env["GITHUB_OUTPUT"], "GITHUB_TOKEN": TOKEN,
                "ACTIONS_RUNTIME_TOKEN": "runtime-SECRET"})
    os.chmod(env["GITHUB_OUTPUT"], 0o644)
    return env


def _reports(root: Path) -> list[dict]:
    found = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((root / "report").glob("report-*.json"))]
    assert found, "the hostile app did not run"
    return found


def _assert_runner_was_not_steered(run: Run, gh) -> None:
    log = run.runner
    assert [c.line for c in log.commands if "FORGED" in c.line or "FORGED" in c.data] == []
    assert log.masks == [TOKEN]                                   # not "RAG"
    assert log.stop_token is None                                 # every block was closed
    assert len(log.named("group")) == len(log.named("endgroup")) >= 1
    assert "blocked" in log.named("error")[-1].data               # the final annotation ran
    shown = "\n".join(log.shown)
    for line in FORGED_LINES:                                     # printed, marked as the app's, inert
        assert f"app stderr | {neutralise(line)}" in shown
    assert run.code == 1 and run.outputs["verdict"] == "fail"
    texts = [run.out, run.err, run.summary, run.file("out/pr.json"), run.file("out/pr.md"),
             Path(run.env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"),
             *(c["body"] for cs in gh.comments.values() for c in cs)]
    for text in texts:
        assert TOKEN[::-1] not in text


def test_app_stderr_runs_no_workflow_command_in_process(hostile_ws, tmp_path, gh):
    run = run_action(_env(hostile_ws, tmp_path, gh, sys.executable))
    _assert_runner_was_not_steered(run, gh)
    for report in _reports(hostile_ws):        # one per process of the pool (app.concurrency)
        assert not [k for k in report["env_names"] if k.startswith("INPUT_") or k in (
            "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV")]


IS_ROOT = os.name == "posix" and os.geteuid() == 0
#: root without any capability is, for /proc, one more ordinary user (what a runner's uid 1001 is)
NO_CAPABILITIES = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]


def _entrypoint(env: dict[str, str], root: Path, *, prefix: tuple[str, ...] | list[str] = ()) -> Run:
    env = {**env, "PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([*prefix, sys.executable, str(ROOT / "entrypoint.py")], env=env, cwd=root,
                          capture_output=True, text=True, timeout=180)
    return Run(proc.returncode, proc.stdout, proc.stderr, env)


@pytest.mark.skipif(IS_ROOT and not shutil.which("setpriv"), reason="as root, needs setpriv to drop capabilities")
def test_no_process_the_app_can_read_holds_the_token(hostile_ws, tmp_path, gh):
    """The same user runs the action and the app, not a privileged one (native mode on a runner;
    here as root, without capabilities): the entry point re-started itself without the token and
    made itself non-dumpable, so its /proc environ and open files (the job log) are closed to the
    app, its cmdline holds no token, and the app's own environment has none either."""
    run = _entrypoint(_env(hostile_ws, tmp_path, gh, sys.executable), hostile_ws,
                      prefix=NO_CAPABILITIES if IS_ROOT else ())
    assert run.err == "", run.err[-2000:]
    _assert_runner_was_not_steered(run, gh)
    for report in _reports(hostile_ws):
        parent = report["ancestors"][0]
        assert parent["environ"] == "PermissionError" and parent["cmdline"] == "read"
        assert report["parent_stdout"] == "PermissionError"
        assert all(not a.get("environ_has_token") and not a.get("cmdline_has_token") for a in report["ancestors"])
    assert TOKEN not in run.out.split("\n", 1)[1]


@pytest.mark.skipif(not IS_ROOT or not SYSTEM_PYTHON.exists(),
                    reason="running the app as another user needs root and /usr/bin/python3")
def test_as_root_the_app_runs_as_the_images_unprivileged_user(hostile_ws, tmp_path, gh):
    """The Docker image's setting: the app runs as another user, with no groups and a home of its
    own; it can read no ancestor's environment, write neither the job log nor GITHUB_OUTPUT."""
    env = _env(hostile_ws, tmp_path, gh, str(SYSTEM_PYTHON))
    env["RAGEVAL_APP_USER"] = NOBODY
    run = _entrypoint(env, hostile_ws)
    assert run.err == "", run.err[-2000:]
    _assert_runner_was_not_steered(run, gh)
    assert "verdict=pass" not in Path(run.env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    for report in _reports(hostile_ws):
        assert (report["uid"], report["gid"], report["groups"]) == (65534, 65534, [])
        assert report["ancestors"][0]["environ"] == "PermissionError"
        assert report["parent_stdout"] == "PermissionError"
        assert set(report["files"].values()) == {"PermissionError"}   # GITHUB_OUTPUT belongs to the runner
        assert report["home"].startswith(tempfile.gettempdir()) and "rageval-app-home-" in report["home"]
        assert not Path(report["home"]).exists()                  # removed when the run ended
        assert "RAGEVAL_APP_USER" not in report["env_names"]


REEXEC_PROBE = """\
import json, os, sys
from rageval.github.sandbox import drop_secrets_and_reexec, recover_secrets
drop_secrets_and_reexec(os.environ, sys.orig_argv, sys.executable)
env = recover_secrets(os.environ)
token = env.get("INPUT_GITHUB-TOKEN", "")
with open("/proc/self/environ", "rb") as fh:
    environ = fh.read()
with open("/proc/self/cmdline", "rb") as fh:
    cmdline = fh.read()
print(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:], "token": token,
                  "in_environ": bool(token) and token.encode() in environ,
                  "in_cmdline": bool(token) and token.encode() in cmdline,
                  "runtime_left": b"runtime-SECRET" in environ, "names": sorted(os.environ)}))
"""


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_the_entry_point_restarts_without_the_token_in_its_environment(tmp_path):
    """Same pid, new image: the token is read back from a pipe into memory; neither the process's
    /proc environ nor its cmdline holds it; the runner's own credentials are gone."""
    script = tmp_path / "probe.py"
    script.write_text(REEXEC_PROBE, encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), "INPUT_GITHUB-TOKEN": TOKEN,
           "ACTIONS_RUNTIME_TOKEN": "runtime-SECRET", "GITHUB_TOKEN": TOKEN, "KEEP": "me"}
    proc = subprocess.Popen([sys.executable, str(script), "an-argument"], env=env, stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=60)
    seen = json.loads(out)
    assert proc.returncode == 0
    assert seen["pid"] == proc.pid                       # re-executed in place, not a child
    assert seen["argv"] == ["an-argument"] and seen["token"] == TOKEN    # the token came through the pipe
    assert (seen["in_environ"], seen["in_cmdline"], seen["runtime_left"]) == (False, False, False)
    assert "KEEP" in seen["names"] and not {"INPUT_GITHUB-TOKEN", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN"} & set(
        seen["names"])

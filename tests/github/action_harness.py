"""The runner's side of an action run, for the tests: the environment it gives the action, the
event payloads, the files it reads back, and the log as the runner parses it (`runner_log`)."""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from pathlib import Path

from github_server import FakeGitHub
from runner_log import RunnerLog

from rageval.config import load_config
from rageval.gate.decide import narrow_baseline, verdict_on
from rageval.gate.verdict import Verdict
from rageval.github.action import main
from rageval.github.comment import comment_marker
from rageval.pipeline.runner import prepare
from rageval.results import RunResult

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "ghp_SENTINEL_ACTION_TOKEN"
ARTIFACT = "rageval-baseline"
HEAD_SHA = "1234567890abcdef1234567890abcdef12345678"
MERGE_SHA = "fedcba0987654321fedcba0987654321fedcba09"
CFG_200 = "examples/banhang/rageval.yml"
CFG_800 = "examples/banhang/rageval-800.yml"
CFG_LENIENT = "examples/banhang/rageval-lenient.yml"
LENIENT_GATE = {"floors": {"hit@3": 0.5}, "max_drop": {"mrr@5": 0.03, "pass_rate": 0.05}, "noise_k": 2,
                "zero_tolerance": [], "slices": {"type=injection": {"floors": {"pass_rate": 0.0}}}, "rerun": {"margin": 0.02, "times": 1}, "missing_baseline": "floors_only"}


def zip_json(data: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("rageval-baseline.json", json.dumps(data))
    return buf.getvalue()


def pr_payload(number: int = 7, base: str = "main") -> dict:
    return {"action": "synchronize", "number": number,
            "pull_request": {"number": number, "base": {"ref": base, "sha": "b" * 40},
                             "head": {"ref": "chunk-800", "sha": HEAD_SHA}},
            "repository": {"full_name": "acme/shop", "default_branch": "main"}}


def push_payload(branch: str) -> dict:
    return {"ref": f"refs/heads/{branch}", "after": MERGE_SHA,
            "repository": {"full_name": "acme/shop", "default_branch": "main"}}


def make_env(ws: Path, tmp_path: Path, gh: FakeGitHub | None, event: str, payload: dict, ref: str,
             **inputs: str) -> dict[str, str]:
    """The environment the runner gives a Docker action; inputs as kebab_case=… keyword args."""
    tag = uuid.uuid4().hex[:8]
    event_path = tmp_path / f"event-{tag}.json"
    event_path.write_text(json.dumps(payload), encoding="utf-8")
    (tmp_path / f"output-{tag}").write_text("", encoding="utf-8")
    (tmp_path / f"summary-{tag}").write_text("", encoding="utf-8")
    env = {
        "GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_WORKSPACE": str(ws),
        "GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(event_path), "GITHUB_REF": ref,
        "GITHUB_SHA": MERGE_SHA, "GITHUB_REPOSITORY": "acme/shop",
        "GITHUB_API_URL": gh.api_url if gh else "http://127.0.0.1:9/api/v3",
        "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "99",
        "GITHUB_OUTPUT": str(tmp_path / f"output-{tag}"), "GITHUB_STEP_SUMMARY": str(tmp_path / f"summary-{tag}"),
        "INPUT_GITHUB-TOKEN": TOKEN,
    }
    for name, value in inputs.items():
        env["INPUT_" + name.replace("_", "-").upper()] = value
    return env


class Run:
    def __init__(self, code: int, out: str, err: str, env: dict[str, str]) -> None:
        self.code, self.out, self.err, self.env = code, out, err, env
        self.outputs = parse_outputs(Path(env["GITHUB_OUTPUT"]).read_text(encoding="utf-8"))
        self.summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
        self.runner = RunnerLog().feed(out)   # the log as the runner reads it

    def file(self, rel: str) -> str:
        return (Path(self.env["GITHUB_WORKSPACE"]) / rel).read_text(encoding="utf-8")

    def commands(self, name: str) -> list[str]:
        return [line for line in self.out.splitlines() if line.startswith(f"::{name}")]


def run_action(env: dict[str, str]) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(env, stdout=out, stderr=err)
    return Run(code, out.getvalue(), err.getvalue(), env)


def parse_outputs(text: str) -> dict[str, str]:
    """Parse a $GITHUB_OUTPUT file the way the runner does (name<<DELIM … DELIM, or name=value)."""
    outputs: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line:
            name, delim = line.split("<<", 1)
            end = lines.index(delim, i + 1)
            outputs[name] = "\n".join(lines[i + 1:end])
            i = end + 1
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
            i += 1
        else:
            assert line == "", f"unparseable output line {line!r}"
            i += 1
    return outputs


def assert_no_secret(run: Run, *files: str) -> None:
    """The token appears only in the one ::add-mask:: line the runner swallows."""
    lines = run.out.splitlines()
    assert lines[0] == f"::add-mask::{TOKEN}"
    assert not any(TOKEN in line for line in lines[1:])
    assert TOKEN not in run.err
    assert TOKEN not in Path(run.env["GITHUB_OUTPUT"]).read_text(encoding="utf-8")
    assert TOKEN not in run.summary
    for rel in files:
        assert TOKEN not in run.file(rel), rel


def expected_verdict(ws: Path, config: str, baseline: RunResult, subset: str | None) -> Verdict:
    """The gate's decision computed directly with the library, for comparison with the action."""
    cfg = load_config(ws / config)
    ev = prepare(cfg, subset=subset, env={})
    candidate = ev.run()
    narrowed = narrow_baseline(baseline, [c.id for c in ev.golden.cases])
    return verdict_on(narrowed, candidate, cfg.gate,
                         rerun=lambda ids: ev.run(fresh=True, case_ids=ids, previous=candidate))


def marker_comments(gh: FakeGitHub, key: str, number: int = 7) -> list[dict]:
    marker = comment_marker(key)
    return [c for c in gh.comments.get(number, []) if c["body"].startswith(marker)]

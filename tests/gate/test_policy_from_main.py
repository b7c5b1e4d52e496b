"""Issue 19: the gate on another team's project and against an adversarial PR author.

End to end through `rageval gate` on the demo (Vietnamese) and on examples/northwind (English):

1. the policy applied to a PR is the stricter of main's (in the baseline) and the PR's, key by key;
2. zero tolerance is a ratchet: failures main already has are known failures, listed, not blocking;
3. a PR's golden edits (rewording every question, renaming ids, untagging the cases it breaks)
   cannot unguard it: main's cases are run with the PR's pipeline and compared;
4. a baseline is checked before it is believed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import unwrapped
import yaml

from rageval.cli import main as cli_main
from rageval.config import load_config
from rageval.gate.policy import RULES, effective, stricter
from rageval.results import load_result
from rageval.settings import GateConfig, GoldenChecksConfig

ROOT = Path(__file__).resolve().parents[2]
NORTHWIND = ROOT / "examples" / "northwind"
DEMO = ROOT / "examples" / "banhang"


@pytest.fixture(scope="module")
def northwind(tmp_path_factory) -> dict[str, Path]:
    """A copy of examples/northwind and its main baselines: the whole set and the pr subset."""
    root = tmp_path_factory.mktemp("northwind") / "northwind"
    shutil.copytree(NORTHWIND, root, ignore=shutil.ignore_patterns(".rageval-cache"))
    full, pr = root / "base.json", root / "base-pr.json"
    assert cli_main(["run", str(root / "rageval.yml"), "--out", str(full)]) == 0
    assert cli_main(["run", str(root / "rageval.yml"), "--subset", "pr", "--out", str(pr)]) == 0
    return {"root": root, "full": full, "pr": pr}


def gate(run_cli, config: Path, baseline: Path, out: Path, *extra: str) -> tuple[int, str, dict, str]:
    """(exit code, stdout, verdict JSON, comment markdown) of one `rageval gate`."""
    comment = out.with_suffix(".md")
    code, stdout, stderr = run_cli("gate", "--config", config, "--baseline", baseline, "--out", out,
                                   "--report-md", comment, *extra)
    assert code in (0, 1), stderr
    return code, unwrapped(stdout), json.loads(out.read_text(encoding="utf-8")), comment.read_text(encoding="utf-8")


def with_config(path: Path, name: str, change) -> Path:
    """A copy of a config (YAML) with ``change(data)`` applied, beside it."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    out = path.parent / name
    out.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return out


# --- 1. the policy comes from main -------------------------------------------------------------

@pytest.mark.parametrize("gate_section", [{}, None, {"floors": {}, "max_drop": {}, "zero_tolerance": []}],
                         ids=["gate-{}", "gate-empty", "empty-lists"])
def test_a_pr_cannot_remove_mains_gate(northwind, run_cli, tmp_path, gate_section):
    """The seed incident's shape on the English project: bigger chunks AND no gate. main's policy
    still applies, and the comment says first that the PR loosens it."""
    config = with_config(northwind["root"] / "rageval-big-chunks.yml", f"loose-{len(str(gate_section))}.yml",
                         lambda d: d.__setitem__("gate", gate_section))
    code, stdout, verdict, comment = gate(run_cli, config, northwind["pr"], tmp_path / "v.json", "--subset", "pr")
    assert code == 1
    blocking = [r["message"] for r in verdict["reasons"] if r["blocking"]]
    assert "mrr@5 dropped 0.94 → 0.88 (Δ −0.06, tolerance 0.03)" in blocking
    assert any(m.startswith("numbers q01: missing 30 days") for m in blocking)
    loosened = {c["key"] for c in verdict["policy"]["loosened"]}
    assert {"gate.floors.hit@3", "gate.floors.mrr@5", "gate.max_drop.mrr@5", "gate.zero_tolerance"} <= loosened
    first_lines = comment.splitlines()[:4]
    assert first_lines[2].startswith("> ⚠️ **Policy from main:** this PR loosens the gate: gate.")
    assert first_lines[2].endswith("; main's values apply until it is merged.")
    assert "note  this PR loosens the gate: " in stdout


def test_tightening_applies_at_once_and_loosening_one_key_keeps_mains(northwind, run_cli, tmp_path):
    def change(d):
        d["gate"]["floors"] = {"hit@3": 0.99, "mrr@5": 0.50}      # hit@3 tightened, mrr@5 loosened
    config = with_config(northwind["root"] / "rageval.yml", "mixed.yml", change)
    code, _, verdict, _ = gate(run_cli, config, northwind["pr"], tmp_path / "v.json", "--subset", "pr")
    floors = {r["metric"]: r["threshold"] for r in verdict["metrics"] if r["threshold"]}
    assert floors["hit@3"]["floor"] == 0.99 and floors["mrr@5"]["floor"] == 0.80
    assert [c["key"] for c in verdict["policy"]["loosened"]] == ["gate.floors.mrr@5"]
    assert [c["key"] for c in verdict["policy"]["tightened"]] == ["gate.floors.hit@3"]
    assert code == 1 and any(r["rule"] == "floor" and r["metric"] == "hit@3" and r["threshold"] == 0.99
                             for r in verdict["reasons"] if r["blocking"])


def test_golden_checks_severities_come_from_main_too(tmp_path):
    cfg = load_config(DEMO / "rageval.yml")
    lax = GoldenChecksConfig(leaks="off", policy_drift="warn")
    merged = stricter(cfg.golden_checks, lax)
    assert (merged.leaks, merged.policy_drift) == ("warn", "block")


def test_every_gate_key_has_a_stricter_rule():
    """A key added to gate or golden_checks must say how the stricter of main's and the PR's is taken."""
    for section in (GateConfig, GoldenChecksConfig):
        assert set(RULES[section]) == {f for f in section.__dataclass_fields__}


@pytest.mark.parametrize("main, pr, expected", [
    ({"significance": None}, {"significance": 0.05}, None),          # no test at all blocks every breach
    ({"significance": 0.01}, {"significance": 0.05}, 0.05),
    ({"noise_k": 2.0}, {"noise_k": 5.0}, 2.0),
    ({"errors": "fail"}, {"errors": "ignore"}, "fail"),
    ({"missing_baseline": "floors_only"}, {"missing_baseline": "fail"}, "fail"),
    ({"min_slice_cases": 3}, {"min_slice_cases": 10}, 3),
    ({"known_failures": "block"}, {"known_failures": "report"}, "block"),
])
def test_stricter_key_by_key(main, pr, expected):
    base = {"known_failures": "report"}
    merged = stricter(GateConfig(**{**base, **main}), GateConfig(**{**base, **pr}))
    (key,) = main
    assert getattr(merged, key) == expected


def test_a_baseline_whose_policy_cannot_be_read_blocks(northwind, run_cli, tmp_path):
    data = json.loads(northwind["pr"].read_text(encoding="utf-8"))
    data["config"]["gate"]["floors"]["hit@3"] = "high"
    baseline = tmp_path / "bad-policy.json"
    baseline.write_text(json.dumps(data), encoding="utf-8")
    code, stdout, verdict, _ = gate(run_cli, northwind["root"] / "rageval.yml", baseline, tmp_path / "v.json",
                                    "--subset", "pr")
    assert code == 1 and verdict["reasons"][0]["rule"] == "policy_unreadable"
    assert "cannot be read by this rageval" in stdout and "gate.floors.hit@3" in stdout


def test_no_baseline_applies_the_prs_policy():
    cfg = load_config(DEMO / "rageval.yml")
    policy = effective(cfg, None)
    assert policy.gate.floors == cfg.gate.floors and policy.report.loosened == ()


# --- 2. known failures: a ratchet ----------------------------------------------------------------

def failing_numbers(run: Path) -> list[str]:
    """The cases a results file records as failing the number rule (read from the JSON itself)."""
    data = json.loads(run.read_text(encoding="utf-8"))
    return [c["id"] for c in data["cases"] if (c.get("checks") or {}).get("numbers", {}).get("status") == "fail"]


def test_the_same_config_against_its_own_baseline_passes_with_the_known_failures_listed(northwind, run_cli,
                                                                                         tmp_path):
    """The whole northwind set fails the number rule on some cases on main (see its README): gated
    against its own baseline it passes, counting and listing them — before, exit 1."""
    known = failing_numbers(northwind["full"])
    assert len(known) >= 3
    code, stdout, verdict, comment = gate(run_cli, northwind["root"] / "rageval.yml", northwind["full"],
                                          tmp_path / "v.json")
    assert code == 0, stdout
    assert verdict["known_failures"] == known
    assert stdout.splitlines()[0] == (f"RAG eval gate: passed — all gates passed; {len(known)} known failures, "
                                      "already failing on main")
    assert f"Known failures ({len(known)}): already failing on main — not blocking" in comment
    assert f"| {known[0]} |" in comment
    (reason,) = [r for r in verdict["reasons"] if r["rule"] == "known_failures"]
    assert not reason["blocking"] and reason["message"] == (
        f"{len(known)} known failures, already failing on main: numbers {', '.join(known)} "
        "(gate.known_failures: report)")


def test_known_failures_block_under_block_and_say_so(northwind, run_cli, tmp_path):
    known = failing_numbers(northwind["full"])
    config = with_config(northwind["root"] / "rageval.yml", "strict.yml",
                         lambda d: d["gate"].__setitem__("known_failures", "block"))
    code, stdout, verdict, comment = gate(run_cli, config, northwind["full"], tmp_path / "v.json")
    assert code == 1
    blocked = [line for line in stdout.splitlines() if line.startswith("  BLOCK numbers ")]
    assert len(blocked) == len(known) and all(line.endswith(" (already failing on main)") for line in blocked)
    assert f"Known failures ({len(known)}): already failing on main — blocking (gate.known_failures: block)" in comment


def test_a_new_failure_still_blocks_beside_known_ones(northwind, run_cli, tmp_path):
    """The big-chunk PR on the whole set: cases that pass the number rule on main and fail it in the
    PR block (q01: 60 days for 30); those failing on both are listed apart, not blocking."""
    pr = tmp_path / "pr.json"
    assert run_cli("run", northwind["root"] / "rageval-big-chunks.yml", "--out", pr)[0] == 0
    before, after = failing_numbers(northwind["full"]), failing_numbers(pr)
    new = sorted(i for i in after if i not in before)
    assert "q01" in new
    code, stdout, verdict, _ = gate(run_cli, northwind["root"] / "rageval-big-chunks.yml", northwind["full"],
                                    tmp_path / "v.json")
    assert code == 1
    blocking = sorted(r["case"] for r in verdict["reasons"] if r["rule"] == "zero_tolerance" and r["case"])
    hidden = sum(r["value"] for r in verdict["reasons"] if r["rule"] == "zero_tolerance" and not r["case"])
    assert set(blocking) <= set(new) and len(blocking) + hidden == len(new)   # holdout cases counted, not named
    assert verdict["known_failures"] == [i for i in after if i in before]
    known = len(verdict["known_failures"])
    assert f"note  {known} known failures, already failing on main: numbers " in stdout


# --- 3. a golden edit cannot unguard its own PR ---------------------------------------------------

def golden_edit(root: Path, name: str, edit) -> Path:
    """A copy of the project's golden set edited by ``edit(data)``, with a version bump, and a config
    pointing the big-chunk settings at it."""
    data = yaml.safe_load((root / "golden.yaml").read_text(encoding="utf-8"))
    edit(data)
    data["version"] = data["version"] + 1
    (root / f"golden-{name}.yaml").write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False),
                                              encoding="utf-8")
    return with_config(root / "rageval-big-chunks.yml", f"golden-{name}.yml",
                       lambda d: d.__setitem__("golden", f"golden-{name}.yaml"))


def _trailing_space(data):
    for case in data["cases"]:
        case["question"] += " "


def _renamed(data):
    for case in data["cases"]:
        case["id"] = "n" + case["id"]


BROKEN = ("q01", "q43", "q44")          # the pr cases the big chunks break (or answer out of scope)


def _untag_failing(data):
    for case in data["cases"]:
        if case["id"] in BROKEN:                  # untagging the cases the change breaks
            case["tags"] = [t for t in case.get("tags", []) if t != "pr"]


@pytest.fixture(scope="module")
def unedited(northwind, tmp_path_factory) -> dict:
    """The big-chunk PR's verdict with main's golden set untouched: what a golden edit must not hide."""
    out = tmp_path_factory.mktemp("unedited") / "v.json"
    code = cli_main(["gate", str(northwind["root"] / "rageval-big-chunks.yml"), "--subset", "pr",
                     "--baseline", str(northwind["pr"]), "--out", str(out)])
    assert code == 1
    verdict = json.loads(out.read_text(encoding="utf-8"))
    assert "q01" in verdict["pass_to_fail"]                 # the 60-days-for-30 incident of the example
    return verdict


@pytest.mark.parametrize("edit", [_trailing_space, _renamed, _untag_failing],
                         ids=["trailing-space-on-every-question", "renamed-ids", "untag-the-broken-cases"])
def test_a_golden_edit_cannot_unguard_its_pr(northwind, unedited, run_cli, tmp_path, edit):
    config = golden_edit(northwind["root"], edit.__name__, edit)
    code, stdout, verdict, _ = gate(run_cli, config, northwind["pr"], tmp_path / "v.json", "--subset", "pr")
    assert code == 1, stdout
    assert verdict["comparable"] is True
    assert verdict["pass_to_fail"] == unedited["pass_to_fail"]      # every case it breaks is still found
    assert verdict["reasons"][0]["rule"] == "golden_changes"
    assert "compared on main's 24 cases as main asks them, run with this PR's pipeline" in verdict["reasons"][0]["message"]


def test_the_golden_changes_list_subset_membership(northwind, run_cli, tmp_path):
    config = golden_edit(northwind["root"], "untag2", _untag_failing)
    _, _, verdict, comment = gate(run_cli, config, northwind["pr"], tmp_path / "v.json", "--subset", "pr")
    changed = {c["id"]: c["fields"] for c in verdict["golden"]["diff"]["changed"]}
    assert changed == {"q01": ["tags"], "q43": ["tags"], "q44": ["tags"]}
    assert "q01 (tags)" in comment


# --- 4. a baseline is checked before it is believed -----------------------------------------------

def test_a_baseline_with_no_case_is_not_comparable_and_blocks(northwind, run_cli, tmp_path):
    data = json.loads(northwind["pr"].read_text(encoding="utf-8"))
    data["cases"] = []
    baseline = tmp_path / "empty.json"
    baseline.write_text(json.dumps(data), encoding="utf-8")
    code, stdout, verdict, _ = gate(run_cli, northwind["root"] / "rageval.yml", baseline, tmp_path / "v.json",
                                    "--subset", "pr")
    assert code == 1 and verdict["state"] == "not_comparable"
    assert "the baseline holds none of the PR's 24 cases" in stdout


@pytest.mark.parametrize("noise, problem", [
    ({"runs_executed": 1, "deterministic": False}, "σ 0.5 of mrr@5 from 1 run: one run measures no noise"),
    ({"runs_executed": 3, "deterministic": True}, "σ 0.5 of mrr@5 in a deterministic pipeline"),
    ({"runs_executed": 3, "deterministic": False, "runs": [{"mrr@5": 0.94}, {"mrr@5": 0.94}, {"mrr@5": 0.94}]},
     "σ 0.5 of mrr@5 is not what its 3 recorded runs give (0)"),
], ids=["one-run", "deterministic", "runs-disagree"])
def test_a_noise_band_its_runs_cannot_give_is_refused(northwind, run_cli, tmp_path, noise, problem):
    """σ 0.5 would make mrr@5's tolerance 1.0: every drop would pass."""
    data = json.loads(northwind["pr"].read_text(encoding="utf-8"))
    data["noise"] = {"sigma": {"mrr@5": 0.5}, "by_slice": {}, "runs": [], **noise}
    baseline = tmp_path / "wide.json"
    baseline.write_text(json.dumps(data), encoding="utf-8")
    code, _, stderr = run_cli("gate", "--config", northwind["root"] / "rageval-big-chunks.yml", "--subset", "pr",
                              "--baseline", baseline)
    assert code == 2 and problem in stderr and str(baseline) in stderr


def test_a_baseline_loads_as_main_recorded_it(northwind):
    result = load_result(northwind["pr"])
    assert result.config["gate"]["zero_tolerance"] == ["numbers"]

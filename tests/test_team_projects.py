"""Issue 19 §5–§6: the gate on another team's project speaks their language and says beforehand
what it could never check. End to end on examples/northwind (English) and the demo (Vietnamese)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import unwrapped
import yaml

from rageval.config import load_config
from rageval.errors import ConfigError
from rageval.golden.corpus import load_corpus
from rageval.metrics.numbers import check_numbers
from rageval.metrics.rules import check_refusal
from rageval.pipeline.generation import DECLINES, ExtractiveGenerator
from rageval.pipeline.runner import prepare
from rageval.records import Retrieved
from rageval.text import detect_language

ROOT = Path(__file__).resolve().parents[1]
NORTHWIND = ROOT / "examples" / "northwind"
DEMO = ROOT / "examples" / "banhang"


@pytest.fixture
def northwind(tmp_path) -> Path:
    root = tmp_path / "northwind"
    shutil.copytree(NORTHWIND, root, ignore=shutil.ignore_patterns(".rageval-cache"))
    return root


def edited(config: Path, change, name: str = "edited.yml") -> Path:
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    change(data)
    out = config.parent / name
    out.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return out


# --- §5 the team's language -----------------------------------------------------------------------

@pytest.mark.parametrize("project, language", [(NORTHWIND, "en"), (DEMO, "vi")])
def test_the_language_is_detected_from_the_corpus(project, language):
    cfg = load_config(project / "rageval.yml")
    assert cfg.language == "auto"
    assert detect_language(s.text for s in load_corpus(cfg.corpus, cfg.root).sections) == language
    # typed without diacritics, Vietnamese is still Vietnamese
    assert detect_language(["khong co thong tin ve chinh sach doi tra cua ban"]) == "vi"


def test_an_english_project_declines_in_english_and_the_decline_is_read_as_one(northwind):
    result = prepare(load_config(northwind / "rageval.yml"), env={}, subset="pr").run()
    declined = [c for c in result.cases if c.checks["refusal"].details.get("declined")]
    assert declined and {c.answer for c in declined} == {"The documents do not cover this."}
    assert all(c.checks["refusal"].status == "pass" for c in declined if c.out_of_scope)
    assert result.app["language"] == "en"
    assert "Tài liệu" not in json.dumps([c.answer for c in result.cases], ensure_ascii=False)


def test_the_language_can_be_set(northwind):
    cfg = load_config(edited(northwind / "rageval.yml", lambda d: d.__setitem__("language", "vi")))
    assert cfg.language == "vi"
    with pytest.raises(ConfigError, match=r"'language' must be one of auto, vi, en, got 'fr'"):
        load_config(edited(northwind / "rageval.yml", lambda d: d.__setitem__("language", "fr"), "fr.yml"))


@pytest.mark.parametrize("answer, out_of_scope, status", [
    ("The documents do not cover this.", True, "pass"),
    ("The documents do not cover this.", False, "fail"),
    ("Sorry, I can't help with that.", True, "pass"),
    ("That information is not available.", True, "pass"),
    ("Tài liệu không đề cập thông tin này.", True, "pass"),
    # answers, not declines: a policy saying what it does not cover
    ("The warranty does not cover water damage or normal wear.", False, "pass"),
    ("We cannot help with returns after 30 days, but repairs are possible.", False, "pass"),
])
def test_declines_a_team_writes_in_english_are_read_as_declines(answer, out_of_scope, status):
    assert check_refusal(answer, out_of_scope).status == status


def test_quantities_are_shown_as_the_text_wrote_them():
    check = check_numbers("Members have 60 days and the fee is $19.95.", "You have 30 days; the fee is $7.95.",
                          "Returns: 30 days. Members: 60 days. Fee $7.95, express $19.95, 3–5 business days.")
    assert check.details["missing"] == ["30 days", "$7.95"]
    assert check.details["outside_source"] == []
    assert check.reason == "missing 30 days, $7.95"
    # the demo's Vietnamese reads as before
    vi = check_numbers("Bạn có 30 ngày để trả.", "Trong 7 ngày kể từ ngày nhận hàng.", "7 ngày")
    assert vi.reason == "missing 7 ngày; outside source 30 ngày"
    # "30 days" and "30 ngày" are one quantity: the rule compares values and units, not words
    assert check_numbers("within 30 ngày", "30 days", "30 days").status == "pass"


def test_a_paragraph_that_starts_with_a_hyphenated_word_is_text_not_a_heading():
    chunk = Retrieved("shipping#4", ("SHP-4",), "SHP-4 In-store pickup\nSame-day delivery is offered in Denver. "
                      "We hold a pickup order for 7 days.")
    answer = ExtractiveGenerator(2, language="en").generate("how long do you hold a pickup order", [chunk],
                                                            case_id="q19").answer
    assert answer != DECLINES["en"] and "7 days" in answer


# --- §6 foresee what the gate will do --------------------------------------------------------------

def test_a_threshold_the_config_cannot_produce_is_refused_at_validate_and_run(northwind, run_cli):
    config = edited(northwind / "rageval.yml", lambda d: d["gate"]["floors"].__setitem__("hit@10", 0.9))
    for command in (("validate", "--no-git"), ("run", "--subset", "pr")):
        code, _, err = run_cli(command[0], config, *command[1:])
        assert code == 2, err
        assert ("gate.floors.hit@10: this config does not produce hit@10 (retrieval.k is [1, 3, 5]; add 10 there "
                "or gate a cut-off the config measures)") in err


def test_a_judge_threshold_without_a_judge_is_refused(northwind, run_cli):
    config = edited(northwind / "rageval.yml", lambda d: d["gate"]["max_drop"].__setitem__("judge_pass", 0.05))
    code, _, err = run_cli("validate", config, "--no-git")
    assert code == 2 and "gate.max_drop.judge_pass: this config does not produce judge_pass" in err
    assert "needs judge.model" in err


def test_a_mistyped_slice_label_is_an_error_naming_the_known_ones(northwind, run_cli):
    config = edited(northwind / "rageval.yml",
                    lambda d: d["gate"].__setitem__("slices", {"type=injecton": {"floors": {"pass_rate": 1.0}}}))
    for command in (("validate", "--no-git"), ("run", "--subset", "pr"), ("gate", "--subset", "pr")):
        code, _, err = run_cli(command[0], config, *command[1:])
        assert code == 2, (command, err)
        assert "gate.slices: no case of golden.yaml has the slice label 'type=injecton' (did you mean " \
               "'type=injection'?)" in err
        assert "type=comparison, type=injection, type=lookup" in err


def test_an_index_smaller_than_twice_top_k_is_a_warning(northwind, run_cli):
    config = edited(northwind / "rageval.yml", lambda d: d["chunking"].__setitem__("size", 800))
    warning = ("warning: the index has 5 chunks and retrieval.top_k is 5: every question retrieves all of the "
               "corpus, so hit@k and recall@k say little")
    code, out, _ = run_cli("validate", config, "--no-git")
    assert code == 0 and warning in out
    code, out, _ = run_cli("run", config, "--subset", "pr")
    assert warning in out
    code, out, _ = run_cli("run", northwind / "rageval.yml", "--subset", "pr")
    assert "warning:" not in out


def test_a_run_where_every_case_errored_exits_1_and_the_gate_says_why(northwind, run_cli, tmp_path):
    base = tmp_path / "base.json"
    assert run_cli("run", northwind / "rageval.yml", "--subset", "pr", "--out", base)[0] == 0
    broken = edited(northwind / "rageval.yml", lambda d: d.__setitem__(
        "app", {"type": "command", "command": [sys.executable, "-c", "import nonexistent_module"]}))
    code, out, err = run_cli("run", broken, "--subset", "pr", "--out", tmp_path / "c.json")
    assert code == 1
    assert "ERROR 24 of 24 cases errored (more than run.max_error_rate 0.5)" in err
    assert json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))["summary"]["n_errors"] == 24
    code, out, err = run_cli("gate", broken, "--subset", "pr", "--baseline", base)
    out = unwrapped(out)                   # the terminal wraps at 80 columns (issue 20 §6)
    assert code == 1
    assert out.startswith("RAG eval gate: blocked — 24 of 24 cases errored: ")
    # the cause, not the symptom: the app's own last words on stderr
    assert "exited with code 1 without answering: ModuleNotFoundError: No module named 'nonexistent_module'" in out
    # a run with a few errors is still a result
    lenient = edited(broken, lambda d: d.__setitem__("run", {"max_error_rate": 1.0}), "lenient.yml")
    assert run_cli("run", lenient, "--subset", "pr")[0] == 0

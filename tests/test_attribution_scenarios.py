"""Attribution a reviewer can act on (issue 20), end to end on nine PRs to the demo, each a git
repository whose main commit produced the baseline.

The expected sentences were worked out by running the variants by hand (``rageval gate`` and
``rageval run`` on configs and files edited by hand, outside rageval's attribution): which revert
unblocks the gate, each knob's Δ alone, the pairs that interact. Several tests re-run the decisive
variant by hand here too, so a sentence is checked against a run the attribution code did not make.

Two PRs edit the prompt, which only a chat model reads: they run the demo with generation through
the local OpenAI-compatible server (tests/openai_server.py), whose "model" answers with the first
sentence of the first retrieved chunk and follows one instruction a PR may add to the prompt
(rounding every return period up to 30 days) — enough for a prompt edit to change answers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import run_in_process, unwrapped
from openai_server import OpenAIServer

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
ROUND_UP = "Làm tròn mọi thời hạn đổi trả lên 30 ngày."
#: a corpus edit that keeps the section's numbers (no policy drift) but moves q01's answer off "7 ngày"
DOC_BEFORE = "được đổi trả trong 7 ngày kể từ ngày nhận hàng; thời hạn"
DOC_AFTER = "được đổi trả trong thời hạn nêu ở câu đầu mục này; thời hạn"


def first_chunk_model(body: dict) -> str:
    """The fake chat model: the first sentence of the first retrieved chunk; under the PR's prompt
    instruction, a return period of 7 days becomes 30."""
    user = body["messages"][-1]["content"]
    found = re.search(r"\[Đoạn 1 [^\]]*\]\n(.*?)(?:\n\[Đoạn|\nCâu hỏi)", user, re.S)
    if not found:
        return "Tài liệu không đề cập thông tin này."
    first = re.split(r"(?<=\.)\s", " ".join(found.group(1).split()))[0]
    return re.sub(r"\b7 ngày", "30 ngày", first) if ROUND_UP in user else first


def git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def doc_with(repo: Path, text: str) -> Path:
    return next(p for p in sorted((repo / "docs").glob("*.md")) if text in p.read_text(encoding="utf-8"))


def prompt_rounds_up(repo: Path) -> None:
    """The PR's prompt edit: one instruction added (and the rules after it renumbered)."""
    prompt = repo / "prompt.j2"
    edit(prompt, "5. Ghi mã mục nguồn", f"5. {ROUND_UP}\n6. Ghi mã mục nguồn")
    edit(prompt, "6. Nếu các đoạn", "7. Nếu các đoạn")
    edit(prompt, "7. Câu hỏi của khách", "8. Câu hỏi của khách")


class Project:
    """main's repository and baseline; ``pr(name, change)`` copies it, applies the change, commits."""

    def __init__(self, root: Path, run_cli) -> None:
        self.root, self.run_cli = root, run_cli
        self.main = root / "main"

    def init(self) -> Project:
        (self.main / ".gitignore").write_text(".rageval-cache/\n", encoding="utf-8")
        git(self.main, "init", "-q")
        git(self.main, "add", ".")
        git(self.main, "commit", "-qm", "main")
        code, _, err = self.run_cli("baseline", "--config", self.main / "rageval.yml", "--subset", "pr",
                                    "--repeats", "1", "--out", self.root / "baseline.json")
        assert code == 0, err
        return self

    def pr(self, name: str, change) -> Path:
        repo = self.root / name
        shutil.copytree(self.main, repo, ignore=shutil.ignore_patterns(".rageval-cache"))
        change(repo)
        git(repo, "commit", "-qam", name)
        return repo

    def gate(self, repo: Path, baseline: Path | None = None) -> tuple[int, str, dict, str]:
        out, md = repo / "verdict.json", repo / "comment.md"
        code, stdout, err = self.run_cli("gate", "--config", repo / "rageval.yml", "--subset", "pr", "--baseline",
                                         baseline or self.root / "baseline.json", "--out", out, "--report-md", md)
        assert code in (0, 1), err
        return code, unwrapped(stdout), json.loads(out.read_text(encoding="utf-8")), md.read_text(encoding="utf-8")

    def by_hand(self, name: str, change, metric: str) -> float:
        """``metric`` of a run of main's project with ``change`` made by hand (a knob applied alone)."""
        repo = self.root / f"hand-{name}"
        shutil.copytree(self.main, repo, ignore=shutil.ignore_patterns(".rageval-cache"))
        change(repo)
        code, _, err = self.run_cli("run", "--config", repo / "rageval.yml", "--subset", "pr", "--out", repo / "r.json")
        assert code in (0, 1), err
        return json.loads((repo / "r.json").read_text(encoding="utf-8"))["summary"]["metrics"][metric]

    def baseline_value(self, metric: str) -> float:
        return json.loads((self.root / "baseline.json").read_text(encoding="utf-8"))["summary"]["metrics"][metric]


def config(repo: Path, **sections: dict) -> None:
    """Change keys of rageval.yml (a YAML round trip: comments go, values stay)."""
    path = repo / "rageval.yml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for section, values in sections.items():
        data[section] = {**(data.get(section) or {}), **values}
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")


@pytest.fixture(scope="module")
def offline(tmp_path_factory, copy_demo):
    """The demo as it runs offline (extractive answers)."""
    root = tmp_path_factory.mktemp("scenarios")
    copy_demo(root / "main")
    return Project(root, run_in_process).init()


@pytest.fixture(scope="module")
def with_model(tmp_path_factory, copy_demo):
    """The demo with answers from a chat model (the local server) through prompt.j2."""
    with pytest.MonkeyPatch.context() as env, OpenAIServer(responder=first_chunk_model) as server:
        env.setenv("RAGEVAL_TEST_KEY", "sk-test-scenarios")
        root = tmp_path_factory.mktemp("scenarios-model")
        copy_demo(root / "main")
        config(root / "main", generation={"provider": "openai", "model": "gpt-4o-mini", "prompt": "prompt.j2"},
               llm={"base_url": server.base_url, "api_key_env": "RAGEVAL_TEST_KEY", "max_cost_usd": 1.0,
                    "prices": {"gpt-4o-mini": {"prompt": 0.15, "completion": 0.60}}},
               attribution={"run": "on_block", "max_knobs": 4, "models": True})
        yield Project(root, run_in_process).init()


def effect(verdict: dict, metric: str, knob: str) -> dict:
    found = next(m for m in verdict["attribution"]["metrics"] if m["metric"] == metric)
    return next(e for e in found["effects"] if e["knob"].startswith(knob))


# --- 1. the prompt edited in place, with top_k and overlap ---------------------------------------

def test_a_prompt_edited_in_place_is_the_knob_and_reverting_it_alone_unblocks(with_model):
    repo = with_model.pr("prompt-topk-overlap", lambda r: (prompt_rounds_up(r), config(
        r, retrieval={"top_k": 10}, chunking={"overlap": 50})))
    code, stdout, verdict, comment = with_model.gate(repo)
    assert code == 1
    prompt = "generation.prompt (prompt.j2 edited)"
    assert sorted(verdict["attribution"]["knobs"]) == ["chunking.overlap 0→50", prompt, "retrieval.top_k 5→10"]
    # by hand: the prompt alone −0.07 on pass_rate, overlap and top_k alone 0.00
    assert f"{prompt} −0.07 alone, reverting it leaves 0.00" in stdout
    assert "chunking.overlap 0→50 0.00 alone, reverting it leaves −0.07" in stdout
    assert "retrieval.top_k 5→10 0.00 alone, reverting it leaves −0.07" in stdout
    assert f"attribution: reverting {prompt} alone unblocks the gate" in stdout
    assert "causes most of it" not in stdout and "no knob that changes answers" not in stdout
    assert f"**Next step:** Revert {prompt}: reverting it alone unblocks the gate." in comment
    # the in-place edit is a config change, with its diff collapsed under the table
    assert "| generation.prompt | prompt.j2 | prompt.j2 content changed, +4 −3 lines |" in comment
    assert "<details><summary>generation.prompt: prompt.j2 content changed, +4 −3 lines</summary>" in comment
    assert f"+5. {ROUND_UP}" in comment
    # the variants' model calls are priced in the cost section, and stayed within the one budget
    found = verdict["attribution"]
    assert found["model_calls"] > 0 and found["cost"]["usd"] > 0 and found["runs"] <= 2 * 4
    assert f"Attribution: {found['runs']} extra runs" in comment.split("Noise, re-runs, cost and time", 1)[1]

    # by hand: the PR with main's prompt put back passes the gate
    hand = with_model.pr("prompt-put-back", lambda r: config(r, retrieval={"top_k": 10}, chunking={"overlap": 50}))
    assert with_model.gate(hand)[0] == 0


def test_the_prompt_edited_alone_is_the_one_knob_not_no_knob(with_model):
    repo = with_model.pr("prompt-alone", prompt_rounds_up)
    code, stdout, verdict, comment = with_model.gate(repo)
    assert code == 1
    assert verdict["attribution"]["status"] == "one_knob"
    assert verdict["attribution"]["knobs"] == ["generation.prompt (prompt.j2 edited)"]
    assert "no knob that changes answers differs" not in stdout
    assert ("**Next step:** Revert generation.prompt (prompt.j2 edited) (the one change that changes answers), or "
            "change main's floors in a separate PR.") in comment


def test_a_baseline_older_than_recorded_files_finds_the_edit_in_git(with_model):
    """A RunResult written before ``files`` existed still loads; the edit is found by comparing the
    prompt with its content at the baseline's commit."""
    data = json.loads((with_model.root / "baseline.json").read_text(encoding="utf-8"))
    del data["files"]
    old = with_model.root / "baseline-without-files.json"
    old.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    repo = with_model.pr("prompt-old-baseline", prompt_rounds_up)
    code, _, verdict, comment = with_model.gate(repo, baseline=old)
    assert code == 1 and verdict["attribution"]["knobs"] == ["generation.prompt (prompt.j2 edited)"]
    assert "| generation.prompt | prompt.j2 | prompt.j2 content changed, +4 −3 lines |" in comment


# --- 2. corpus files ----------------------------------------------------------------------------

def test_a_corpus_file_alone_is_the_one_knob(offline):
    repo = offline.pr("corpus-only", lambda r: edit(doc_with(r, DOC_BEFORE), DOC_BEFORE, DOC_AFTER))
    code, stdout, verdict, _ = offline.gate(repo)
    assert code == 1
    assert verdict["attribution"]["status"] == "one_knob"
    assert verdict["attribution"]["knobs"] == ["corpus docs/doi-tra.md"]
    assert "next step: Revert corpus docs/doi-tra.md (the one change that changes answers)" in stdout


def test_each_failing_case_names_the_knob_whose_revert_fixes_it(offline):
    repo = offline.pr("corpus-and-size", lambda r: (edit(doc_with(r, DOC_BEFORE), DOC_BEFORE, DOC_AFTER),
                                                     config(r, chunking={"size": 400})))
    code, stdout, verdict, comment = offline.gate(repo)
    assert code == 1
    assert verdict["attribution"]["cases"] == {"q01": ["corpus docs/doi-tra.md"], "q121": ["chunking.size 200→400"],
                                               "q64": ["corpus docs/doi-tra.md"]}
    assert "↳ q01: reverting corpus docs/doi-tra.md makes it pass" in stdout
    assert "↳ q121: reverting chunking.size 200→400 makes it pass" in stdout
    assert "**Fixed by:** reverting corpus docs/doi-tra.md makes it pass (from the attribution runs)" in comment
    # each single revert was gated and still blocks (the other knob's cases), so neither is "the cause"
    assert "attribution: no single revert unblocks the gate: reverting every knob is needed" in stdout


# --- 3. many knobs: within the ceiling --------------------------------------------------------------

def ten_knobs(repo: Path) -> None:
    config(repo, chunking={"size": 220, "overlap": 10}, embedding={"dim": 1024},
           retrieval={"top_k": 6, "mode": "hybrid"}, generation={"max_sentences": 3, "temperature": 0.1})
    edit(doc_with(repo, DOC_BEFORE), DOC_BEFORE, DOC_AFTER)
    edit(repo / "docs" / "van-chuyen.md", "BanHang giao hàng toàn quốc qua các đối tác vận chuyển.",
         "BanHang giao hàng trên toàn quốc qua nhiều đối tác vận chuyển.")
    edit(repo / "docs" / "bao-hanh.md", "## BH-2 Trường hợp không được bảo hành",
         "## BH-2 Những trường hợp không được bảo hành")


def test_ten_changed_knobs_are_grouped_and_run_at_most_twice_max_knobs(offline):
    repo = offline.pr("ten-knobs", ten_knobs)
    code, stdout, verdict, comment = offline.gate(repo)
    assert code == 1
    found = verdict["attribution"]
    assert found["knobs"] == ["chunking (2 keys)", "embedding.dim 2048→1024", "generation (2 keys)",
                              "retrieval + corpus (2 keys, 3 files)"]
    assert found["runs"] == 8 == 2 * 4
    # no single revert unblocks; the pair that does was run and gated, within the ceiling
    assert ("attribution: no single revert unblocks the gate; reverting embedding.dim 2048→1024 and retrieval + "
            "corpus (2 keys, 3 files) does") in stdout
    # the values stay in the config changes table, not in the labels
    assert "| retrieval.mode | dense | hybrid |" in comment and "| chunking.overlap | 0 | 10 |" in comment


def test_max_knobs_past_eight_is_refused_by_validate(offline, tmp_path):
    repo = offline.pr("max-knobs-9", lambda r: config(r, attribution={"max_knobs": 9}))
    code, _, err = offline.run_cli("validate", "--config", repo / "rageval.yml")
    assert code == 2
    assert "'attribution.max_knobs' must be an integer from 1 to 8, got 9" in err


# --- 4. pairs, gains and losses -----------------------------------------------------------------

def test_a_pair_harmless_alone_is_named_as_the_pair_that_interacts(offline):
    repo = offline.pr("pair", lambda r: config(r, chunking={"size": 400}, embedding={"dim": 1024}))
    code, stdout, verdict, _ = offline.gate(repo)
    assert code == 1
    assert ("chunking.size 200→400 and embedding.dim 2048→1024 interact on mrr@5: alone they make +0.03 and 0.00, "
            "together −0.05") in stdout
    assert "chunking.size 200→400 improves mrr@5 by +0.03 alone" in stdout
    # by hand: each knob alone on main's config
    base = offline.baseline_value("mrr@5")
    size = offline.by_hand("size-400", lambda r: config(r, chunking={"size": 400}), "mrr@5") - base
    dim = offline.by_hand("dim-1024", lambda r: config(r, embedding={"dim": 1024}), "mrr@5") - base
    assert effect(verdict, "mrr@5", "chunking.size")["alone"] == pytest.approx(size, abs=1e-6)
    assert effect(verdict, "mrr@5", "embedding.dim")["alone"] == pytest.approx(dim, abs=1e-6)
    assert f"{size:+.2f}" == "+0.03" and abs(dim) < 0.005


def test_a_gain_and_a_loss_say_which_improves_and_which_revert_unblocks(offline):
    repo = offline.pr("gain-loss", lambda r: config(r, chunking={"size": 800}, embedding={"dim": 4096}))
    code, stdout, verdict, comment = offline.gate(repo)
    assert code == 1
    assert "embedding.dim 2048→4096 improves mrr@5 by +0.03 alone" in stdout
    assert "attribution: reverting chunking.size 200→800 alone unblocks the gate" in stdout
    assert verdict["attribution"]["unblocks"] == [["chunking.size 200→800"]]
    assert "**Next step:** Revert chunking.size 200→800: reverting it alone unblocks the gate." in comment
    # by hand: the PR with the chunk size put back passes
    hand = offline.pr("gain-kept", lambda r: config(r, embedding={"dim": 4096}))
    assert offline.gate(hand)[0] == 0


def test_the_seed_incident_claims_no_cause_a_revert_does_not_show(offline):
    repo = offline.pr("seed", lambda r: config(r, chunking={"size": 800}, embedding={"dim": 1024}))
    code, stdout, verdict, _ = offline.gate(repo)
    assert code == 1
    assert verdict["attribution"]["gated"] == 2 and verdict["attribution"]["unblocks"] == []
    assert "causes most of it" not in stdout
    assert "attribution: no single revert unblocks the gate: reverting every knob is needed" in stdout
    # by hand: the PR with the chunk size put back still blocks, and so does the one with the dim put back
    assert offline.gate(offline.pr("seed-size-back", lambda r: config(r, embedding={"dim": 1024})))[0] == 1
    assert offline.gate(offline.pr("seed-dim-back", lambda r: config(r, chunking={"size": 800})))[0] == 1


# --- 5. a baseline's commit id is data, never a git option ----------------------------------------

def test_a_baseline_commit_that_is_a_git_option_is_refused_and_writes_nothing(offline):
    repo = offline.pr("hostile-sha", lambda r: (edit(doc_with(r, DOC_BEFORE), DOC_BEFORE, DOC_AFTER),
                                                 config(r, chunking={"size": 400})))
    data = json.loads((offline.root / "baseline.json").read_text(encoding="utf-8"))
    target = offline.root / "written-by-git.txt"
    data["git_sha"] = f"--output={target}"
    hostile = offline.root / "hostile-baseline.json"
    hostile.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code, _, verdict, _ = offline.gate(repo, baseline=hostile)
    assert code == 1 and not target.exists()
    assert "is not a 40-hex commit id" in verdict["attribution"]["why"]
    assert verdict["attribution"]["knobs"] == ["chunking.size 200→400"]


# --- 6. one budget ---------------------------------------------------------------------------------

def test_the_pr_run_and_its_attribution_runs_spend_from_one_budget(with_model):
    """llm.max_cost_usd holds across the PR's run and every variant (issue 20 §4): past it no new call
    is made; what the variants spent is in the verdict, and the two together stay within the cap plus
    the calls already in flight (at most llm.concurrency)."""
    cap = 0.02                                     # the PR's run costs about half of it, the variants more
    repo = with_model.pr("budget", lambda r: (prompt_rounds_up(r), config(r, retrieval={"top_k": 10},
                                                                          llm={"max_cost_usd": cap})))
    candidate, out = repo / "candidate.json", repo / "v.json"
    code, _, err = with_model.run_cli("gate", "--config", repo / "rageval.yml", "--subset", "pr", "--baseline",
                                      with_model.root / "baseline.json", "--out", out, "--candidate-out", candidate)
    assert code == 1, err
    spent = json.loads(candidate.read_text(encoding="utf-8"))["cost"]
    found = json.loads(out.read_text(encoding="utf-8"))["attribution"]
    one_call = 0.0005                              # more than one call costs here (about 1,400 tokens)
    pr_usd = spent["usd"] + (spent.get("rerun") or {}).get("usd", 0.0)      # its first run and its re-runs
    assert 0 < pr_usd <= cap + 4 * one_call and pr_usd + found["cost"]["usd"] <= cap + 4 * one_call
    # the variants ran out of budget: nothing is attributed from answers that were not made
    assert found["status"] == "not_available" and found["why"].startswith("llm.max_cost_usd was reached during "
                                                                           "the attribution runs")
    assert found["metrics"] == [] and found["unblocks"] == []

"""`rageval judge-pair` end to end over real HTTP: two runs of a small project whose answers come
from two generator models on tests/openai_server.py, then the pairwise judge (a third model on the
same server) compares them case by case, in both orders. The judge's replies are scripted per
case: a consistent judge (numbers checked against the sources), a position-biased one, a refusal."""

from __future__ import annotations

import json

import pytest
from openai_server import Refusal
from test_judge import block, scripted_pair, system

from rageval.metrics.judge import PAIR_SYSTEM

CORPUS = ("DT-1: Khách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng.\n"
          "BH-1: Điện thoại được bảo hành 12 tháng tại hãng.\n")
#: id -> (question, expected section, expected answer, tagged pr, the baseline's answer, the candidate's answer)
CASES = {
    "c1": ("doi tra trong may ngay", "DT-1", "Trong 7 ngày.", True, "Trong 7 ngày.", "Trong 30 ngày."),
    "c2": ("bao hanh dien thoai bao lau", "BH-1", "Bảo hành 12 tháng.", True, "Bảo hành 6 tháng.", "Bảo hành 12 tháng."),
    "c3": ("doi hang mat bao lau", "DT-1", "Trong 7 ngày.", True, "Trong 7 ngày.", "Được đổi trong 7 ngày."),
    "c4": ("tra hang online bao lau", "DT-1", "Trong 7 ngày.", True, "Trong 7 ngày.", "Trong 7 ngày nhé."),
    "c5": ("hoan tien bao lau", "DT-1", "Trong 7 ngày.", True, "Trong 7 ngày.", "Trong 10 ngày."),
    "c6": ("doi size giay bao lau", "DT-1", "Trong 7 ngày.", False, "Trong 7 ngày.", "Trong 7 ngày."),
}
GENERATORS = {"gen-a": 4, "gen-b": 5}            # model -> index of its answer in CASES
JUDGE = "judge-model"


def case_of(text: str) -> str:
    return next(i for i, (question, *_) in CASES.items() if question in text)


def model(body: dict) -> str | Refusal:
    """Generators answer from CASES; the judge is consistent but for c4 (always prefers the answer
    shown first, whichever it is) and c5 (refuses)."""
    if body["model"] in GENERATORS:
        return CASES[case_of(body["messages"][-1]["content"])][GENERATORS[body["model"]]]
    assert system(body) == PAIR_SYSTEM, body
    case = case_of(block(body, "question"))
    if case == "c4":
        return json.dumps({"better": "A", "reason": "the first answer is more complete"})
    if case == "c5":
        return Refusal("I can't compare these answers.")
    return scripted_pair(body)


def write_project(folder, base_url, generator, judge="null"):
    folder.mkdir(exist_ok=True)
    cases = "".join(f"  - {{id: {i}, question: '{q}', expected_sections: [{s}], expected_answer: '{a}'"
                    f"{', tags: [pr]' if pr else ''}}}\n" for i, (q, s, a, pr, *_) in CASES.items())
    (folder / "golden.yaml").write_text(f"dataset: pairs\nversion: 1\ncases:\n{cases}", encoding="utf-8")
    (folder / "corpus.yaml").write_text(CORPUS, encoding="utf-8")
    (folder / "prompt.j2").write_text("{{ question }}\n{% for c in chunks %}{{ c.text }}{% endfor %}", encoding="utf-8")
    config = folder / "rageval.yml"
    config.write_text(f"golden: golden.yaml\ncorpus: corpus.yaml\n"
                      f"generation: {{provider: openai, model: {generator}, prompt: prompt.j2}}\n"
                      f"judge: {{model: {judge}}}\n"
                      f"llm: {{base_url: '{base_url}', max_retries: 0, cache_dir: {folder / 'cache'}}}\n"
                      f"retrieval: {{top_k: 1, k: [1]}}\n", encoding="utf-8")
    return config


@pytest.fixture
def runs(model_server, run_cli, tmp_path, monkeypatch):
    """The server, main's baseline (gen-a, the pr subset) and the PR's candidate (gen-b, every case)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = model_server(responder=model)
    main = write_project(tmp_path / "main", server.base_url, "gen-a")      # runs with no per-case judge
    pr = write_project(tmp_path / "pr", server.base_url, "gen-b")
    assert run_cli("run", main, "--subset", "pr", "--out", tmp_path / "a.json")[0] == 0
    assert run_cli("run", pr, "--out", tmp_path / "b.json")[0] == 0
    server.reset()
    return server, write_project(tmp_path / "pr", server.base_url, "gen-b", judge=JUDGE), \
        tmp_path / "a.json", tmp_path / "b.json"


def test_each_case_is_judged_in_both_orders_and_counts_only_when_they_agree(runs, run_cli, tmp_path):
    server, config, a, b = runs
    out = tmp_path / "pair.json"
    code, stdout, stderr = run_cli("judge-pair", config, "--baseline", a, "--candidate", b, "--out", out)
    assert code == 0, stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    outcomes = {c["id"]: (c["outcome"], c["first"], c["second"]) for c in report["cases"]}
    assert outcomes == {"c1": ("baseline", "baseline", "baseline"),         # 7 ngày beats 30 ngày, either way round
                        "c2": ("candidate", "candidate", "candidate"),
                        "c3": ("tie", "tie", "tie"),
                        "c4": ("disagree", "baseline", "candidate"),        # whichever was shown first
                        "c5": ("error", None, None)}
    assert report["totals"] == {"baseline": 1, "candidate": 1, "tie": 1, "disagree": 1, "error": 1}
    assert report["skipped"] == {"c6": "not in the baseline"}
    assert report["cases"][4]["error"] == "judge refused: I can't compare these answers."

    # what went over the wire: two requests per case, the answers swapped in the second
    bodies = server.bodies("chat")
    assert server.calls["chat"] == 9 == len(bodies)                       # c5 stops at its first refusal
    assert {b["model"] for b in bodies} == {JUDGE}
    c1 = [b for b in bodies if case_of(block(b, "question")) == "c1"]
    assert [(block(x, "answer_A"), block(x, "answer_B")) for x in c1] == [("Trong 7 ngày.", "Trong 30 ngày."),
                                                                          ("Trong 30 ngày.", "Trong 7 ngày.")]
    assert block(c1[0], "sources") == "DT-1\nKhách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng."
    assert report["cost"]["calls_total"] == 9 and report["cost"]["calls"] == {"judge": 9}

    assert "  c4: orders disagree (baseline shown first: baseline; candidate shown first: candidate)" in stdout
    assert "baseline better 1, candidate better 1, tie 1, orders disagree 1, errors 1" in stdout
    assert "not compared: 1 case: c6 (not in the baseline)" in stdout
    assert "model calls 9 (cache hits 0)" in stdout

    # asked again: the same verdicts, all nine replies from the response cache, no call
    code, again, _ = run_cli("judge-pair", config, "--baseline", a, "--candidate", b)
    assert code == 0 and again.splitlines()[:-1] == stdout.splitlines()[:-2]          # less "wrote pair.json"
    assert again.splitlines()[-1].startswith("model calls 0 (cache hits 9)") and server.calls["chat"] == 9


def test_a_judge_that_wrote_one_runs_answers_is_refused(runs, run_cli, tmp_path):
    server, config, a, b = runs
    same = write_project(tmp_path / "same", server.base_url, "gen-c", judge="openai/GEN-B")
    code, _, stderr = run_cli("judge-pair", same, "--baseline", a, "--candidate", b)
    assert code == 2
    assert "judge.model 'openai/GEN-B' is the model that wrote the candidate's answers" in stderr
    assert f"{b}: generation.model 'gen-b'" in stderr and "judge.allow_same_model: true" in stderr
    assert server.calls["chat"] == 0
    same.write_text(same.read_text(encoding="utf-8").replace("judge: {model: openai/GEN-B}",
                                                             "judge: {model: openai/GEN-B, allow_same_model: true}"),
                    encoding="utf-8")
    code, _, stderr = run_cli("judge-pair", same, "--baseline", a, "--candidate", b)
    assert code == 0, stderr


def test_no_judge_or_nothing_in_common_is_bad_input(runs, run_cli, tmp_path):
    server, config, a, b = runs
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace(f"judge: {{model: {JUDGE}}}", "judge: {model: null}"), encoding="utf-8")
    code, _, stderr = run_cli("judge-pair", config, "--baseline", a, "--candidate", b)
    assert code == 2 and "judge.model is not set" in stderr
    config.write_text(text, encoding="utf-8")
    data = json.loads(a.read_text(encoding="utf-8"))
    for case in data["cases"]:
        case["answer"], case["error"] = None, "connection refused"
    a.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    code, _, stderr = run_cli("judge-pair", config, "--baseline", a, "--candidate", b)
    assert code == 2 and "have no case in common that both answered (6 cases not comparable)" in stderr
    assert server.calls["chat"] == 0

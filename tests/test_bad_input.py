"""Bad input: one clear message naming the file and the key or line, exit code 2, nothing written.

The table runs `python -m rageval …` in a subprocess for every malformed input — rageval.yml, the
golden set, the corpus, replay traces, the command/http app settings, results files (``--baseline``,
``--candidate``, ``--verdict``) and the command line — and checks what a user sees: exit 2, exactly
one ``ERROR`` line (and at most one ``TIP`` line) that names the file and the key or line, no
traceback, every file of the project byte for byte as it was (an existing ``--out`` included, and no
temp file left), and a peak memory under 500 MB.

Peak memory: ``os.wait4`` reaps each child and returns *its own* rusage, so ``ru_maxrss`` is that
run's peak resident set (KiB on Linux). ``resource.getrusage(RUSAGE_CHILDREN)`` would be the
maximum over every child this pytest process ever reaped (one bad run would taint all later ones),
and ``/usr/bin/time -v`` is not on every machine and writes into the stderr under test. As a
safety net against a runaway (an alias bomb once took 3.1 GB), each child also gets an 8 GiB
address-space limit and a 120 s deadline.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import seed_data
from openai_server import OpenAIServer

from rageval.cli import main as cli_main

MAX_RSS_BYTES = 500 * 2**20
PROGRESS = re.compile(r"rageval [\w-]+: \d+/\d+ cases")   # progress lines (stderr, not a TTY) may come first
CHILD_ADDRESS_SPACE = 8 * 2**30
CHILD_DEADLINE_S = 120.0

Content = str | bytes | Callable[[str], str | bytes] | None   # None: delete the file


@dataclass(frozen=True)
class Bad:
    id: str
    argv: tuple[str, ...]                      # after `python -m rageval`; paths relative to the project
    files: dict[str, Content] = field(default_factory=dict)  # replaced before the run; a callable edits the old text
    fragments: tuple[str, ...] = ()            # the ERROR line contains each


CFG = "chunk-200.yml"
RUN = ("run", "--config", CFG, "--out", "out.json")
VALIDATE = ("validate", "--config", CFG, "--no-git")
GATE = ("gate", "--config", CFG, "--baseline", "base.json", "--candidate", "cand.json", "--out", "out.json",
        "--report-md", "out.md")
REPORT = ("report", "--config", CFG, "--verdict", "verdict.json", "--baseline", "base.json",
          "--candidate", "cand.json", "--out", "out.md")

BASE_CONFIG = seed_data.CONFIG.format(config="chunk-200", size=200)
DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_YAML = "[" * 100_000 + "]" * 100_000
BOMB_HEADERS = ("app:\n  type: http\n  url: http://127.0.0.1:9/answer\n  headers:\n"
                '    a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
                + "".join(f"    {k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi")))
TRACE = json.dumps(seed_data.traces("chunk-200")[0], ensure_ascii=False)


def config(extra: str = "", *, replace: tuple[str, str] | None = None) -> str:
    text = BASE_CONFIG if replace is None else BASE_CONFIG.replace(*replace)
    return text + extra


def golden_yaml(text: str) -> dict[str, Content]:
    """The project with its golden set as golden.yaml holding ``text``."""
    return {"golden.yaml": text, CFG: config(replace=("golden: golden.json", "golden: golden.yaml"))}


def edit(replace_from: str, replace_to: str) -> Callable[[str], str]:
    def change(text: str) -> str:
        assert replace_from in text, f"{replace_from!r} not in the file"
        return text.replace(replace_from, replace_to, 1)
    return change


def edit_json(change: Callable[[dict], object]) -> Callable[[str], str]:
    def apply(text: str) -> str:
        data = json.loads(text)
        change(data)
        return json.dumps(data, ensure_ascii=False, indent=1)
    return apply


def set_key(*path_and_value: object) -> Callable[[str], str]:
    *path, value = path_and_value

    def change(data: dict) -> None:
        for key in path[:-1]:
            data = data[key]
        data[path[-1]] = value
    return edit_json(change)


GOLDEN_YAML = ("dataset: banhang\nversion: 1\ncases:\n"
               "  - id: q01\n    question: Mua áo mặc không vừa thì được trả trong mấy ngày?\n"
               "    expected_sections: [DT-1]\n")
Q01 = '"cau_hoi": "Mua áo mặc không vừa thì được trả trong mấy ngày?"'

TABLE = [
    # --- rageval.yml --------------------------------------------------------------------------
    Bad("config-not-utf8", RUN, {CFG: BASE_CONFIG.encode() + b"report: {title: caf\xe9}\n"}, (CFG, "UTF-8", "line 9")),
    Bad("config-deep", RUN, {CFG: config("report: " + DEEP_YAML + "\n")}, (CFG, "line 9", "nested")),
    Bad("config-alias-bomb-headers", RUN, {CFG: config(replace=("app: {type: replay, path: chunk-200.jsonl}\n", ""))
                                           + BOMB_HEADERS}, (CFG, "line 13", "alias")),
    Bad("config-duplicate-key", RUN, {CFG: config("gate: {}\n")}, (CFG, "'gate'", "line 9")),
    Bad("config-duplicate-nested-key", RUN,
        {CFG: config(replace=("floors: {hit@3: 0.95, mrr@5: 0.85}", "floors:\n    hit@3: 0.95\n    mrr@5: 0.85\n    hit@3: 0.5"))},
        (CFG, "'hit@3'", "line 10")),
    Bad("config-nan-floor", RUN, {CFG: config(replace=("hit@3: 0.95", "hit@3: .nan"))}, (CFG, "gate.floors.hit@3")),
    Bad("config-inf-noise-k", RUN, {CFG: config(replace=("gate:\n", "gate:\n  noise_k: .inf\n"))}, (CFG, "gate.noise_k")),
    Bad("config-floor-out-of-range", RUN, {CFG: config(replace=("mrr@5: 0.85", "mrr@5: 1.1"))}, (CFG, "gate.floors.mrr@5")),
    Bad("config-significance-zero", GATE, {CFG: config(replace=("gate:\n", "gate:\n  significance: 0\n"))},
        (CFG, "line 7", "gate.significance", "strictly between 0 and 1")),
    Bad("config-significance-one", RUN, {CFG: config(replace=("gate:\n", "gate:\n  significance: 1\n"))},
        (CFG, "line 7", "gate.significance", "strictly between 0 and 1")),
    Bad("config-huge-embedding-dim", RUN, {CFG: config("embedding: {dim: 100000000000}\n")}, (CFG, "embedding.dim")),
    Bad("config-command-unclosed-quote", RUN,
        {CFG: config(replace=("{type: replay, path: chunk-200.jsonl}", "{type: command, command: \"'x\"}"))},
        (CFG, "app.command", "line 3")),
    Bad("config-url-not-a-url", RUN,
        {CFG: config(replace=("{type: replay, path: chunk-200.jsonl}", '{type: http, url: "not a url"}'))},
        (CFG, "app.url", "line 3")),
    Bad("config-command-cannot-start", RUN,
        {CFG: config(replace=("{type: replay, path: chunk-200.jsonl}", "{type: command, command: [/nonexistent/app]}"))},
        ("app.command", "/nonexistent/app")),
    Bad("config-yaml-syntax", RUN, {CFG: config(replace=("{hit@3: 0.95, mrr@5: 0.85}", "{hit@3: 0.95"))},
        (CFG, "line", "YAML")),
    Bad("config-wrong-type", RUN, {CFG: config(replace=("{size: 200}", "{size: big}"))}, (CFG, "line 4", "chunking.size")),
    Bad("config-typo-key", RUN, {CFG: config("gaet: {floors: {hit@3: 0.9}}\n")}, (CFG, "line 9", "gaet", "did you mean 'gate'")),
    Bad("config-nul-byte", RUN, {CFG: config("report: {title: a\x00b}\n")}, (CFG, "line 9")),
    Bad("config-second-document", RUN, {CFG: config("---\nreport: {}\n")}, (CFG, "line 9")),
    Bad("config-is-a-list", RUN, {CFG: "- golden.json\n- corpus.yaml\n"}, (CFG,)),
    Bad("config-empty-k", RUN, {CFG: config(replace=("k: [1, 3, 5]", "k: []"))}, (CFG, "retrieval.k")),
    Bad("config-prompt-syntax-error", VALIDATE,
        {CFG: config("generation: {provider: openai, model: gpt-4o-mini, prompt: prompt.j2}\n"),
         "prompt.j2": "Trả lời: {{ question\n"}, ("prompt.j2", "line 1")),
    Bad("config-missing-golden", RUN, {CFG: config(replace=("golden: golden.json", "golden: missing.yaml"))},
        ("missing.yaml", "not found")),
    # --- the golden set -----------------------------------------------------------------------
    Bad("golden-json-deep", RUN, {"golden.json": DEEP_JSON}, ("golden.json", "line 1", "nested")),
    Bad("golden-yaml-deep", RUN, golden_yaml("cases: " + DEEP_YAML + "\n"), ("golden.yaml", "line 1", "nested")),
    Bad("golden-yaml-version-twice", RUN, golden_yaml(GOLDEN_YAML.replace("version: 1\n", "version: 1\nversion: 2\n")),
        ("golden.yaml", "'version'", "line 3")),
    Bad("golden-yaml-alias-bomb", RUN, golden_yaml(BOMB_HEADERS.replace("    ", "").split("headers:\n")[1]),
        ("golden.yaml", "line 2", "alias")),
    Bad("golden-json-duplicate-key", RUN, {"golden.json": edit('"id": "q02"', '"id": "q02", "id": "q09"')},
        ("golden.json", "'id'", "line")),
    Bad("golden-json-nan", RUN, {"golden.json": edit(Q01, Q01 + ', "slice": {"w": NaN}')}, ("golden.json", "NaN")),
    Bad("golden-json-not-utf8", RUN, {"golden.json": json.dumps(seed_data.GOLDEN).encode() + b"\xff"},
        ("golden.json", "UTF-8")),
    Bad("golden-id-twice", RUN, {"golden.json": edit('"id": "q02"', '"id": "q01"')}, ("golden.json", "q01", "appears twice")),
    Bad("golden-unknown-section", RUN, {"golden.json": edit('"DT-1"', '"DT-9"')}, ("golden.json", "q01", "DT-9")),
    Bad("golden-missing-question", RUN, {"golden.json": edit(Q01 + ",", "")}, ("golden.json", "q01", "question")),
    Bad("golden-tags-not-a-list", RUN, {"golden.json": edit(Q01, Q01 + ', "tags": 5')}, ("golden.json", "q01", "tags")),
    Bad("golden-must-include-empty", RUN, {"golden.json": edit(Q01, Q01 + ', "must_include": ["7 ngày", ""]')},
        ("golden.json", "case 'q01'", "'must_include' item 2 is empty")),
    Bad("golden-must-not-include-blank", RUN, golden_yaml(GOLDEN_YAML + "    must_not_include: ['  ']\n"),
        ("golden.yaml", "line 4", "case 'q01'", "'must_not_include' item 1 is empty")),
    # --- the corpus ---------------------------------------------------------------------------
    Bad("corpus-not-utf8", RUN, {"corpus.yaml": lambda text: text.encode("utf-8") + b"DT-9: caf\xe9\n"},  # type: ignore[dict-item]
        ("corpus.yaml", "UTF-8", "line 11")),
    Bad("corpus-glob-etc", RUN, {CFG: config(replace=("corpus: corpus.yaml", 'corpus: "/etc/*"'))}, ("/etc/",)),
    Bad("corpus-deep", RUN, {"corpus.yaml": "DT-1: " + DEEP_YAML + "\n"}, ("corpus.yaml", "line 1", "nested")),
    Bad("corpus-duplicate-section", RUN, {"corpus.yaml": lambda text: text + 'DT-1: "again"\n'},
        ("corpus.yaml", "'DT-1'", "line 11")),
    Bad("corpus-alias", RUN, {"corpus.yaml": lambda text: text.replace('DT-6: "', 'DT-6: &x "') + "DT-9: *x\n"},
        ("corpus.yaml", "line 11", "alias")),
    Bad("corpus-section-not-text", RUN, {"corpus.yaml": "DT-1: [not, text]\n"}, ("corpus.yaml", "DT-1")),
    # --- replay traces ------------------------------------------------------------------------
    Bad("replay-not-utf8", RUN, {"chunk-200.jsonl": lambda text: text.encode("utf-8") + b'{"id": "q\xff"}\n'},
        ("chunk-200.jsonl", "UTF-8", "line 6")),
    Bad("replay-deep", RUN, {"chunk-200.jsonl": lambda text: text + DEEP_JSON + "\n"}, ("chunk-200.jsonl", "line 6")),
    Bad("replay-nan-score", RUN, {"chunk-200.jsonl": edit('"score": 1.0', '"score": NaN')},
        ("chunk-200.jsonl", "line 1", "finite")),
    Bad("replay-overflowing-score", RUN, {"chunk-200.jsonl": edit('"score": 1.0', '"score": 1e999')},
        ("chunk-200.jsonl", "line 1")),
    Bad("replay-infinite-usage", RUN, {"chunk-200.jsonl": edit('{"id": "q01",', '{"id": "q01", "usage": {"prompt_tokens": -1e999},')},
        ("chunk-200.jsonl", "line 1")),
    Bad("replay-duplicate-key", RUN, {"chunk-200.jsonl": edit('{"id": "q01",', '{"id": "q01", "id": "q02",')},
        ("chunk-200.jsonl", "line 1", "'id'")),
    Bad("replay-not-json", RUN, {"chunk-200.jsonl": TRACE + '\n{"id": "q02", "answer": \n'}, ("chunk-200.jsonl", "line 2")),
    Bad("replay-answer-not-text", RUN, {"chunk-200.jsonl": '{"id": "q01", "answer": 5}\n'},
        ("chunk-200.jsonl", "line 1", "'answer' must be a string")),
    Bad("replay-unknown-key", RUN, {"chunk-200.jsonl": '{"id": "q01", "anwser": "x"}\n'},
        ("chunk-200.jsonl", "line 1", "anwser")),
    Bad("replay-id-a-list", RUN, {"chunk-200.jsonl": edit('{"id": "q01",', '{"id": ["q01"],')},
        ("chunk-200.jsonl", "line 1", "'id' must be a string")),
    Bad("replay-chunk-id-a-mapping", RUN, {"chunk-200.jsonl": edit('"chunk_id": "c01"', '"chunk_id": {"c": 1}')},
        ("chunk-200.jsonl", "line 1", "retrieved item 1", "'chunk_id' must be a string")),
    Bad("replay-too-many-retrieved", RUN,
        {"chunk-200.jsonl": json.dumps({"id": "q01", "answer": "x", "retrieved": [{"chunk_id": f"c{i}"} for i in range(10_001)]}) + "\n"},
        ("chunk-200.jsonl", "line 1", "10,001 retrieved items", "at most 10,000")),
    Bad("replay-missing-file", ("run", "--config", CFG, "--app", "replay:nope.jsonl", "--out", "out.json"), {},
        ("nope.jsonl", "not found")),
    # --- results files ------------------------------------------------------------------------
    Bad("baseline-deep", GATE, {"base.json": DEEP_JSON}, ("base.json", "nested")),
    Bad("baseline-nan-pass-rate", GATE, {"base.json": edit('"pass_rate":1.0', '"pass_rate":NaN')}, ("base.json", "NaN")),
    Bad("baseline-string-pass-rate", GATE, {"base.json": set_key("summary", "metrics", "pass_rate", "1.0")},
        ("base.json", "pass_rate")),
    # a null (n/a) summary value is not bad input: the gate recomputes every summary from the cases
    # (tests/gate/test_fail_closed.py: the drop then blocks)
    Bad("baseline-infinite-sigma", GATE, {"base.json": edit('"noise":null', '"noise":{"sigma":{"mrr@5":Infinity}}')},
        ("base.json", "Infinity")),
    Bad("baseline-corpus-section-not-an-object", GATE, {"base.json": set_key("corpus", "sections", {"DT-1": "x"})},
        ("base.json", "corpus.sections.DT-1")),
    Bad("baseline-duplicate-key", GATE, {"base.json": edit('"schema_version":', '"git_sha": null, "schema_version":')},
        ("base.json", "'git_sha'")),
    Bad("baseline-not-utf8", GATE, {"base.json": lambda text: text.encode("utf-8").replace(b"Mua", b"M\xffa", 1)},
        ("base.json", "UTF-8")),
    Bad("baseline-a-list", GATE, {"base.json": "[]"}, ("base.json",)),
    Bad("baseline-missing", GATE, {"base.json": None}, ("base.json", "not found")),
    Bad("candidate-case-passed-not-bool", GATE, {"cand.json": set_key("cases", 1, "passed", "yes")},
        ("cand.json", "cases[q02].passed")),
    Bad("candidate-case-without-id", GATE, {"cand.json": edit('"id":"q02",', "")}, ("cand.json", "cases[1]")),
    Bad("candidate-case-id-a-list", GATE, {"cand.json": set_key("cases", 0, "id", ["q01"])},
        ("cand.json", "cases[0].id", "expected a string, got list")),
    Bad("candidate-case-id-a-mapping", GATE, {"cand.json": set_key("cases", 0, "id", {"q": 1})},
        ("cand.json", "cases[0].id", "expected a string, got dict")),
    Bad("baseline-chunk-id-a-list", GATE, {"base.json": set_key("cases", 0, "retrieved", 0, "chunk_id", ["c01"])},
        ("base.json", "cases[0].retrieved[0].chunk_id", "expected a string, got list")),
    Bad("baseline-chunk-id-a-mapping", GATE, {"base.json": set_key("cases", 2, "retrieved", 1, "chunk_id", {"c": 1})},
        ("base.json", "cases[2].retrieved[1].chunk_id", "expected a string, got dict")),
    Bad("candidate-is-a-verdict", ("gate", "--config", CFG, "--baseline", "base.json", "--candidate", "verdict.json",
                                   "--out", "out.json"), {}, ("verdict.json",)),
    Bad("report-metrics-oops", REPORT, {"verdict.json": set_key("metrics", "oops")}, ("verdict.json", "metrics")),
    Bad("report-verdict-deep", REPORT, {"verdict.json": DEEP_JSON}, ("verdict.json", "nested")),
    Bad("report-verdict-nan", REPORT, {"verdict.json": edit('"delta": -0.4', '"delta": NaN')}, ("verdict.json", "NaN")),
    Bad("report-verdict-is-a-result", ("report", "--config", CFG, "--verdict", "base.json", "--candidate", "cand.json",
                                       "--out", "out.md"), {}, ("base.json",)),
    # --- the command line ---------------------------------------------------------------------
    Bad("cli-config-not-found", ("validate", "--config", "nope.yml"), {}, ("nope.yml", "not found")),
    Bad("cli-app-not-replay", ("run", "--config", CFG, "--app", "command:x", "--out", "out.json"), {}, ("--app", "replay:FILE")),
    Bad("cli-unknown-subset", ("run", "--config", CFG, "--subset", "nightly", "--out", "out.json"), {}, ("nightly",)),
    Bad("cli-out-under-a-file", ("run", "--config", CFG, "--out", "golden.json/out.json"), {}, ("golden.json/out.json",)),
    Bad("cli-golden-add-unknown-section", ("golden", "add", "--config", CFG, "--question", "Giao hàng mất mấy ngày?",
                                           "--expected-sections", "DT-99", "--source", "chat"),
        golden_yaml(GOLDEN_YAML), ("golden.yaml", "DT-99")),
    Bad("cli-candidates-deep-log-line", ("golden", "candidates", "--config", CFG, "--logs", "chat.jsonl",
                                         "--out", "candidates.yaml"),
        {"chat.jsonl": '{"message": "đổi trả thế nào?"}\n{"message": "x", "meta": ' + DEEP_JSON + "}\n"},
        ("chat.jsonl", "line 2", "nested")),
    Bad("cli-labels-not-utf8", ("judge-agreement", "--config", CFG, "--labels", "labels.jsonl", "--results", "base.json"),
        {"labels.jsonl": b'{"id": "q01", "label": "pass\xff"}\n'}, ("labels.jsonl",)),
]


# --- running it --------------------------------------------------------------------------------

def _limit_child() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))


def run_measured(argv: tuple[str, ...], cwd: Path) -> tuple[int, str, str, int]:
    """(exit code, stdout, stderr, peak RSS in bytes) of `python -m rageval argv` run in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "OPENAI_"))}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "rageval", *argv], cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=env, preexec_fn=_limit_child)
        deadline = time.monotonic() + CHILD_DEADLINE_S
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)   # reaped here, so Popen must not wait again
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                usage.ru_maxrss * 1024)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The seed project with good results files: base.json (chunk-200), cand.json (chunk-800) and
    the verdict of gating one on the other."""
    folder = tmp_path_factory.mktemp("template")
    paths = seed_data.write_project(folder)
    quiet = open(os.devnull, "w")  # noqa: SIM115 - closed below
    try:
        assert cli_main(["run", "--config", str(paths["chunk-200"]), "--out", str(folder / "base.json")], quiet) == 0
        assert cli_main(["run", "--config", str(paths["chunk-800"]), "--out", str(folder / "cand.json")], quiet) == 0
        assert cli_main(["gate", "--config", str(paths["chunk-200"]), "--baseline", str(folder / "base.json"),
                         "--candidate", str(folder / "cand.json"), "--out", str(folder / "verdict.json")], quiet) == 1
    finally:
        quiet.close()
    (folder / "out.json").write_text("previous results\n", encoding="utf-8")
    (folder / "out.md").write_text("previous report\n", encoding="utf-8")
    return folder


def prepare(bad: Bad, template: Path, folder: Path) -> None:
    shutil.copytree(template, folder)
    for name, content in bad.files.items():
        path = folder / name
        if content is None:
            path.unlink()
        elif callable(content):
            new = content(path.read_text(encoding="utf-8"))
            path.write_bytes(new if isinstance(new, bytes) else new.encode("utf-8"))
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))


@pytest.fixture(scope="module")
def outcomes(request, template, tmp_path_factory) -> dict[str, Future]:
    """Every selected row of the table, run four at a time (each one is a fresh interpreter)."""
    selected = {item.callspec.params["bad"].id for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "bad" in item.callspec.params}
    root = tmp_path_factory.mktemp("bad")
    jobs: dict[str, Future] = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for bad in TABLE:
            if bad.id in selected:
                folder = root / bad.id
                prepare(bad, template, folder)
                before = snapshot(folder)
                jobs[bad.id] = pool.submit(lambda b=bad, f=folder, s=before: (*run_measured(b.argv, f), s, snapshot(f)))
        yield jobs


def test_the_table_covers_every_kind_of_input():
    assert len(TABLE) >= 40 and len({b.id for b in TABLE}) == len(TABLE)
    kinds = {b.id.split("-")[0] for b in TABLE}
    assert {"config", "golden", "corpus", "replay", "baseline", "candidate", "report", "cli"} <= kinds


@pytest.mark.parametrize("bad", TABLE, ids=[b.id for b in TABLE])
def test_bad_input_exits_2_with_one_error_line_and_changes_nothing(bad, outcomes):
    code, stdout, stderr, rss, before, after = outcomes[bad.id].result(timeout=CHILD_DEADLINE_S + 60)
    lines = [line for line in stderr.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert "Traceback" not in stderr + stdout, stderr[-3000:]
    assert code == 2, f"exit {code}; stderr: {stderr[-1500:]}"
    assert lines and lines[0].startswith("ERROR "), stderr[-1500:]
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("TIP ")), stderr[-1500:]
    missing = [f for f in bad.fragments if f not in lines[0]]
    assert not missing, f"{missing} not in: {lines[0][:600]}"
    assert before == after, f"changed: {sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))}"
    assert rss < MAX_RSS_BYTES, f"peak RSS {rss / 2**20:.0f} MB"


# --- single cases --------------------------------------------------------------------------------

def break_file(project, name, text):
    (project["chunk-200"].parent / name).write_text(text, encoding="utf-8")


def test_validate_ok(seed_project, run_cli):
    code, stdout, _ = run_cli("validate", "--config", seed_project["chunk-200"])
    assert code == 0
    assert "5 cases" in stdout and "10 sections" in stdout


def test_validate_catches_a_broken_trace_file(seed_project, run_cli):
    break_file(seed_project, "chunk-200.jsonl", "not json\n")
    code, _, stderr = run_cli("validate", "--config", seed_project["chunk-200"])
    assert code == 2 and "chunk-200.jsonl: line 1" in stderr


PROMPT = "Trả lời câu hỏi từ tài liệu.\n{% for c in chunks %}{{ c.text }}\n{% endfor %}Câu hỏi: {{ question }}\n"


def test_a_cache_file_nested_100000_deep_is_a_miss(tmp_path):
    """The response cache is ours to rewrite: an unreadable file is a miss, never an error."""
    paths = seed_data.write_project(tmp_path / "p")
    folder = paths["chunk-200"].parent
    (folder / "prompt.j2").write_text(PROMPT, encoding="utf-8")
    with OpenAIServer(rules=[("", "Trong 7 ngày.")]) as server:
        paths["chunk-200"].write_text(
            config(replace=("app: {type: replay, path: chunk-200.jsonl}\n", "")) +
            f"generation: {{provider: openai, model: gpt-4o-mini, prompt: prompt.j2}}\n"
            f"llm: {{base_url: '{server.base_url}', cache_dir: cache}}\n", encoding="utf-8")
        first = run_measured(("run", "--config", CFG, "--out", "first.json"), folder)
        assert first[0] == 0, first[2][-1500:]
        calls = server.calls["chat"]
        cached = sorted(p for p in (folder / "cache").rglob("*.json"))
        assert calls == 5 and len(cached) == 5
        for path in cached:
            path.write_text(DEEP_JSON, encoding="utf-8")
        code, _, stderr, rss = run_measured(("run", "--config", CFG, "--out", "second.json"), folder)
    assert code == 0 and "Traceback" not in stderr, stderr[-1500:]
    assert server.calls["chat"] == 2 * calls          # every deep file was a miss: asked again
    second = json.loads((folder / "second.json").read_text(encoding="utf-8"))
    assert [c["answer"] for c in second["cases"]] == ["Trong 7 ngày."] * 5
    assert rss < MAX_RSS_BYTES

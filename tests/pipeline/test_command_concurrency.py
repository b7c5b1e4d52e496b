"""A command app honours ``app.concurrency`` (issue #19): the runner's threads each keep a
long-lived process of the pool busy, so with concurrency 8 several processes answer at the same
time, and with 1 a single process answers every case in turn; the results stay in case order and a
broken process costs its own case only. Measured by the processes' own start/end times (overlap),
never by wall-clock thresholds."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from conftest import ROOT

from rageval.config import load_config
from rageval.golden.set import Case
from rageval.pipeline.apps.command import MAX_STDERR_LINE, CommandApp, Isolation
from rageval.pipeline.runner import prepare

CRASH = "q02"
SLOW_APP = """\
import json, os, sys, time
log = os.environ["TIMES_LOG"]
for line in sys.stdin:
    req = json.loads(line)
    start = time.time()
    time.sleep(0.02)
    if req["id"] == os.environ.get("CRASH_ON"):
        os._exit(7)
    end = time.time()
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": req["id"], "pid": os.getpid(), "start": start, "end": end}) + "\\n")
    print(json.dumps({"id": req["id"], "answer": "answer to " + req["id"]}), flush=True)
"""


def _run(tmp_path, concurrency, crash_on=""):
    folder = tmp_path / "banhang"
    shutil.copytree(ROOT / "examples" / "banhang", folder, ignore=shutil.ignore_patterns(".rageval-cache"))
    (folder / "slow_app.py").write_text(SLOW_APP, encoding="utf-8")
    cfg = folder / f"slow-{concurrency}.yml"
    text = (folder / "rageval.yml").read_text(encoding="utf-8")
    assert "\napp: {type: builtin}\n" in text
    cfg.write_text(text.replace("\napp: {type: builtin}\n", f"\napp: {{type: command, command: [{json.dumps(sys.executable)}, "
                                f"slow_app.py], concurrency: {concurrency}}}\n"), encoding="utf-8")
    log = tmp_path / f"times-{concurrency}.jsonl"
    ev = prepare(load_config(cfg), subset="pr", env={"TIMES_LOG": str(log), "CRASH_ON": crash_on})
    try:
        result = ev.run()
    finally:
        ev.app.close()
    times = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    return ev, result, times


def _overlapping_pairs(times):
    return [(a["id"], b["id"]) for i, a in enumerate(times) for b in times[i + 1:]
            if a["start"] < b["end"] and b["start"] < a["end"]]


def test_concurrency_8_runs_several_processes_at_once_and_keeps_case_order(tmp_path):
    ev, result, times = _run(tmp_path, 8)
    ids = [c.id for c in ev.golden.cases]
    assert len(ids) >= 8
    assert [c.id for c in result.cases] == ids                 # the golden set's order, whatever finished first
    assert [c.answer for c in result.cases] == [f"answer to {i}" for i in ids]
    assert sorted(t["id"] for t in times) == sorted(ids)       # each case asked once
    pids = {t["pid"] for t in times}
    assert 2 <= len(pids) <= 8                                 # a pool, never more processes than workers
    overlapping = _overlapping_pairs(times)
    assert overlapping, "no two cases were answered at the same time"
    pid = {t["id"]: t["pid"] for t in times}
    assert any(pid[a] != pid[b] for a, b in overlapping)      # two processes at the same time


def test_concurrency_1_uses_one_process_in_turn(tmp_path):
    _, result, times = _run(tmp_path, 1)
    assert len({t["pid"] for t in times}) == 1
    assert _overlapping_pairs(times) == []
    assert all(c.error is None for c in result.cases)


@pytest.mark.parametrize("concurrency", [1, 8])
def test_a_process_that_dies_costs_its_own_case_only(tmp_path, concurrency):
    ev, result, times = _run(tmp_path, concurrency, crash_on=CRASH)
    by_id = {c.id: c for c in result.cases}
    assert by_id[CRASH].error == f"{sys.executable} exited with code 7 without answering"
    others = [c for c in result.cases if c.id != CRASH]
    assert others and all(c.error is None and c.answer == f"answer to {c.id}" for c in others)
    assert CRASH not in {t["id"] for t in times}


def test_stderr_goes_to_the_sink_as_whole_lines_and_a_long_line_in_pieces(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    sys.stderr.write('::error::FORGED from ' + req['id'] + '\\npart one '); sys.stderr.flush()\n"
        "    sys.stderr.write('part two\\n' + 'x' * 20000 + '\\n'); sys.stderr.flush()\n"
        "    print(json.dumps({'id': req['id'], 'answer': 'ok'}), flush=True)\n", encoding="utf-8")
    got: list[str] = []
    app = CommandApp((sys.executable, str(script)), tmp_path, 5, env={}, isolation=Isolation(stderr=got.append))
    try:
        assert app.answer(Case("q01", "?")).answer == "ok"
    finally:
        app.close()
    text = "".join(got)
    assert text.startswith("::error::FORGED from q01\npart one part two\n")
    assert text.count("x") == 20000
    assert all(len(chunk.encode()) <= MAX_STDERR_LINE or "\n" in chunk for chunk in got)

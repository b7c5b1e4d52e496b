"""The builtin app's deterministic pipeline answers its blocks of cases in forked worker processes,
one per core (rageval.pipeline.workers):

- the RunResult is the one a single process writes, byte for byte (the clock left out), for a whole
  run, a shard and a re-run of some cases with the cache bypassed; results come in the cases'
  order and progress is reported case by case up to the total, as in one process;
- it fails closed and bounded: a worker's RagevalError or bug surfaces as the single-process run's
  (exit 2 / exit 3), a worker that dies stops the run with a RagevalError (exit 2, no results), and
  an exception or Ctrl-C in the parent — or the parent being killed — leaves no worker behind;
- it forks only for the builtin app, from the main thread; RAGEVAL_PROCESSES caps it (1: none) and
  a malformed value is refused.

The project is bench/synthetic.py's, with 700 cases: three blocks of rageval.pipeline.runner.BLOCK,
in two worker processes two searches (the first two blocks, then the third).
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import synthetic  # noqa: E402

from rageval import cli  # noqa: E402
from rageval.clock import Clock  # noqa: E402
from rageval.config import load_config  # noqa: E402
from rageval.errors import RagevalError  # noqa: E402
from rageval.files import write_json  # noqa: E402
from rageval.pipeline import runner, workers  # noqa: E402
from rageval.pipeline.generation import ExtractiveGenerator  # noqa: E402
from rageval.pipeline.runner import BLOCK, prepare  # noqa: E402
from rageval.results import Shard  # noqa: E402

pytestmark = pytest.mark.skipif(not workers.can_fork(), reason="worker processes are forked (Linux, macOS)")

CASES = 700
LATE = "b600"          # a case of the second search: the first worker is busy with the first one


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    cfg = synthetic.write_project(tmp_path_factory.mktemp("workers"), 300, CASES)
    assert -(-CASES // BLOCK) == 3
    two = evaluation(cfg, "2")
    assert [[len(b) for b in s] for s in two.searches(two.golden.cases)] == [[BLOCK, BLOCK], [CASES - 2 * BLOCK]]
    return cfg


def evaluation(cfg: Path, processes: str, **options):
    return prepare(load_config(cfg), env={"RAGEVAL_PROCESSES": processes}, clock=Clock(reproducible=True), **options)


def written(result, path: Path) -> bytes:
    write_json(path, result)
    return path.read_bytes()


@contextmanager
def deadline(seconds: int):
    """A hang fails the test instead of stopping the suite."""
    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def gone(pid: int) -> bool:
    """No such process any more, or a zombie waiting for a reaper that is not us."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def all_gone(pids: list[int], within: float = 30) -> bool:
    """Whether every process of ``pids`` is gone within ``within`` seconds (one that has closed its
    files is still exiting for a moment)."""
    ends = time.monotonic() + within
    while not all(gone(pid) for pid in pids) and time.monotonic() < ends:
        time.sleep(0.05)
    return all(gone(pid) for pid in pids)


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text(encoding="ascii")
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


# --- the same results -----------------------------------------------------------------------------

def answering_processes(monkeypatch) -> dict[str, Path]:
    """Each process answering a case appends its pid to the file named by the returned dict's
    "record" (a worker inherits the patch, and the file name as it was when it forked)."""
    where: dict[str, Path] = {}
    generate = ExtractiveGenerator.generate

    def patched(self, *args, **kwargs):
        with open(where["record"], "a", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
        return generate(self, *args, **kwargs)
    monkeypatch.setattr(ExtractiveGenerator, "generate", patched)
    return where


def run_three_ways(cfg: Path, processes: str, folder: Path) -> dict:
    """A whole run, shard 1 of 2, and a re-run of every other case with the cache bypassed (as the
    gate's confirmation does), each as written bytes, and the progress calls."""
    out: dict = {"progress": []}

    def progress(done: int, total: int) -> None:
        out["progress"].append((done, total))
    ev = evaluation(cfg, processes)
    whole = ev.run(progress=progress)
    out["whole"] = written(whole, folder / f"whole-{processes}.json")
    again = [c.id for c in ev.golden.cases][::2]
    out["rerun"] = written(ev.run(case_ids=again, previous=whole, fresh=True, progress=progress),
                           folder / f"rerun-{processes}.json")
    out["shard"] = written(evaluation(cfg, processes, shard=Shard(1, 2)).run(progress=progress),
                           folder / f"shard-{processes}.json")
    return out


def test_two_processes_write_what_one_writes(project, tmp_path, monkeypatch):
    # hybrid: both retrievers (dense and BM25) and their fusion; `rageval run` below is dense
    cfg = project.with_name("rageval-hybrid.yml")
    cfg.write_text(project.read_text(encoding="utf-8").replace("retrieval: {", "retrieval: {mode: hybrid, "),
                   encoding="utf-8")
    where = answering_processes(monkeypatch)
    where["record"] = tmp_path / "alone.pids"
    alone = run_three_ways(cfg, "1", tmp_path)
    where["record"] = tmp_path / "together.pids"
    together = run_three_ways(cfg, "2", tmp_path)
    assert set((tmp_path / "alone.pids").read_text().split()) == {str(os.getpid())}
    forked = set((tmp_path / "together.pids").read_text().split())
    assert len(forked) == 3 * 2 and str(os.getpid()) not in forked     # two workers a run: each has 2+ blocks
    ids = [c["id"] for c in json.loads(together["whole"])["cases"]]
    assert ids == [f"b{i}" for i in range(CASES)] == [c["id"] for c in json.loads(alone["whole"])["cases"]]
    for part in ("whole", "rerun", "shard"):
        assert together[part] == alone[part], part
    assert together["progress"] == alone["progress"]
    shard = len(json.loads(alone["shard"])["cases"])
    assert together["progress"] == ([(i, CASES) for i in range(1, CASES + 1)]
                                    + [(i, CASES // 2) for i in range(1, CASES // 2 + 1)]
                                    + [(i, shard) for i in range(1, shard + 1)])


def test_rageval_run_on_every_core_writes_the_bytes_of_one_process(project, tmp_path, monkeypatch, capsys):
    written_by = {}
    for processes in ("1", ""):         # "": unset, every core
        monkeypatch.setenv("RAGEVAL_PROCESSES", processes)
        monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
        out = tmp_path / f"run-{processes or 'all'}.json"
        assert cli.main(["run", "--config", str(project), "--reproducible", "--out", str(out)]) == 0
        written_by[processes] = out.read_bytes()
    assert written_by[""] == written_by["1"]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_run_hands_the_garbage_collector_back_as_it_found_it(project, processes):
    # a run keeps what it holds out of the collector's passes (gc.freeze) while it runs; a program
    # embedding rageval gets its objects back, and what it froze itself stays frozen
    ev = evaluation(project, processes)
    assert ev.run().summary.n_cases == CASES
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert ev.run().summary.n_cases == CASES
        assert gc.get_freeze_count() >= frozen and gc.isenabled()
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("value", ["0", "two", "-1", "1000", "2.5"])
def test_a_malformed_rageval_processes_is_refused(project, monkeypatch, capsys, value):
    monkeypatch.setenv("RAGEVAL_PROCESSES", value)
    assert cli.main(["run", "--config", str(project)]) == 2
    err = capsys.readouterr().err
    assert f"RAGEVAL_PROCESSES is {value!r}" in err and "from 1" in err and "Traceback" not in err


BLAS_THREADS = r"""
import ctypes, sys
from pathlib import Path
import numpy
from rageval.config import load_config
from rageval.pipeline.runner import prepare

def threads():
    '''OpenBLAS's own count of its threads, read from the library numpy loaded (None: no OpenBLAS).'''
    paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()})
    names = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
             "openblas_get_num_threads64_", "openblas_get_num_threads")
    for path in paths:
        library = ctypes.CDLL(path)
        for name in names:
            if hasattr(library, name):
                return getattr(library, name)()
    return None

before = threads()
prepare(load_config(Path(sys.argv[1])), env={"RAGEVAL_PROCESSES": sys.argv[2]})
print(before, threads())
"""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="the BLAS is found through /proc/self/maps (Linux)")
@pytest.mark.parametrize("processes", ["1", ""])
def test_one_process_computes_on_one_blas_thread(processes):
    """RAGEVAL_PROCESSES=1 is one core: numpy's OpenBLAS gets one thread (a pool's idle threads spin
    and count as CPU time); unset, the run's BLAS keeps every core it had."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", BLAS_THREADS, str(ROOT / "examples/banhang/rageval.yml"), processes],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.split()
    if before == "None":
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    assert int(after) == (1 if processes == "1" else int(before))


# --- failing closed ---------------------------------------------------------------------------------

def fail_on(monkeypatch, case: str, fail) -> None:
    """``fail()`` when the extractive generator answers ``case`` (a worker inherits the patch)."""
    generate = ExtractiveGenerator.generate

    def patched(self, question, context, *, case_id=None, fresh=False):
        if case_id == case:
            fail()
        return generate(self, question, context, case_id=case_id, fresh=fresh)
    monkeypatch.setattr(ExtractiveGenerator, "generate", patched)


def outcome(cfg: Path, processes: str):
    try:
        evaluation(cfg, processes).run()
    except Exception as exc:  # noqa: BLE001 - what the run raised is what is compared
        return type(exc), str(exc), getattr(exc, "tip", None)
    return None


def test_a_workers_ragevalerror_is_the_one_a_single_process_raises(project, monkeypatch, capsys):
    def refuse():
        raise RagevalError(f"{LATE}: the answer could not be made", tip="fix it")
    fail_on(monkeypatch, LATE, refuse)
    said = {}
    with deadline(120):
        assert outcome(project, "2") == outcome(project, "1") == \
            (RagevalError, f"{LATE}: the answer could not be made", "fix it")
        for processes in ("2", "1"):
            monkeypatch.setenv("RAGEVAL_PROCESSES", processes)
            capsys.readouterr()
            code, err = cli.main(["run", "--config", str(project)]), capsys.readouterr().err
            said[processes] = code, err.splitlines()[-2:]      # before them, progress up to where each stopped
    assert said["2"] == said["1"] == (2, [f"ERROR {LATE}: the answer could not be made", "TIP fix it"])
    assert multiprocessing.active_children() == []


def test_a_bug_in_a_worker_stays_that_bug(project, monkeypatch):
    score = runner.score_case

    def buggy(case, *args, **kwargs):
        if case.id == LATE:
            return {}["no such key"]
        return score(case, *args, **kwargs)
    monkeypatch.setattr(runner, "score_case", buggy)
    with deadline(120):
        assert outcome(project, "2") == outcome(project, "1") == (KeyError, "'no such key'", None)
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("how, said", [
    (lambda: os.kill(os.getpid(), signal.SIGKILL), "was killed by SIGKILL, which is how the kernel's out-of-memory"),
    (lambda: os._exit(7), "exited with status 7"),
])
def test_a_worker_that_dies_stops_the_run_with_an_error(project, tmp_path, monkeypatch, capsys, how, said):
    parent = os.getpid()

    def die():
        if os.getpid() != parent:           # never the test itself, whatever happens
            how()
    fail_on(monkeypatch, LATE, die)
    monkeypatch.setenv("RAGEVAL_PROCESSES", "2")
    out = tmp_path / "results.json"
    with deadline(120):
        code = cli.main(["run", "--config", str(project), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert "ERROR A worker process answering the cases ended before sending its results" in err and said in err
    assert "TIP" in err and "RAGEVAL_PROCESSES=1" in err
    assert multiprocessing.active_children() == []


@pytest.mark.parametrize("stop", [RuntimeError("the progress display failed"), KeyboardInterrupt()])
def test_an_exception_in_the_parent_stops_every_worker(project, monkeypatch, stop):
    fail_on(monkeypatch, "b600", lambda: time.sleep(600))     # the third block's worker is busy for long
    seen: list = []

    def progress(done: int, total: int) -> None:
        if done == BLOCK:               # the first block is in; the third is being answered
            seen.extend(multiprocessing.active_children())
            raise stop
    with deadline(60), pytest.raises(type(stop)):
        evaluation(project, "2").run(progress=progress)
    assert seen and all(gone(p.pid) for p in seen)
    assert -signal.SIGTERM in [p.exitcode for p in seen]     # terminated, not waited for
    assert multiprocessing.active_children() == []


#: `rageval run` whose worker answering the third block sleeps at its case b600: ten minutes
#: ("slowly"), or five seconds with workers the kernel does not kill with it, as where prctl is missing
RUN = """
import signal, sys, time
# Ctrl-C as a terminal's foreground command gets it: a command started in the background of a shell
# without job control (nohup CMD &, a CI runner's step) inherits SIGINT ignored, and Python then
# installs no handler of its own
signal.signal(signal.SIGINT, signal.default_int_handler)
from rageval import cli
from rageval.pipeline import workers
from rageval.pipeline.generation import ExtractiveGenerator
project, out, how = sys.argv[1:]
generate = ExtractiveGenerator.generate
def slowly(self, question, context, *, case_id=None, fresh=False):
    if case_id == "b600":
        time.sleep(600 if how == "slowly" else 5)
    return generate(self, question, context, case_id=case_id, fresh=fresh)
ExtractiveGenerator.generate = slowly
if how == "without-pdeathsig":
    workers._die_with = lambda parent: None
sys.exit(cli.main(["run", "--config", project, "--out", out]))
"""


def start_run(project: Path, out: Path, how: str = "slowly") -> tuple[subprocess.Popen, list[int]]:
    """`rageval run` in its own session, as from a terminal, once the first block's results are
    in (its progress shows 210 of 700 cases) and a worker answers the third; and its workers."""
    proc = subprocess.Popen([sys.executable, "-c", RUN, str(project), str(out), how],
                            env={**os.environ, "RAGEVAL_PROCESSES": "2"}, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    kids: list[int] = []
    for line in proc.stderr:        # type: ignore[union-attr]
        kids = kids or children(proc.pid)
        if "210/700" in line:
            break
    assert len(kids) == 2 and proc.poll() is None
    return proc, kids


def test_ctrl_c_stops_the_run_and_its_workers(project, tmp_path):
    proc, kids = start_run(project, tmp_path / "results.json")
    os.killpg(proc.pid, signal.SIGINT)      # what a terminal does: the whole foreground group
    _, err = proc.communicate(timeout=60)   # the third block's worker would sleep for ten minutes
    assert proc.returncode == 130 and err.rstrip().endswith("interrupted"), err
    assert "Traceback" not in err and not (tmp_path / "results.json").exists()
    assert all_gone(kids)


def test_workers_die_with_a_killed_parent(project, tmp_path):
    proc, kids = start_run(project, tmp_path / "results.json")
    proc.kill()                                # SIGKILL: no clean-up runs in the parent
    proc.communicate(timeout=60)            # the workers hold its stderr too: this waits for them
    assert all_gone(kids)


def test_without_pdeathsig_workers_end_when_they_find_the_parent_gone(project, tmp_path):
    proc, kids = start_run(project, tmp_path / "results.json", "without-pdeathsig")
    proc.kill()
    _, err = proc.communicate(timeout=60)   # each ends once its block is answered: nobody reads it
    assert all_gone(kids) and "Traceback" not in err


# --- where it forks -----------------------------------------------------------------------------------

def test_an_app_that_is_not_the_builtin_one_keeps_its_threads(project, tmp_path):
    result = evaluation(project, "1").run()
    traces = tmp_path / "traces.jsonl"
    traces.write_text("".join(json.dumps({"id": c.id, "answer": c.answer,
                                          "retrieved": [r.to_dict() for r in c.retrieved]}) + "\n"
                              for c in result.cases), encoding="utf-8")
    seen: list[int] = []
    replayed = prepare(load_config(project), env={"RAGEVAL_PROCESSES": "2"}, app_spec=f"replay:{traces}",
                       clock=Clock(reproducible=True))
    replayed.run(progress=lambda done, total: seen.append(len(multiprocessing.active_children())))
    assert len(seen) == CASES and set(seen) == {0}


def test_no_fork_from_a_thread(project):
    ev = evaluation(project, "2")
    seen: list[int] = []
    done: list = []
    thread = threading.Thread(target=lambda: done.append(ev.run(progress=lambda d, t: seen.append(
        len(multiprocessing.active_children())))))
    thread.start()
    thread.join(120)
    assert len(done) == 1 and len(seen) == CASES and set(seen) == {0}


@pytest.mark.parametrize("top_k, processes, sizes", [
    (5, "1", [[BLOCK, BLOCK, CASES - 2 * BLOCK]]),               # one search for every question
    (5, "2", [[BLOCK, BLOCK], [CASES - 2 * BLOCK]]),             # a search for each worker
    (100, "1", [[BLOCK], [BLOCK], [CASES - 2 * BLOCK]]),         # 256 cases × 100 chunks: held a block at a time
])
def test_a_search_holds_a_bounded_number_of_retrieved_items(project, top_k, processes, sizes):
    """The builtin app retrieves several blocks of cases at once (one pass over the index for them
    all), but never holds more than HELD retrieved items at full depth, nor leaves a worker idle."""
    cfg = load_config(project)
    cfg = replace(cfg, retrieval=replace(cfg.retrieval, top_k=top_k, k=tuple(k for k in cfg.retrieval.k if k <= top_k)))
    ev = prepare(cfg, env={"RAGEVAL_PROCESSES": processes})
    searches = ev.searches(ev.golden.cases)
    assert [[len(b) for b in s] for s in searches] == sizes
    assert all(sum(map(len, s)) * ev.app.depth <= max(runner.HELD, BLOCK * ev.app.depth) for s in searches)

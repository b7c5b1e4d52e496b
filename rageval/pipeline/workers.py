"""Blocks of cases answered on every core, in forked worker processes (issue 25 §1).

The builtin app's retrieval and extractive generation, and the scoring, are Python that holds the
GIL: threads do not run them side by side, processes do. :func:`in_processes` forks the workers and
gives each, one at a time, the number of a block of cases; a worker answers and scores that block
exactly as the single-process run does (the same blocks, so the same batched retrieval) and sends
back its list of results; the next block goes to whichever worker is free. The caller reads the
results in block order, so it sees what one process computes, in the same order.

What crosses between the processes:

- inherited by fork, never pickled: everything the parent holds when it forks — the evaluation
  (config, golden set, corpus), the app's index and caches, and the function answering a block;
- pickled to a worker: a block's number (an int), or None (stop);
- pickled back: a block's results (as :mod:`rageval.pipeline.handoff` packs them), one block at a time, or the exception
  that stopped it, re-raised in the parent as it was raised (a RagevalError keeps its class,
  message and tip; a bug stays that bug), with the worker's traceback as its cause. A worker's own
  state (caches it warmed, rankings it popped) stays in the worker.

Fail closed and bounded. Each worker has a pipe of its own whose other end only it holds, so a
worker that dies — killed by the out-of-memory killer, ``os._exit``, even in the middle of sending
its results — reads as the end of that pipe at once; the run then stops with a RagevalError saying
which process died and how. (``multiprocessing.Pool`` waits forever for a dead worker's task;
``concurrent.futures.ProcessPoolExecutor`` hangs when a worker dies in the middle of sending, as
its result pipe's other end stays open in the parent.) An exception in the parent, Ctrl-C
included, terminates the workers before it propagates (they ignore SIGINT: it is the parent's to
handle), and they are reaped before :func:`in_processes` is left. On Linux the kernel also kills a
worker when the parent dies without cleaning up (SIGKILL, an unhandled SIGTERM):
``PR_SET_PDEATHSIG``.

Forking is safe here: it happens from the main thread (:func:`can_fork`), and numpy's OpenBLAS
stops its thread pool before a fork (its ``pthread_atfork`` handler) and starts it again at the
next product, in the parent and in each worker; a worker asks it for one thread (a worker per core:
the products are batched, one core each), and so does a run capped at one process
(:func:`one_blas_thread`). The Python objects the workers inherit are frozen
out of the garbage collector while they fork (``gc.freeze``), so a worker's collections do not
write to, and so copy, the pages it shares with the parent.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import pickle
import re
import signal
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from rageval.errors import RagevalError
from rageval.files import kept_out_of_gc

T = TypeVar("T")

#: the environment variable capping the worker processes; unset or empty: every core this process may use
PROCESSES_VAR = "RAGEVAL_PROCESSES"

MSG_PROCESSES = ("RAGEVAL_PROCESSES is {got!r}: set it to the number of worker processes that answer the cases, "
                 "a whole number from 1 (every case in rageval's own process) to 999, or unset it to use every "
                 "core this process may use ({cores}).")
MSG_DIED = ("A worker process answering the cases ended before sending its results ({how}), so the run "
            "stopped without results.")
TIP_DIED = ("If the machine ran out of memory, answer in fewer processes: RAGEVAL_PROCESSES=1 answers every "
            "case in rageval's own process.")

PR_SET_PDEATHSIG = 1        # linux/prctl.h
#: OpenBLAS's function setting its thread count, as numpy's wheels (scipy-openblas, openblas64_) and a
#: system library name it
BLAS_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
                "openblas_set_num_threads")


def cores() -> int:
    """The cores this process may run on (its CPU affinity; the count of the machine's elsewhere)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not Linux
        return os.cpu_count() or 1


def processes_wanted(env: Mapping[str, str]) -> int:
    """The most worker processes ``env``'s RAGEVAL_PROCESSES allows (unset or empty: :func:`cores`);
    RagevalError (exit 2) on a value that is not a whole number from 1 to 999."""
    raw = env.get(PROCESSES_VAR, "").strip()
    if raw == "":
        return cores()
    if not re.fullmatch(r"[0-9]{1,3}", raw) or int(raw) < 1:
        raise RagevalError(MSG_PROCESSES.format(got=env[PROCESSES_VAR], cores=cores()))
    return int(raw)


def can_fork() -> bool:
    """Whether workers may be forked here: the platform has ``fork`` and this is the main thread
    (a fork from another thread could copy a lock the main thread holds)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.current_thread() is threading.main_thread()


class Worker:
    """A forked worker and this process's end of its pipe; ``block``: the block it is answering
    (None: none), ``stopped``: told to stop."""

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process, self.conn = process, conn
        self.block: int | None = None
        self.stopped = False

    def give(self, block: int | None) -> None:
        self.block, self.stopped = block, block is None
        self.conn.send(block)


@contextmanager
def in_processes(job: Callable[[int], T], count: int, processes: int) -> Iterator[Iterator[T]]:
    """Fork ``min(processes, count)`` workers that inherit ``job``; yields an iterator of
    ``job(0)`` … ``job(count - 1)``, computed in the workers, in that order. Leaving the ``with``
    block ends the workers — told to stop once every result is read, terminated otherwise (an
    exception, a break) — and reaps them."""
    context = multiprocessing.get_context("fork")
    workers: list[Worker] = []
    try:
        with kept_out_of_gc():
            for _ in range(min(processes, count)):
                here, there = context.Pipe()
                process = context.Process(target=_serve, args=(job, there, [here, *(w.conn for w in workers)],
                                                               os.getpid()), daemon=True)
                process.start()
                there.close()               # the worker holds the only other end: its death reads as EOF here
                workers.append(Worker(process, here))
        yield _results(workers, count)
    finally:
        _end_all(workers)


def _results(workers: Sequence[Worker], count: int) -> Iterator[Any]:
    """The blocks' results in order. A worker is given its next block as soon as its answer is in,
    before the answer is unpickled; answers that come early wait here, an exception too: the one
    raised is the first block's to fail, as in one process."""
    todo = iter(range(count))
    for worker in workers:
        worker.give(next(todo))
    early: dict[int, Any] = {}
    for i in range(count):
        while i not in early:
            for ready in multiprocessing.connection.wait([w.conn for w in workers if w.block is not None]):
                worker = next(w for w in workers if w.conn is ready)
                block = worker.block
                try:
                    data = worker.conn.recv_bytes()
                    worker.give(next(todo, None))
                except (EOFError, OSError):         # it died, perhaps in the middle of its answer
                    raise RagevalError(MSG_DIED.format(how=_how_ended(worker.process)), tip=TIP_DIED) from None
                early[block] = pickle.loads(data)  # type: ignore[index]
        yield _answer(early.pop(i))


def _answer(message: tuple[bool, Any, str]) -> Any:
    """A worker's answer: its results, or the exception it raised, raised here with the worker's
    traceback as its cause."""
    ok, value, trace = message
    if ok:
        return value
    raise value from WorkerTraceback(trace)


class WorkerTraceback(Exception):
    """Where in a worker an exception was raised: the cause of the exception raised again here."""


def _end_all(workers: Sequence[Worker]) -> None:
    """Terminate the workers not told to stop (their answers would go unread), then reap them all."""
    for worker in workers:
        if not worker.stopped:
            worker.process.terminate()
    for worker in workers:
        worker.process.join(10)
        if worker.process.exitcode is None:     # not stopping: no worker outlives the run
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def _how_ended(process: BaseProcess) -> str:
    process.join(10)
    code = process.exitcode
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        why = ", which is how the kernel's out-of-memory killer stops a process" if -code == signal.SIGKILL else ""
        return f"process {process.pid} was killed by {name}{why}"
    return f"process {process.pid} exited with status {code}"


def _serve(job: Callable[[int], Any], conn: Connection, others: Sequence[Connection], parent: int) -> None:
    """A worker: answer the blocks it is given, one at a time, until told to stop (None) or the
    parent is gone (``others``, the parent's ends of the pipes, are closed here, so that reads as
    the end of ``conn``). Ctrl-C is left to the parent, which stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)     # terminate() ends it, whatever the parent installed
    _die_with(parent)
    one_blas_thread()
    for other in others:        # the parent's ends of its pipe and of those to the workers forked before it
        other.close()
    while True:
        try:
            block = conn.recv()
            if block is None:
                return
            conn.send_bytes(_answered(job, block))
        except (EOFError, OSError):     # the parent is gone (where nothing killed this worker with it)
            return


def _answered(job: Callable[[int], Any], block: int) -> bytes:
    """``job(block)``'s results, or the exception it raised and where, pickled."""
    try:
        message = (True, job(block), "")
    except BaseException as exc:  # noqa: BLE001 - every exception is the parent's to raise
        message = (False, exc, traceback.format_exc())
    try:
        return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - what does not pickle is reported, as the bug it is
        failed = RuntimeError(f"a worker's answer could not be sent to the parent: {type(exc).__name__}: {exc}")
        return pickle.dumps((False, failed, message[2]), protocol=pickle.HIGHEST_PROTOCOL)


def one_blas_thread() -> None:
    """Linux: numpy's OpenBLAS (when it is OpenBLAS) computes on the calling process's own thread,
    from now on. A worker process asks for it (there is a worker per core: a pool of BLAS threads
    per worker would contend with the other workers), and so does a run capped at one process
    (RAGEVAL_PROCESSES=1: one core). A pool's threads spin while they wait for the next product,
    which costs CPU and, on two vCPUs, bought the searches no wall time (docs/benchmarks.md). Scores
    do not depend on it (rageval.pipeline.index). Elsewhere, or with another BLAS, nothing."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(library, name) for name in BLAS_THREADS if hasattr(library, name)), None)
        if setter is not None:
            setter(1)
            return


def _die_with(parent: int) -> None:
    """Linux: have the kernel kill this worker when the parent dies, even by a signal that runs no
    clean-up (SIGKILL, an unhandled SIGTERM), so no worker outlives the run; elsewhere nothing."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:      # the parent died before prctl took effect: nobody reads the results
        os._exit(1)

"""`rageval run` (one evaluation → a RunResult), `rageval baseline` (repeats → noise) and
`rageval merge` (the parts of a sharded run → one RunResult)."""

from __future__ import annotations

import argparse
from typing import TextIO

from rageval import flow
from rageval.commands.shared import ProgressPrinter, build_evaluation, secret_filter
from rageval.config import load_config
from rageval.errors import EXIT_BLOCKED, EXIT_OK
from rageval.files import write_json
from rageval.gate import terminal
from rageval.gate.markdown import printable
from rageval.results import RunResult, Shard, load_result
from rageval.settings import Config
from rageval.shards import merge as merge_shards


def _errors(result: RunResult, cfg: Config, err: TextIO) -> int:
    """EXIT_BLOCKED (1) when too many cases errored for the run to be a result (said on stderr)."""
    why = flow.too_many_errors(result, cfg.run.max_error_rate)
    if why is None:
        return EXIT_OK
    err.write(printable(f"ERROR {why}\n", newlines=True))
    return EXIT_BLOCKED


def run(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    shard = Shard.parse(args.shard) if args.shard else None
    ev = build_evaluation(cfg, args.subset, args.app, shard, reproducible=args.reproducible)
    result = flow.redacted_run(ev.run(progress=ProgressPrinter("rageval run", args.err)), secret_filter(cfg))
    if args.out:
        write_json(args.out, result)
    out.write(terminal.render_run_table(result) + "\n")
    if args.out:
        out.write(f"wrote {args.out}\n")
    return _errors(result, cfg, args.err)


def baseline(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    ev = build_evaluation(cfg, args.subset, None, Shard.parse(args.shard) if args.shard else None,
                          reproducible=args.reproducible)
    previous = load_result(args.previous) if args.previous else None
    result = flow.run_repeats(ev, args.repeats, progress=ProgressPrinter("rageval baseline", args.err),
                              previous=previous)
    result = flow.redacted_run(result, secret_filter(cfg))
    write_json(args.out, result)
    out.write(terminal.render_run_table(result) + "\n" + terminal.render_noise(result) + "\n")
    out.write(f"wrote {args.out}\n")
    return _errors(result, cfg, args.err)


def merge(args: argparse.Namespace, out: TextIO) -> int:
    result = merge_shards([(load_result(path), str(path)) for path in args.shards])
    write_json(args.out, result)
    out.write(terminal.render_run_table(result) + "\n")
    out.write(f"merged {len(args.shards)} shards, {len(result.cases)} cases; wrote {args.out}\n")
    return EXIT_OK

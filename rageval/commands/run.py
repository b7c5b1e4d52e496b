"""`rageval run` (one evaluation → a RunResult) and `rageval baseline` (repeats → noise)."""

from __future__ import annotations

import argparse
from typing import TextIO

from rageval import flow
from rageval.commands.shared import ProgressPrinter, build_evaluation
from rageval.config import load_config
from rageval.errors import EXIT_OK
from rageval.files import write_json
from rageval.gate import terminal
from rageval.results import load_result


def run(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    result = build_evaluation(cfg, args.subset, args.app).run(progress=ProgressPrinter("rageval run", args.err))
    if args.out:
        write_json(args.out, result)
    out.write(terminal.render_run_table(result) + "\n")
    if args.out:
        out.write(f"wrote {args.out}\n")
    return EXIT_OK


def baseline(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    ev = build_evaluation(cfg, args.subset, None)
    previous = load_result(args.previous) if args.previous else None
    result = flow.run_repeats(ev, args.repeats, progress=ProgressPrinter("rageval baseline", args.err),
                              previous=previous)
    write_json(args.out, result)
    out.write(terminal.render_run_table(result) + "\n" + terminal.render_noise(result) + "\n")
    out.write(f"wrote {args.out}\n")
    return EXIT_OK

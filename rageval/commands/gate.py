"""`rageval gate` (the decision; exit 1 when blocked) and `rageval report` (the markdown again, or
the HTML report of a gate or of one run, from saved files).

Run in a GitHub Actions step, `rageval gate` appends its report to ``$GITHUB_STEP_SUMMARY`` as the
action does (the CLI and the action are the only readers of ``GITHUB_*`` variables)."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import TextIO

from rageval import DEFAULT_CONFIG, flow
from rageval.commands.shared import ProgressPrinter, build_evaluation, secret_filter
from rageval.config import load_config
from rageval.errors import EXIT_BLOCKED, EXIT_OK, RagevalError
from rageval.files import append_text, paused_gc, read_result_file, write_json, write_text
from rageval.gate import report, terminal
from rageval.gate.junit import render_junit
from rageval.gate.page import render_html
from rageval.gate.verdict import Verdict
from rageval.golden.set import load_golden
from rageval.results import load_result
from rageval.settings import ReportConfig

MSG_REPORT_NEEDS = ("rageval report: the markdown report is a gate's, so it needs --verdict (and --baseline); "
                    "for one RunResult alone write the HTML report: --results RUN.json --html OUT.html")


def gate(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    if args.candidate:
        with paused_gc():    # files in, a decision out (millions of objects, no cycles): ~1/3 of its time
            baseline = load_result(args.baseline) if args.baseline else None
            # what the candidate must answer comes from the golden set and --subset, never from the
            # file: a case it leaves out is a failing case, whatever subset the file claims
            expected = load_golden(cfg.golden).subset(args.subset).cases
            outcome = flow.gate(cfg, baseline, candidate=load_result(args.candidate), expected=expected,
                                redact=secret_filter(cfg))
    else:
        baseline = load_result(args.baseline) if args.baseline else None
        outcome = flow.gate(cfg, baseline, evaluation=build_evaluation(cfg, args.subset, args.app),
                            progress=ProgressPrinter("rageval gate", args.err), redact=secret_filter(cfg))
    for note in outcome.notes:
        out.write(f"note: {note}\n")
    if args.out:
        write_json(args.out, outcome.verdict)
    if args.report_md:
        write_text(args.report_md, outcome.markdown)
    if args.candidate_out and not args.candidate:
        write_json(args.candidate_out, outcome.candidate)
    if args.junit:
        write_text(args.junit, render_junit(outcome.verdict, outcome.candidate, outcome.baseline,
                                            title=cfg.report.title))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        append_text(summary, outcome.markdown)
    if args.html:
        write_text(args.html, render_html(outcome.candidate, baseline=outcome.baseline, verdict=outcome.verdict,
                                          cfg=cfg.report))
    written = [f"{what} written to {path}" for what, path in (("verdict", args.out), ("report", args.report_md),
                                                     ("HTML report", args.html), ("JUnit", args.junit))
               if path]
    out.write(terminal.render_terminal(outcome.verdict, title=cfg.report.title, width=_width(out), written=written))
    return EXIT_BLOCKED if outcome.verdict.blocked else EXIT_OK


def _width(out: TextIO) -> int:
    """The terminal's width when ``out`` is one, else 80 (a job log, a pipe, a file)."""
    try:
        return shutil.get_terminal_size((terminal.TERMINAL_WIDTH, 24)).columns if out.isatty() else terminal.TERMINAL_WIDTH
    except (AttributeError, ValueError, OSError):
        return terminal.TERMINAL_WIDTH


def report_again(args: argparse.Namespace, out: TextIO) -> int:
    if args.verdict is None and not args.html:
        raise RagevalError(MSG_REPORT_NEEDS)
    # the config gives the report's title and history length: without one (an artifact read on a
    # laptop) the defaults
    report_cfg = (load_config(args.config or DEFAULT_CONFIG).report if args.config or Path(DEFAULT_CONFIG).exists()
                  else ReportConfig())
    verdict = None
    if args.verdict is not None:
        verdict = Verdict.from_json(read_result_file(args.verdict, what="verdict"), str(args.verdict))
    baseline = load_result(args.baseline) if args.baseline else None
    candidate = load_result(args.candidate)
    if args.html:
        write_text(args.html, render_html(candidate, baseline=baseline, verdict=verdict, cfg=report_cfg))
        out.write(f"wrote {args.html}\n")
    if verdict is not None and (args.out or not args.html):
        markdown = report.render_markdown(verdict, baseline, candidate, report_cfg)
        if args.out:
            write_text(args.out, markdown)
        else:
            out.write(markdown)
    return EXIT_OK

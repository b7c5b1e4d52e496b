"""The `rageval` command. The only module (with the action's entry) that prints or chooses exit codes.

Exit codes (rageval.errors): 0 ok / gate passed, 1 gate blocked, 2 bad input or config
(RagevalError), 3 internal error (a bug: please report it with the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rageval import __version__, flow
from rageval.config import DEFAULT_CONFIG, Config, load_config
from rageval.errors import (
    EXIT_BLOCKED,
    EXIT_INTERNAL,
    EXIT_OK,
    DatasetError,
    RagevalError,
)
from rageval.files import read_result_file, write_json, write_text
from rageval.gate import report
from rageval.gate.report import printable
from rageval.gate.verdict import Verdict
from rageval.golden import lifecycle
from rageval.golden.candidates import (
    DEFAULT_ORDER_PATTERNS,
    load_logs,
    load_names,
    propose,
    render_candidates_yaml,
)
from rageval.golden.corpus import load_corpus
from rageval.golden.edit import add_case, write_added
from rageval.golden.history import default_git_ref, git_history, reference_from_git
from rageval.golden.set import GoldenSet, load_golden
from rageval.metrics.judge import judge_agreement
from rageval.pipeline.apps.replay import load_traces
from rageval.pipeline.chunking import chunk_corpus
from rageval.pipeline.embedding import LocalEmbedder
from rageval.pipeline.generation import ChatGenerator
from rageval.pipeline.judging import load_labels
from rageval.pipeline.runner import Evaluation, prepare
from rageval.results import load_result


class SafeStream:
    """A text stream whose reader may leave (`rageval gate … | head`): once the pipe is closed,
    writes are dropped and the file descriptor is pointed at /dev/null, so neither a later write
    nor the interpreter's last flush fails. The exit code stays the command's — a blocked gate
    exits 1 whatever happens to its output."""

    def __init__(self, stream: TextIO, *, sanitize: bool = False) -> None:
        self.stream, self.pipe_closed, self.sanitize = stream, False, sanitize

    def write(self, text: str) -> int:
        if not self.pipe_closed:
            try:     # stdout shows golden text, answers and app errors: no escape sequences, no bidi tricks
                self.stream.write(printable(text, newlines=True) if self.sanitize else text)
            except BrokenPipeError:
                self._reader_left()
        return len(text)

    def flush(self) -> None:
        if not self.pipe_closed:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_left()

    def isatty(self) -> bool:
        return not self.pipe_closed and self.stream.isatty()

    def _reader_left(self) -> None:
        self.pipe_closed = True
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return                                  # not a real file (a test's buffer): nothing to redirect
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


class ProgressPrinter:
    """A bar on a TTY; otherwise a line every 10% (or at least every 5 seconds)."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label, self.stream = label, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last_pct, self.last_time = -1, time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        pct = int(100 * done / total) if total else 100
        if self.tty:
            width = 30
            fill = int(width * done / total) if total else width
            self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}")
            if done == total:
                self.stream.write("\n")
            self.stream.flush()
            return
        now = time.monotonic()
        if done == total or pct // 10 > self.last_pct // 10 or now - self.last_time >= 5:
            self.stream.write(f"{self.label}: {done}/{total} cases ({pct}%)\n")
            self.stream.flush()
            self.last_pct, self.last_time = pct, now


# --- validate --------------------------------------------------------------------------------

def _references(args: argparse.Namespace, cfg: Config, out: TextIO) -> list[lifecycle.Reference]:
    """The earlier golden sets to hold the working copy to: the baseline's and git's."""
    references: list[lifecycle.Reference] = []
    if args.baseline:
        before = lifecycle.reference_from_result(load_result(args.baseline).golden, f"the baseline {args.baseline}")
        if before is None:
            out.write(f"note: {args.baseline} has no golden snapshot (written by an older rageval); "
                      "version discipline not checked against it\n")
        else:
            references.append(before)
    if not args.no_git:
        before, why = reference_from_git(cfg.golden, args.against or default_git_ref())
        if before is None:
            out.write(f"note: version discipline not checked against git: {why}\n")
        else:
            references.append(before)
    return references


def _version_discipline(args: argparse.Namespace, cfg: Config, golden: GoldenSet, out: TextIO) -> list[str]:
    """What the working copy was checked against; DatasetError naming every problem found
    (cases changed without a version bump; an id reused for another question, also against the
    file's recent git history)."""
    now = lifecycle.reference_from_golden(golden, "the working copy")
    references = _references(args, cfg, out)
    problems: list[str] = []
    for before in references:
        problems += [p for p in lifecycle.version_problems(before, now, str(golden.path)) if p not in problems]
    history = git_history(cfg.golden)[0] if not args.no_git else []
    problems += lifecycle.reused_ids([*references, *history], now, str(golden.path))
    if problems:
        raise DatasetError("\n".join(problems))
    checked = [r.label for r in references]
    if history:
        checked.append(f"the ids used in {len(history)} commit{'s' if len(history) != 1 else ''} of {golden.path.name}")
    return checked


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    golden = load_golden(cfg.golden)
    corpus = load_corpus(cfg.corpus, cfg.root)
    golden.check_sections(corpus.ids())
    if args.subset:
        golden.subset(args.subset)
    chunks = chunk_corpus(corpus, cfg.chunking.size, cfg.chunking.overlap)
    if cfg.app.type == "replay" and cfg.app.path is not None:
        load_traces(cfg.app.path)
    if cfg.generation.provider == "openai" and cfg.generation.model and cfg.generation.prompt:
        ChatGenerator(None, cfg.generation.model, cfg.generation.prompt)   # compiles the prompt template
    checked = _version_discipline(args, cfg, golden, out)
    leaks, cov = lifecycle.check_golden(cfg, golden, corpus)
    if leaks and cfg.golden_checks.leaks == "fail":
        raise DatasetError("\n".join(f"{cfg.golden}: {x.message()}" for x in leaks),
                           tip="golden_checks.leaks is 'fail'; set it to 'warn' to report leaks without failing.")
    out.write(f"ok: {cfg.path.name}: golden set {golden.name} v{golden.version} ({len(golden.cases)} cases), "
              f"corpus {len(corpus.sections)} sections in {len(corpus.files)} files → {len(chunks)} chunks "
              f"of ≤{cfg.chunking.size} tokens\n")
    if checked:
        out.write(f"ok: version {golden.version} is consistent with {' and '.join(checked)}\n")
    for leak in leaks or ():
        out.write(f"warning: {leak.message()}\n")
    out.write("\n".join(lifecycle.coverage_lines(cov)) + "\n")
    return EXIT_OK


# --- run, baseline, gate, report -----------------------------------------------------------------

def build_evaluation(cfg: Config, subset: str | None, app_spec: str | None) -> Evaluation:
    """The evaluation the CLI runs: the user's own environment is what their app sees."""
    return prepare(cfg, subset=subset, app_spec=app_spec, env=os.environ)


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    result = build_evaluation(cfg, args.subset, args.app).run(progress=ProgressPrinter("rageval run", args.err))
    if args.out:
        write_json(args.out, result)
    out.write(report.render_run_table(result) + "\n")
    if args.out:
        out.write(f"wrote {args.out}\n")
    return EXIT_OK


def cmd_baseline(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    ev = build_evaluation(cfg, args.subset, None)
    result = flow.run_repeats(ev, args.repeats, progress=ProgressPrinter("rageval baseline", args.err))
    write_json(args.out, result)
    out.write(report.render_run_table(result) + "\n" + report.render_noise(result) + "\n")
    out.write(f"wrote {args.out}\n")
    return EXIT_OK


def cmd_gate(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    baseline = load_result(args.baseline) if args.baseline else None
    if args.candidate:
        # what the candidate must answer comes from the golden set and --subset, never from the
        # file: a case it leaves out is a failing case, whatever subset the file claims
        expected = load_golden(cfg.golden).subset(args.subset).cases
        outcome = flow.gate(cfg, baseline, candidate=load_result(args.candidate), expected=expected)
    else:
        outcome = flow.gate(cfg, baseline, evaluation=build_evaluation(cfg, args.subset, args.app),
                            progress=ProgressPrinter("rageval gate", args.err))
    for note in outcome.notes:
        out.write(f"note: {note}\n")
    if args.out:
        write_json(args.out, outcome.verdict)
    if args.report_md:
        write_text(args.report_md, outcome.markdown)
    if args.candidate_out and not args.candidate:
        write_json(args.candidate_out, outcome.candidate)
    out.write(report.render_terminal(outcome.verdict, title=cfg.report.title))
    return EXIT_BLOCKED if outcome.verdict.blocked else EXIT_OK


def cmd_judge_agreement(args: argparse.Namespace, out: TextIO) -> int:
    labels = load_labels(Path(args.labels))
    if args.results:
        result = load_result(args.results)
    else:
        cfg = load_config(args.config)
        if not cfg.judge.model:
            raise RagevalError(f"{cfg.path}: judge.model is not set, so there are no judge verdicts to compare. "
                               "Set judge.model or pass --results with a RunResult that has them.")
        result = build_evaluation(cfg, args.subset, None).run(progress=ProgressPrinter("rageval judge", args.err))
    verdicts = {c.id: c.status("judge") == "pass" for c in result.cases if c.status("judge") in ("pass", "fail")}
    agreement = judge_agreement(labels, verdicts)
    if agreement["n"] == 0:
        raise RagevalError(f"{args.labels}: no labelled case has a judge verdict (labels for "
                           f"{len(labels)} cases, verdicts for {len(verdicts)}). Check the case ids.")
    out.write(f"judge vs human labels on {agreement['n']} cases: agreement {agreement['agreement']:.2f}, "
              f"Cohen's kappa {agreement['kappa']:.2f}\n")
    for case_id in agreement["disagreements"]:
        out.write(f"  disagree {case_id}: human {'pass' if labels[case_id] else 'fail'}, "
                  f"judge {'pass' if verdicts[case_id] else 'fail'}\n")
    if args.out:
        write_json(args.out, agreement)
        out.write(f"wrote {args.out} (point judge.agreement_file at it to use judge.min_agreement)\n")
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    verdict = Verdict.from_json(read_result_file(args.verdict, what="verdict"), str(args.verdict))
    baseline = load_result(args.baseline) if args.baseline else None
    markdown = report.render_markdown(verdict, baseline, load_result(args.candidate), cfg.report)
    if args.out:
        write_text(args.out, markdown)
    else:
        out.write(markdown)
    return EXIT_OK


# --- golden ------------------------------------------------------------------------------------

def _split_list(values: Sequence[str] | None) -> list[str]:
    """``--tags pr,holdout`` and ``--tags pr --tags holdout`` alike."""
    return [v.strip() for value in values or () for v in value.split(",") if v.strip()]


def cmd_golden_add(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    corpus = load_corpus(cfg.corpus, cfg.root)
    history, _ = git_history(cfg.golden)   # ids used before are not handed out again
    result = add_case(cfg.golden, question=args.question, expected_sections=_split_list(args.expected_sections),
                      expected_answer=args.expected_answer or "", source=args.source,
                      tags=_split_list(args.tags), must_include=args.must_include or (),
                      must_not_include=args.must_not_include or (), out_of_scope=args.out_of_scope,
                      known_sections=corpus.ids(), retired_ids={i for ref in history for i in ref.questions})
    write_added(cfg.golden, result)
    out.write(f"added {result.case_id} to {cfg.golden.name}; version {result.old_version} → {result.new_version}\n"
              f"changelog: {result.changelog_line}\n")
    return EXIT_OK


def cmd_golden_candidates(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    existing = [c.question for c in load_golden(cfg.golden).cases]
    entries = load_logs(args.logs, field=args.field)
    patterns = [*DEFAULT_ORDER_PATTERNS, *(args.order_pattern or ())]
    # the local embedder always: logs hold customers' text, which must not leave the machine to be clustered
    candidates = propose(entries, embedder=LocalEmbedder(dim=cfg.embedding.dim), n=args.n, seed=args.seed,
                         names=load_names(args.names) if args.names else (), order_patterns=patterns,
                         existing_questions=existing)
    write_text(args.out, render_candidates_yaml(candidates, source=Path(args.logs).name))
    out.write(f"{len(entries)} messages → {candidates.unique} distinct after scrubbing and merging "
              f"{candidates.merged} near-duplicates ({candidates.dropped_existing} already in the golden set) → "
              f"{len(candidates.clusters)} intents → {len(candidates.candidates)} candidates\n"
              f"wrote {args.out}: label each case (expected_sections, expected_answer), then copy it into "
              f"{cfg.golden.name} with `rageval golden add`\n")
    return EXIT_OK


# --- arguments -----------------------------------------------------------------------------------

def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("project", nargs="?", default=None,
                   help=f"project folder (its {DEFAULT_CONFIG}) or config file; same as --config")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"config file or folder (default {DEFAULT_CONFIG})")


def _common(p: argparse.ArgumentParser) -> None:
    _config_arg(p)
    p.add_argument("--subset", default=None, help="run only the cases tagged NAME (default: all cases)")


def _eval_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check config, golden set and corpus; exit 0 or 2")
    _common(p)
    p.add_argument("--baseline", default=None, help="also hold the golden set's version to this baseline RunResult")
    p.add_argument("--against", default=None, metavar="REF",
                   help="git ref holding the previous golden set (default origin/$GITHUB_BASE_REF, else HEAD)")
    p.add_argument("--no-git", action="store_true", help="do not compare with the golden set committed in git")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run the eval once and write a RunResult")
    _common(p)
    p.add_argument("--app", default=None, metavar="replay:FILE", help="answer from a JSONL trace file instead")
    p.add_argument("--out", default=None, help="write the RunResult JSON here")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("baseline", help="run the eval N times (noise), write the baseline RunResult")
    _common(p)
    p.add_argument("--repeats", type=int, default=3, help="runs to measure noise (default 3)")
    p.add_argument("--out", default="rageval-baseline.json", help="where to write it (default rageval-baseline.json)")
    p.set_defaults(func=cmd_baseline)

    p = sub.add_parser("gate", help="compare a candidate to the baseline; exit 0 pass, 1 blocked, 2 bad input")
    _common(p)
    p.add_argument("--baseline", default=None, help="baseline RunResult (none: gate.missing_baseline decides)")
    p.add_argument("--candidate", default=None, help="candidate RunResult; without it the eval runs now")
    p.add_argument("--app", default=None, metavar="replay:FILE", help="answer from a JSONL trace file instead")
    p.add_argument("--out", default=None, help="write the verdict JSON here")
    p.add_argument("--report-md", default=None, help="write the markdown report here")
    p.add_argument("--candidate-out", default=None, help="also write the candidate RunResult it ran")
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("judge-agreement", help="agreement and Cohen's kappa of the LLM judge vs human labels")
    _common(p)
    p.add_argument("--labels", required=True, help="human labels: JSONL {id, label: pass|fail} or YAML/JSON {id: pass|fail}")
    p.add_argument("--results", default=None, help="a RunResult with judge verdicts (default: run the eval now)")
    p.add_argument("--out", default=None, help="write the agreement JSON here (judge.agreement_file)")
    p.set_defaults(func=cmd_judge_agreement)

    p = sub.add_parser("report", help="render the markdown report from saved results")
    p.add_argument("--config", default=DEFAULT_CONFIG)
    p.add_argument("--verdict", required=True)
    p.add_argument("--baseline", default=None)
    p.add_argument("--candidate", required=True)
    p.add_argument("--out", default=None)
    p.set_defaults(func=cmd_report)


def _golden_parsers(sub: argparse._SubParsersAction) -> None:
    gsub = sub.add_parser("golden", help="maintain the golden set: add a case from an incident, propose cases "
                          "from logs").add_subparsers(dest="golden_command", required=True)
    p = gsub.add_parser("add", help="append a case (fresh id, version bump, changelog line), keeping comments")
    _config_arg(p)
    p.add_argument("--question", required=True, help="the question as the customer asked it")
    p.add_argument("--expected-sections", action="append", metavar="IDS", help="e.g. DT-1,DT-3 (repeatable)")
    p.add_argument("--expected-answer", default=None, help="the correct answer, numbers copied from the source")
    p.add_argument("--source", required=True, help="where the case came from, e.g. incident-2026-11-29")
    p.add_argument("--tags", action="append", metavar="TAGS", help="e.g. pr (repeatable or comma-separated)")
    p.add_argument("--must-include", action="append", metavar="TEXT", help="text the answer must contain")
    p.add_argument("--must-not-include", action="append", metavar="TEXT", help="text the answer must not contain")
    p.add_argument("--out-of-scope", action="store_true", help="the documents do not answer it: expect a refusal")
    p.set_defaults(func=cmd_golden_add)

    p = gsub.add_parser("candidates", help="propose cases from chat logs: personal data scrubbed, duplicates "
                        "merged, grouped by intent, a diverse sample to label")
    _config_arg(p)
    p.add_argument("--logs", required=True, help="JSONL chat log, one message per line")
    p.add_argument("--out", required=True, help="where to write the candidates YAML")
    p.add_argument("--field", default=None, help="the JSON key holding the customer's text "
                   "(default: question, message, text, content or an OpenAI-style messages list)")
    p.add_argument("--names", default=None, help="file of customer/staff names to scrub, one per line")
    p.add_argument("--order-pattern", action="append", metavar="REGEX",
                   help="extra order-code pattern to scrub (repeatable; the built-in ones always apply)")
    p.add_argument("-n", type=int, default=40, help="candidates to propose (default 40)")
    p.add_argument("--seed", type=int, default=0, help="clustering/sampling seed (default 0)")
    p.set_defaults(func=cmd_golden_candidates)


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rageval", description="Evaluate a RAG system on a golden set and gate "
                                     "pull requests on the result.")
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _eval_parsers(sub)
    _golden_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = SafeStream(out or sys.stdout, sanitize=True)
    err = SafeStream(sys.stderr)
    args = make_parser().parse_args(argv)
    args.err = err
    if getattr(args, "project", None):
        args.config = args.project
    try:
        code = args.func(args, out)
    except RagevalError as exc:
        err.write(printable(f"ERROR {exc}\n" + (f"TIP {exc.tip}\n" if exc.tip else ""), newlines=True))
        code = exc.exit_code
    except KeyboardInterrupt:
        err.write("interrupted\n")
        code = 130
    except Exception:  # noqa: BLE001 - a bug: show it, but never as "blocked" (1)
        err.write(traceback.format_exc())
        err.write("ERROR internal error in rageval (a bug). Please report it with the traceback above.\n")
        code = EXIT_INTERNAL
    out.flush()
    err.flush()
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

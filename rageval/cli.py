"""The `rageval` command: this module and its commands (``rageval.commands``) are, with the action's
entry, the only code that prints or chooses exit codes.

Exit codes (rageval.errors): 0 ok / gate passed, 1 gate blocked, 2 bad input or config
(RagevalError), 3 internal error (a bug: please report it with the traceback).

Start-up: this module holds every command's arguments but none of its code. A command is a
``module:function`` name (``rageval.commands``) imported when that command runs, so ``rageval
--help``, ``rageval gate --help`` or a typo never load numpy, the pipeline or the model client.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from rageval import DEFAULT_CONFIG, __version__
from rageval.errors import EXIT_INTERNAL, RagevalError
from rageval.gate.markdown import printable


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


# --- arguments -----------------------------------------------------------------------------------

def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("project", nargs="?", default=None,
                   help=f"project folder (its {DEFAULT_CONFIG}) or config file; same as --config")
    p.add_argument("--config", default=DEFAULT_CONFIG, help=f"config file or folder (default {DEFAULT_CONFIG})")


def _common(p: argparse.ArgumentParser) -> None:
    _config_arg(p)
    p.add_argument("--subset", default=None, help="run only the cases tagged NAME (default: all cases)")


def _shard_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="run only part I of N (the cases whose id hashes to it); join the parts with `rageval merge`")


def _reproducible_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reproducible", action="store_true",
                   help="leave the clock out: no timings, no latencies, created_at from $SOURCE_DATE_EPOCH (else "
                   "null), so two runs of the same inputs write the same bytes")


#: the environment variable of the commands that run an evaluation (rageval.pipeline.workers)
PROCESSES_HELP = ("environment: RAGEVAL_PROCESSES=N caps the worker processes that answer the cases of the builtin "
                  "app's offline pipeline (default: one per core this process may use; 1: none, every case in this "
                  "process)")


def _evaluating(sub: argparse._SubParsersAction, name: str, help_text: str) -> argparse.ArgumentParser:
    """The parser of a command that runs an evaluation (its help names RAGEVAL_PROCESSES)."""
    return sub.add_parser(name, help=help_text, epilog=PROCESSES_HELP)


def _eval_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check config, golden set and corpus; exit 0 or 2")
    _common(p)
    p.add_argument("--baseline", default=None, help="also hold the golden set's version to this baseline RunResult")
    p.add_argument("--against", default=None, metavar="REF",
                   help="git ref holding the previous golden set (default origin/$GITHUB_BASE_REF, else HEAD)")
    p.add_argument("--no-git", action="store_true", help="do not compare with the golden set committed in git")
    p.set_defaults(handler="rageval.commands.validate:main")

    p = _evaluating(sub, "run", "run the eval once and write a RunResult")
    _common(p)
    p.add_argument("--app", default=None, metavar="replay:FILE", help="answer from a JSONL trace file instead")
    p.add_argument("--out", default=None, help="write the RunResult JSON here")
    _shard_arg(p)
    _reproducible_arg(p)
    p.set_defaults(handler="rageval.commands.run:run")

    p = _evaluating(sub, "baseline", "run the eval N times (noise), write the baseline RunResult")
    _common(p)
    p.add_argument("--repeats", type=int, default=3, help="runs to measure noise (default 3)")
    p.add_argument("--out", default="rageval-baseline.json", help="where to write it (default rageval-baseline.json)")
    p.add_argument("--previous", default=None, metavar="FILE", help="the branch's previous baseline RunResult: its "
                   "history and itself are carried into this one (main's trend; report.history entries)")
    _shard_arg(p)
    _reproducible_arg(p)
    p.set_defaults(handler="rageval.commands.run:baseline")

    p = sub.add_parser("merge", help="join the RunResults of a sharded run (--shard I/N) into one")
    p.add_argument("shards", nargs="+", metavar="SHARD.json", help="the N parts, e.g. shard-*.json")
    p.add_argument("--out", required=True, help="write the merged RunResult here")
    p.set_defaults(handler="rageval.commands.run:merge")

    p = _evaluating(sub, "gate", "compare a candidate to the baseline; exit 0 pass, 1 blocked, 2 bad input")
    _common(p)
    p.add_argument("--baseline", default=None, help="baseline RunResult (none: gate.missing_baseline decides)")
    p.add_argument("--candidate", default=None, help="candidate RunResult; without it the eval runs now")
    p.add_argument("--app", default=None, metavar="replay:FILE", help="answer from a JSONL trace file instead")
    p.add_argument("--out", default=None, help="write the verdict JSON here")
    p.add_argument("--report-md", default=None, help="write the markdown report here")
    p.add_argument("--candidate-out", default=None, help="also write the candidate RunResult it ran")
    p.add_argument("--junit", default=None, metavar="FILE", help="write a JUnit XML report here: a testcase per golden "
                   "case and per gated metric (GitLab, Jenkins, test-report actions)")
    p.add_argument("--html", default=None, metavar="OUT.html", help="write the one-file HTML report here")
    p.set_defaults(handler="rageval.commands.gate:gate")

    p = sub.add_parser("judge-agreement", help="agreement and Cohen's kappa of the LLM judge vs human labels")
    _common(p)
    p.add_argument("--labels", required=True, help="human labels: JSONL {id, label: pass|fail} or YAML/JSON {id: pass|fail}")
    p.add_argument("--results", default=None, help="a RunResult with judge verdicts (default: run the eval now)")
    p.add_argument("--out", default=None, help="write the agreement JSON here (judge.agreement_file)")
    p.set_defaults(handler="rageval.commands.judge:agreement")

    p = sub.add_parser("judge-pair", help="which run answered better, case by case: the judge compares the two "
                       "answers in both orders and counts a preference only when both orders agree")
    _config_arg(p)
    p.add_argument("--baseline", required=True, help="RunResult whose answers are shown as A first (e.g. main's)")
    p.add_argument("--candidate", required=True, help="RunResult whose answers are shown as B first (e.g. the PR's)")
    p.add_argument("--out", default=None, help="write the per-case results and totals as JSON here")
    p.set_defaults(handler="rageval.commands.judge:pair")


def _report_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="render the markdown report of a gate, or the HTML report of a gate or of "
                       "one run, from saved results")
    p.add_argument("--config", default=None, help=f"for the report's title and history length (default {DEFAULT_CONFIG} "
                   "if there is one)")
    p.add_argument("--verdict", default=None, help="the verdict JSON of `rageval gate --out` (without it: --html of "
                   "one RunResult)")
    p.add_argument("--baseline", default=None)
    p.add_argument("--candidate", "--results", dest="candidate", required=True, metavar="FILE",
                   help="the PR's RunResult (with --verdict), or the RunResult to show")
    p.add_argument("--out", default=None, help="write the markdown report here (default: print it)")
    p.add_argument("--html", default=None, metavar="OUT.html", help="write the one-file HTML report here")
    p.set_defaults(handler="rageval.commands.gate:report_again")


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
    p.set_defaults(handler="rageval.commands.golden:add")

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
    p.set_defaults(handler="rageval.commands.golden:candidates")

    p = gsub.add_parser("import", help="write a golden set from an IR dataset: a BEIR folder, or TREC qrels with "
                        "their queries (one case per judged query, graded when the qrels are)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--beir", metavar="DIR", help="a BEIR folder: corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv")
    source.add_argument("--qrels", metavar="FILE", help="a TREC qrels file (qid iter docid rel) or a BEIR qrels TSV")
    p.add_argument("--split", default="test", help="BEIR: which qrels/SPLIT.tsv (default test)")
    p.add_argument("--queries", metavar="FILE", help="with --qrels: the queries, JSONL {_id, text} or TSV qid<TAB>text")
    p.add_argument("--corpus", metavar="PATH", help="with --qrels: the corpus the qrels judge (path or glob, as "
                   "corpus: in the config)")
    p.add_argument("--missing", choices=("skip", "refuse"), default="skip",
                   help="a judged document the corpus lacks: skip it and count it (default), or refuse the import")
    p.add_argument("--name", default=None, help="the golden set's dataset name (default from the folder or file)")
    p.add_argument("--out", required=True, help="where to write the golden set YAML")
    p.set_defaults(handler="rageval.commands.golden:import_set")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rageval", description="Evaluate a RAG system on a golden set and gate "
                                     "pull requests on the result.")
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _eval_parsers(sub)
    _report_parser(sub)
    _golden_parsers(sub)
    return parser


def handler(name: str) -> Callable[[argparse.Namespace, TextIO], int]:
    """The function a ``module:function`` name denotes, its module imported now."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _project_config(parser: argparse.ArgumentParser, project: str, config: str) -> str:
    """The config a command reads: ``rageval gate examples/banhang`` reads its rageval.yml, and
    ``--config rageval-800.yml`` beside a project folder names a file in it; a file given both ways
    is ambiguous (exit 2), never one of them silently ignored."""
    if config == DEFAULT_CONFIG:
        return project
    if os.path.isdir(project) and not os.path.isabs(config):
        return os.path.join(project, config)
    parser.error(f"the project {project!r} and --config {config!r} name two configs; give one of them")
    return config   # not reached: parser.error exits


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = SafeStream(out or sys.stdout, sanitize=True)
    err = SafeStream(sys.stderr)
    parser = make_parser()
    args = parser.parse_args(argv)
    args.err = err
    if getattr(args, "project", None):
        args.config = _project_config(parser, args.project, args.config)
    try:
        code = handler(args.handler)(args, out)
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

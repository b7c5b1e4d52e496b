"""The `rageval` command. The only module (with entrypoint.py) that prints or chooses exit codes.

Exit codes: 0 ok / gate passed, 1 gate blocked, 2 bad input or config (RagevalError), 3 internal
error (a bug: please report it with the traceback).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rageval import __version__
from rageval.config import DEFAULT_CONFIG, Config, load_config
from rageval.errors import RagevalError

EXIT_OK, EXIT_BLOCKED, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


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


def format_summary(result: dict[str, Any]) -> str:
    """The table `rageval run` prints: retrieval metrics, then generation rates, then counts."""
    summary = result["summary"]
    metrics = summary["metrics"]
    lines = []
    golden = result["golden"]
    lines.append(f"golden set {golden['name']} v{golden['version']} ({summary['n_cases']} cases"
                 f"{', subset ' + golden['subset'] if golden.get('subset') else ''}) · app {result.get('app', {}).get('name', '?')}")
    for names in (result["metric_names"],
                  [n for n in ("context_tokens", "pass_rate", "numbers_pass", "rules_pass", "refusal_pass",
                               "judge_pass", "faithfulness", "groundedness") if metrics.get(n) is not None]):
        for start in range(0, len(names), 8):
            row = names[start:start + 8]
            lines.append("".join(f"{n:>15}" for n in row))
            lines.append("".join(f"{_fmt(metrics.get(n), n):>15}" for n in row))
    lines.append(f"passed {summary['n_passed']} · failed {summary['n_failed']} · errors {summary['n_errors']}")
    failing = [c for c in result["cases"] if c.get("passed") is False or c.get("error")]
    for case in failing[:20]:
        why = case.get("error") or "; ".join(case.get("failures", []))
        lines.append(f"  {'ERROR' if case.get('error') else 'FAIL '} {case['id']}: {why}")
    if len(failing) > 20:
        lines.append(f"  …and {len(failing) - 20} more")
    return "\n".join(lines)


def _fmt(value: Any, name: str = "") -> str:
    if value is None:
        return "n/a"
    if name == "context_tokens":
        return f"{value:.0f}"
    return f"{value:.2f}"


# --- commands -----------------------------------------------------------------------------

def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    from rageval.chunking import chunk_corpus
    from rageval.corpus import load_corpus
    from rageval.golden import load_golden

    cfg = load_config(args.config)
    golden = load_golden(cfg.golden)
    corpus = load_corpus(cfg.corpus, cfg.root)
    golden.check_sections(corpus.ids())
    if args.subset:
        golden.subset(args.subset)
    chunks = chunk_corpus(corpus, cfg.chunking.size, cfg.chunking.overlap)
    if cfg.app.type == "replay" and cfg.app.path is not None:
        from rageval.apps.replay import load_traces
        load_traces(cfg.app.path)
    out.write(f"ok: {cfg.path.name}: golden set {golden.name} v{golden.version} ({len(golden.cases)} cases), "
              f"corpus {len(corpus.sections)} sections in {len(corpus.files)} files → {len(chunks)} chunks "
              f"of ≤{cfg.chunking.size} tokens\n")
    return EXIT_OK


def build_evaluation(cfg: Config, subset: str | None, app_spec: str | None) -> Any:
    from rageval import runner
    return runner.prepare(cfg, subset=subset, app_spec=app_spec)


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from rageval.runner import write_json

    cfg = load_config(args.config)
    ev = build_evaluation(cfg, args.subset, args.app)
    result = ev.run(progress=ProgressPrinter("rageval run"))
    if args.out:
        write_json(args.out, result)
    out.write(format_summary(result) + "\n")
    if args.out:
        out.write(f"wrote {args.out}\n")
    return EXIT_OK


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rageval", description="Evaluate a RAG system on a golden set and gate "
                                     "pull requests on the result.")
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", default=DEFAULT_CONFIG, help=f"config file (default {DEFAULT_CONFIG})")
        p.add_argument("--subset", default=None, help="run only the cases tagged NAME (default: all cases)")

    p = sub.add_parser("validate", help="check config, golden set and corpus; exit 0 or 2")
    common(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run the eval once and write a RunResult")
    common(p)
    p.add_argument("--app", default=None, metavar="replay:FILE", help="answer from a JSONL trace file instead")
    p.add_argument("--out", default=None, help="write the RunResult JSON here")
    p.set_defaults(func=cmd_run)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args, out)
    except RagevalError as exc:
        sys.stderr.write(f"ERROR {exc}\n")
        if exc.tip:
            sys.stderr.write(f"TIP {exc.tip}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception:  # noqa: BLE001 - a bug: show it, but never as "blocked" (1)
        import traceback
        traceback.print_exc()
        sys.stderr.write("ERROR internal error in rageval (a bug). Please report it with the traceback above.\n")
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

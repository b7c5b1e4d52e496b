"""`rageval judge-agreement` (the judge against people's labels) and `rageval judge-pair` (two
runs' answers compared by the judge, in both orders)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TextIO

from rageval.commands.shared import ProgressPrinter, build_evaluation
from rageval.config import load_config
from rageval.errors import EXIT_OK, RagevalError
from rageval.files import write_json
from rageval.metrics.judge import judge_agreement
from rageval.pipeline.judging import load_labels
from rageval.pipeline.pairwise import PairReport, PairVerdict, judge_runs
from rageval.results import load_result

SHOWN = {"baseline": "baseline better", "candidate": "candidate better", "tie": "tie",
         "disagree": "orders disagree", "error": "errors"}


def agreement(args: argparse.Namespace, out: TextIO) -> int:
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
    found = judge_agreement(labels, verdicts)
    if found["n"] == 0:
        raise RagevalError(f"{args.labels}: no labelled case has a judge verdict (labels for "
                           f"{len(labels)} cases, verdicts for {len(verdicts)}). Check the case ids.")
    out.write(f"judge vs human labels on {found['n']} cases: agreement {found['agreement']:.2f}, "
              f"Cohen's kappa {found['kappa']:.2f}\n")
    for case_id in found["disagreements"]:
        out.write(f"  disagree {case_id}: human {'pass' if labels[case_id] else 'fail'}, "
                  f"judge {'pass' if verdicts[case_id] else 'fail'}\n")
    if args.out:
        write_json(args.out, found)
        out.write(f"wrote {args.out} (point judge.agreement_file at it to use judge.min_agreement)\n")
    return EXIT_OK


def _case_line(v: PairVerdict) -> str:
    if v.outcome == "error":
        return f"  {v.id}: error: {v.error}"
    if v.outcome == "disagree":
        return f"  {v.id}: orders disagree (baseline shown first: {v.first}; candidate shown first: {v.second})"
    return f"  {v.id}: {SHOWN[v.outcome]}" + ("" if v.outcome == "tie" else " in both orders")


def pair_lines(report: PairReport) -> list[str]:
    """What `rageval judge-pair` prints: a line per case, the totals, what was not compared, the cost."""
    lines = [f"pairwise judge {report.judge_model}: baseline {report.baseline} vs candidate {report.candidate}, "
             f"{len(report.cases)} cases answered in both, each asked in both orders"]
    lines += [_case_line(v) for v in report.cases]
    lines.append(", ".join(f"{SHOWN[k]} {n}" for k, n in report.totals.items()))
    if report.skipped:
        shown = ", ".join(f"{i} ({why})" for i, why in list(report.skipped.items())[:10])
        more = f" …and {len(report.skipped) - 10} more" if len(report.skipped) > 10 else ""
        n = len(report.skipped)
        lines.append(f"not compared: {n} case{'s' if n != 1 else ''}: {shown}{more}")
    cost = report.cost
    lines.append(f"model calls {cost.calls_total} (cache hits {cost.cache_hits}), tokens {cost.prompt_tokens} prompt "
                 f"+ {cost.completion_tokens} completion, ${cost.usd:.4f}")
    return lines


def pair(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    baseline, candidate = load_result(args.baseline), load_result(args.candidate)
    report = judge_runs(cfg, (baseline, str(args.baseline)), (candidate, str(args.candidate)), env=os.environ)
    out.write("\n".join(pair_lines(report)) + "\n")
    if args.out:
        write_json(args.out, report)
        out.write(f"wrote {args.out}\n")
    return EXIT_OK

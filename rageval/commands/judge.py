"""`rageval judge-agreement`: the judge against people's labels."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from rageval.commands.shared import ProgressPrinter, build_evaluation
from rageval.config import load_config
from rageval.errors import EXIT_OK, RagevalError
from rageval.files import write_json
from rageval.metrics.judge import judge_agreement
from rageval.pipeline.judging import load_labels
from rageval.results import load_result


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

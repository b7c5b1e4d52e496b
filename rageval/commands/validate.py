"""`rageval validate`: :func:`rageval.validation.validate`, printed. The CLI's part is reading the
pull request's base branch from the runner's environment (``GITHUB_BASE_REF``) for the default
git ref."""

from __future__ import annotations

import argparse
import os
from typing import TextIO

from rageval.config import load_config
from rageval.errors import EXIT_OK
from rageval.golden.history import default_git_ref
from rageval.results import load_result
from rageval.validation import validate


def main(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    baseline = (load_result(args.baseline), str(args.baseline)) if args.baseline else None
    git_ref = None if args.no_git else args.against or default_git_ref(os.environ.get("GITHUB_BASE_REF"))
    report = validate(cfg, subset=args.subset, baseline=baseline, git_ref=git_ref)
    out.write("\n".join(report.lines()) + "\n")
    return EXIT_OK

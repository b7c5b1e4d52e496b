"""`rageval golden add` (a case from an incident), `rageval golden candidates` (cases proposed
from chat logs) and `rageval golden import` (a golden set from a BEIR folder or TREC qrels)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from rageval.commands.shared import split_list
from rageval.config import load_config
from rageval.errors import EXIT_OK, DatasetError
from rageval.files import write_text
from rageval.golden.candidates import (
    DEFAULT_ORDER_PATTERNS,
    load_logs,
    load_names,
    propose,
    render_candidates_yaml,
)
from rageval.golden.corpus import load_corpus
from rageval.golden.edit import add_case, write_added
from rageval.golden.history import git_history
from rageval.golden.ir_import import import_beir, import_qrels
from rageval.golden.set import load_golden
from rageval.pipeline.embedding import LocalEmbedder


def add(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    corpus = load_corpus(cfg.corpus, cfg.root)
    history, _ = git_history(cfg.golden)   # ids used before are not handed out again
    result = add_case(cfg.golden, question=args.question, expected_sections=split_list(args.expected_sections),
                      expected_answer=args.expected_answer or "", source=args.source,
                      tags=split_list(args.tags), must_include=args.must_include or (),
                      must_not_include=args.must_not_include or (), out_of_scope=args.out_of_scope,
                      known_sections=corpus.ids(), retired_ids={i for ref in history for i in ref.questions})
    write_added(cfg.golden, result)
    out.write(f"added {result.case_id} to {cfg.golden.name}; version {result.old_version} → {result.new_version}\n"
              f"changelog: {result.changelog_line}\n")
    return EXIT_OK


def candidates(args: argparse.Namespace, out: TextIO) -> int:
    cfg = load_config(args.config)
    existing = [c.question for c in load_golden(cfg.golden).cases]
    entries = load_logs(args.logs, field=args.field)
    patterns = [*DEFAULT_ORDER_PATTERNS, *(args.order_pattern or ())]
    # the local embedder always: logs hold customers' text, which must not leave the machine to be clustered
    proposed = propose(entries, embedder=LocalEmbedder(dim=cfg.embedding.dim), n=args.n, seed=args.seed,
                       names=load_names(args.names) if args.names else (), order_patterns=patterns,
                       existing_questions=existing)
    write_text(args.out, render_candidates_yaml(proposed, source=Path(args.logs).name))
    out.write(f"{len(entries)} messages → {proposed.unique} distinct after scrubbing and merging "
              f"{proposed.merged} near-duplicates ({proposed.dropped_existing} already in the golden set) → "
              f"{len(proposed.clusters)} intents → {len(proposed.candidates)} candidates\n"
              f"wrote {args.out}: label each case (expected_sections, expected_answer), then copy it into "
              f"{cfg.golden.name} with `rageval golden add`\n")
    return EXIT_OK


MSG_QRELS_NEEDS = "--qrels needs --queries (the query texts) and --corpus (the documents it judges)."


def import_set(args: argparse.Namespace, out: TextIO) -> int:
    if args.beir:
        found = import_beir(Path(args.beir), args.split, missing=args.missing, name=args.name)
        corpus = Path(args.beir) / "corpus.jsonl"
    else:
        if not args.queries or not args.corpus:
            raise DatasetError(MSG_QRELS_NEEDS)
        found = import_qrels(Path(args.qrels), Path(args.queries), args.corpus, Path.cwd(), missing=args.missing,
                             name=args.name)
        corpus = Path(args.corpus)
    write_text(args.out, found.yaml())
    out.write("\n".join(found.lines()) + "\n")
    out.write(f"wrote {args.out}; in rageval.yml: `golden: {args.out}` and `corpus: {corpus}` (paths relative to "
              "the config file)\n")
    return EXIT_OK

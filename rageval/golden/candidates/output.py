"""The candidates file a person labels: a header on how to label, then one golden-set case per
candidate, with its cluster, duplicates and source lines as comments."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from rageval.golden.candidates.cluster import CandidateSet

_HEADER = """\
# Golden-set candidates proposed from {source} ({entries} log entries; {unique} distinct questions
# after merging {merged} duplicates; {dropped_existing} already in the golden set; {dropped_empty} too short).
# Embedder {embedder}, seed {seed}.
#
# How to label:
#   1. Read each question. Delete the cases that are not real questions about the documents.
#   2. Fill `expected_sections` with the section ids that answer it (e.g. [DT-1]) and write
#      `expected_answer` with every number and unit copied from that section; or set
#      `out_of_scope: true` when the documents do not answer it.
#   3. Keep the question exactly as the customer wrote it (typos, missing diacritics). Personal
#      data is replaced by <PHONE>, <EMAIL>, <ORDER>, <NAME>, <NUMBER>; check nothing personal
#      is left before committing.
#   4. Give each case a permanent id, tag it (e.g. [pr] or [holdout]) and move it into the golden set.
#
# Intent clusters (questions / log entries):
{clusters}
"""


def _q(value: str) -> str:
    """A YAML double-quoted scalar on one line, unicode kept."""
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=1 << 30).rstrip("\n")


def _comment(text: str) -> str:
    return " ".join(text.split())


def _lines_text(lines: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, lines[:limit]))
    return shown + (f", … (+{len(lines) - limit})" if len(lines) > limit else "")


def render_candidates_yaml(cs: CandidateSet, *, source: str | Path) -> str:
    """The YAML file a person labels: a header comment on how to label, then one golden-set case
    per candidate (``id``, ``question``, empty ``expected_sections`` / ``expected_answer``,
    ``source: logs-<file name>``, ``tags: [candidate]``), with the cluster, duplicates and source
    lines as comments, since the golden set rejects unknown keys."""
    source_name = Path(str(source)).name
    stem = Path(source_name).stem or "logs"
    cluster_lines = "\n".join(f"#   {c.id:>2}. {_comment(c.label) or '-'}: {c.questions} / {c.occurrences}"
                              for c in cs.clusters) or "#   (none)"
    out = [_HEADER.format(source=_comment(source_name), entries=cs.entries, unique=cs.unique, merged=cs.merged,
                          dropped_existing=cs.dropped_existing, dropped_empty=cs.dropped_empty,
                          embedder=_comment(cs.embedder), seed=cs.seed, clusters=cluster_lines)]
    out.append(f"dataset: {_q(stem + '-candidates')}\n")
    out.append("version: 1\n")
    if not cs.candidates:
        out.append("# No new candidates: every question is already in the golden set or too short.\n")
        out.append("cases: []\n")
        return "".join(out)
    out.append("cases:\n")
    current = None
    for c in cs.candidates:
        if c.cluster != current:
            current = c.cluster
            out.append(f"\n  # --- cluster {c.cluster}: {_comment(c.cluster_label) or '-'} ---\n")
        asked = f"asked {c.duplicates + 1}×" if c.duplicates else "asked once"
        out.append(f"  # {asked}; log line{'s' if len(c.lines) > 1 else ''} {_lines_text(c.lines)}"
                   + (f"; scrubbed: {', '.join(c.scrubbed)}" if c.scrubbed else "") + "\n")
        for v in c.variants:
            out.append(f"  #   also written: {_comment(v)}\n")
        out.append(f"  - id: {c.id}\n")
        out.append(f"    question: {_q(c.question)}\n")
        out.append("    expected_sections: []\n")
        out.append('    expected_answer: ""\n')
        out.append(f"    source: {_q('logs-' + source_name)}\n")
        out.append("    tags: [candidate]\n")
    return "".join(out)

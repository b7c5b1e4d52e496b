"""IR datasets → a golden set: `rageval golden import`.

Reads the formats test collections ship in, with no hand conversion:

- **BEIR** folders: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
  ``text``) and ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score``, a header line).
- **TREC qrels**: ``qid iter docid rel`` per line, whitespace-separated; a line starting with ``#``
  is a comment (as trec_eval reads them); with queries as JSON Lines (``_id``/``id``, ``text``) or
  a TSV of ``qid<TAB>text``.

Each judged query becomes a case: its id, its text as the question, and ``expected_sections`` —
the documents judged relevant (grade > 0), as a list when every grade is 1, else as a mapping
``{docid: grade}`` (graded relevance). A document judged 0 or less is left out (it changes no
metric rageval computes). A judged document the corpus does not have is skipped and counted
(``missing="skip"``), or refuses the import (``missing="refuse"``); a query left with no relevant
document, or without text, is not imported and counted — trec_eval would count such a query as 0
in its means; a golden case with no expected section means out of scope (a refusal case).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rageval.errors import DatasetError
from rageval.golden.corpus import JSONL_ID_KEYS, load_corpus
from rageval.parse import load_json, read_text

MISSING = ("skip", "refuse")
MSG_QRELS_LINE = ("{path}: line {line}: a qrels line is 'query-id<TAB>corpus-id<TAB>score' (BEIR) or "
                  "'qid iter docid rel' (TREC), got {got!r}.")
MSG_GRADE = "{path}: line {line}: the relevance {got!r} is not a whole number."
MSG_TWICE = "{path}: line {line}: query {qid} judges document {doc} twice (lines {first} and {line}). Keep one."
MSG_MISSING = ("{qrels}: {n} judged documents are not in the corpus {corpus} (e.g. {shown}). Give the corpus they "
               "come from, or import with --missing skip to leave them out (counted).")
MSG_QUERY_LINE = "{path}: line {line}: a query line needs an id ('_id' or 'id') and a 'text'{got}."
MSG_NO_SPLIT = "{folder}: no qrels/{split}.tsv (found: {found}). Pick a split with --split."
MSG_NOT_BEIR = "{folder}: not a BEIR folder: it needs corpus.jsonl, queries.jsonl and qrels/<split>.tsv ({lacks} missing)."
MSG_NOTHING = "{qrels}: no query has a relevant document in the corpus with text in {queries}; nothing to import."


@dataclass(frozen=True)
class Imported:
    """A golden set made from qrels, and what was left out of it."""

    name: str
    cases: tuple[dict[str, Any], ...]
    skipped_documents: int = 0                   # judged documents not in the corpus
    skipped_judgments: int = 0                   # judgments of 0 or less
    no_relevant: tuple[str, ...] = ()           # queries with no relevant document left
    no_text: tuple[str, ...] = ()               # judged queries the queries file lacks
    graded: bool = False
    corpus: str = ""

    def yaml(self) -> str:
        """The golden set as a YAML file (rageval's canonical form)."""
        head = (f"# Imported by `rageval golden import` from {self.corpus or self.name}: one case per judged query,\n"
                "# expected_sections = the documents judged relevant"
                + (" (with their grades)" if self.graded else "") + ".\n")
        body = {"dataset": self.name, "version": 1, "cases": list(self.cases)}
        return head + yaml.safe_dump(body, allow_unicode=True, sort_keys=False, width=100, default_flow_style=None)

    def lines(self) -> list[str]:
        """What the command prints about the import."""
        out = [f"{len(self.cases)} cases from {self.name}" + (" (graded relevance)" if self.graded else "")]
        if self.skipped_documents:
            out.append(f"skipped {self.skipped_documents} judged documents that are not in the corpus")
        if self.skipped_judgments:
            out.append(f"left out {self.skipped_judgments} judgments of relevance ≤ 0")
        for ids, why in ((self.no_relevant, "no relevant document in the corpus"), (self.no_text, "no query text")):
            if ids:
                shown = ", ".join(ids[:5]) + (" …" if len(ids) > 5 else "")
                out.append(f"not imported: {len(ids)} queries with {why} ({shown}); trec_eval would count them as 0")
        return out


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id → document id → grade, from a BEIR qrels TSV or a TREC qrels file."""
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, line in enumerate(read_text(path, error=DatasetError).splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split("\t") if "\t" in line and len(line.split("\t")) == 3 else line.split()
        if len(parts) == 3 and lineno == 1 and not _is_int(parts[2]):
            continue                                       # BEIR's header: query-id corpus-id score
        if len(parts) not in (3, 4):
            raise DatasetError(MSG_QRELS_LINE.format(path=path, line=lineno, got=line[:120]))
        qid, doc, grade = parts[0].strip(), parts[-2].strip(), parts[-1].strip()
        if not _is_int(grade):
            raise DatasetError(MSG_GRADE.format(path=path, line=lineno, got=grade))
        if (qid, doc) in first_line:
            raise DatasetError(MSG_TWICE.format(path=path, line=lineno, qid=qid, doc=doc, first=first_line[qid, doc]))
        first_line[qid, doc] = lineno
        qrels.setdefault(qid, {})[doc] = int(float(grade))
    return qrels


def _is_int(text: str) -> bool:
    try:
        return float(text) == int(float(text))
    except (ValueError, OverflowError):
        return False


def read_queries(path: Path) -> dict[str, str]:
    """Query id → text, from JSON Lines (BEIR's queries.jsonl) or a TSV of ``qid<TAB>text``."""
    out: dict[str, str] = {}
    jsonl = path.suffix.lower() == ".jsonl"
    for lineno, line in enumerate(read_text(path, error=DatasetError).splitlines(), 1):
        if not line.strip():
            continue
        if jsonl:
            record = load_json(line, str(path), error=DatasetError, line=lineno)
            key = next((k for k in JSONL_ID_KEYS if isinstance(record, dict) and k in record), None)
            text = record.get("text") if isinstance(record, dict) else None
            if key is None or not isinstance(text, str) or isinstance(record[key], bool):
                raise DatasetError(MSG_QUERY_LINE.format(path=path, line=lineno, got=""))
            qid = str(record[key])
        else:
            qid, _, text = line.partition("\t")
            if not text.strip():
                raise DatasetError(MSG_QUERY_LINE.format(path=path, line=lineno, got=" (qid<TAB>text)"))
        out[qid.strip()] = text.strip()
    return out


def build_cases(qrels: Mapping[str, Mapping[str, int]], queries: Mapping[str, str], corpus_ids: Iterable[str], *,
                missing: str, qrels_name: str, corpus_name: str, name: str, source: str) -> Imported:
    """The golden cases of ``qrels`` (see the module docstring)."""
    known = set(corpus_ids)
    absent = sorted({d for judged in qrels.values() for d in judged if d not in known})
    if absent and missing == "refuse":
        raise DatasetError(MSG_MISSING.format(qrels=qrels_name, n=len(absent), corpus=corpus_name,
                                              shown=", ".join(absent[:5])))
    cases, no_relevant, no_text, skipped_docs, skipped_judgments, graded = [], [], [], 0, 0, False
    for qid, judged in qrels.items():
        grades = {}
        for doc, grade in judged.items():
            if doc not in known:
                skipped_docs += 1
            elif grade <= 0:
                skipped_judgments += 1
            else:
                grades[doc] = grade
        if not grades:
            no_relevant.append(qid)
            continue
        if not queries.get(qid):
            no_text.append(qid)
            continue
        graded = graded or any(g != 1 for g in grades.values())
        cases.append({"id": qid, "question": queries[qid], "expected_sections": grades, "source": source})
    for case in cases:                  # one form for the whole set: a list when nothing is graded
        if not graded:
            case["expected_sections"] = list(case["expected_sections"])
    if not cases:
        raise DatasetError(MSG_NOTHING.format(qrels=qrels_name, queries=source))
    return Imported(name, tuple(cases), skipped_docs, skipped_judgments, tuple(no_relevant), tuple(no_text), graded,
                    corpus_name)


def import_beir(folder: Path, split: str, *, missing: str = "skip", name: str | None = None) -> Imported:
    """The golden set of a BEIR folder's ``split`` (``test``, ``dev``, ``train``)."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    lacks = [p for p in ("corpus.jsonl", "queries.jsonl") if not (folder / p).is_file()]
    if lacks:
        raise DatasetError(MSG_NOT_BEIR.format(folder=folder, lacks=", ".join(lacks)))
    if not qrels_path.is_file():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise DatasetError(MSG_NO_SPLIT.format(folder=folder, split=split, found=", ".join(found) or "no qrels"))
    corpus = load_corpus("corpus.jsonl", folder)
    return build_cases(read_qrels(qrels_path), read_queries(folder / "queries.jsonl"), corpus.ids(), missing=missing,
                       qrels_name=str(qrels_path), corpus_name=str(folder / "corpus.jsonl"),
                       name=name or f"{folder.name}-{split}", source=f"beir:{folder.name}/{split}")


def import_qrels(qrels_path: Path, queries_path: Path, corpus: str, root: Path, *, missing: str = "skip",
                 name: str | None = None) -> Imported:
    """The golden set of a TREC (or BEIR) qrels file, its queries and the corpus ``corpus``
    (a path or glob relative to ``root``, as ``corpus:`` in the config)."""
    ids = load_corpus(corpus, root).ids()
    return build_cases(read_qrels(qrels_path), read_queries(queries_path), ids, missing=missing,
                       qrels_name=str(qrels_path), corpus_name=corpus, name=name or qrels_path.stem,
                       source=f"qrels:{qrels_path.name}")

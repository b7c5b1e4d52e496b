"""From chat logs to golden-set candidates: scrub personal data, merge duplicates, group by intent,
and propose a diverse sample for a person to label.

The pipeline (``rageval golden candidates --logs chat.jsonl --out candidates.yaml``)::

    entries = load_logs(path)                         # JSONL -> LogEntry(line, text)
    cs = propose(entries, embedder=LocalEmbedder(), n=40, names=load_names(names_file))
    text = render_candidates_yaml(cs, source=path.name)

Questions keep the customer's own spelling (no diacritics added, typos kept): the only change
to a text is that personal data becomes a placeholder.

Modules: :mod:`.scrub` (the scrubbing policy), :mod:`.logs` (reading the JSONL log),
:mod:`.cluster` (de-duplication, intent clusters, the sample) and :mod:`.output` (the YAML file).
"""

from rageval.golden.candidates.cluster import (
    MAX_UNIQUE,
    STOPWORDS,
    Candidate,
    CandidateSet,
    Cluster,
    propose,
)
from rageval.golden.candidates.logs import (
    MAX_LOG_LINES,
    TEXT_FIELDS,
    LogEntry,
    load_logs,
    load_names,
)
from rageval.golden.candidates.output import render_candidates_yaml
from rageval.golden.candidates.scrub import (
    DEFAULT_ORDER_PATTERNS,
    KINDS,
    Scrubber,
    ScrubResult,
    scrub,
)

__all__ = [
    "DEFAULT_ORDER_PATTERNS",
    "KINDS",
    "MAX_LOG_LINES",
    "MAX_UNIQUE",
    "STOPWORDS",
    "TEXT_FIELDS",
    "Candidate",
    "CandidateSet",
    "Cluster",
    "LogEntry",
    "ScrubResult",
    "Scrubber",
    "load_logs",
    "load_names",
    "propose",
    "render_candidates_yaml",
    "scrub",
]

"""Sections → Chunks, sized in tokens (``rageval.text`` tokenizer).

A section is the retrieval unit: by default a chunk holds one section, never two. A section of
at most ``size`` tokens is one chunk; a longer one is cut into windows of ``size`` tokens that
overlap by ``overlap`` tokens, each window keeping the section's id. So a golden label (a section
id) names the chunks that hold it whatever the chunk size, and a retrieval metric is not inflated
by the neighbours a section was packed with (issue 22: a 5,183-document corpus in one file packed
into 357 chunks fell from 0.665 to 0.583 nDCG@10 while its recall@100 rose to an inflated 0.938).

``merge_sections=True`` (``chunking.merge_sections: true``) packs the way markdown-header splitters
do: whole sections of a document (and windows of long ones) are packed into a chunk while it stays
within ``size`` tokens. Every chunk records the sections it contains, so two chunkings still
compare on the same labels. Chunks never span two documents in either mode.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rageval.golden.corpus import Corpus, Section, unlabelled
from rageval.records import Retrieved
from rageval.text import count_tokens, token_spans


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str                  # what the generator reads and the RunResult records: headings with their ids
    tokens: int
    sections: tuple[str, ...]
    document: str
    index_text: str = ""       # what the index reads: the same text without the section ids (title and body)

    @property
    def indexed(self) -> str:
        return self.index_text or self.text

    def retrieved(self, score: float | None) -> Retrieved:
        """This chunk as a case's retrieved item, with ``score``."""
        return Retrieved(self.id, self.sections, self.text, score, self.tokens)


def chunk_corpus(corpus: Corpus, size: int, overlap: int = 0, *, merge_sections: bool = False) -> list[Chunk]:
    """The corpus's chunks, documents in corpus order, ids ``<document>#<n>`` (n from 1 in each
    document). One section per chunk unless ``merge_sections`` (see the module docstring)."""
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"chunk size {size} / overlap {overlap}: need size ≥ 1 and 0 ≤ overlap < size")
    by_doc: dict[str, list[Section]] = {}
    for s in corpus.sections:
        by_doc.setdefault(s.document, []).append(s)
    chunks: list[Chunk] = []
    for doc, sections in by_doc.items():
        pieces: list[tuple[str, str, int]] = []  # (section id, text, tokens)
        for s in sections:
            n = count_tokens(s.text)
            if n <= size:
                pieces.append((s.id, s.text, n))
            else:
                pieces.extend((s.id, text, k) for text, k in _windows(s.text, size, overlap))
        groups = _packed(pieces, size) if merge_sections else [[p] for p in pieces]
        chunks.extend(_make(doc, n, group) for n, group in enumerate(groups, 1))
    return chunks


def _packed(pieces: list[tuple[str, str, int]], size: int) -> list[list[tuple[str, str, int]]]:
    """Consecutive pieces packed into groups of at most ``size`` tokens (a piece is never cut)."""
    groups: list[list[tuple[str, str, int]]] = []
    buf: list[tuple[str, str, int]] = []
    buf_tokens = 0
    for piece in pieces:
        if buf and buf_tokens + piece[2] > size:
            groups.append(buf)
            buf, buf_tokens = [], 0
        buf.append(piece)
        buf_tokens += piece[2]
    if buf:
        groups.append(buf)
    return groups


def _windows(text: str, size: int, overlap: int) -> list[tuple[str, int]]:
    spans = token_spans(text)
    out, start, step = [], 0, size - overlap
    while start < len(spans):
        window = spans[start:start + size]
        out.append((text[window[0][0]:window[-1][1]], len(window)))
        if start + size >= len(spans):
            break
        start += step
    return out


def _make(doc: str, n: int, buf: list[tuple[str, str, int]]) -> Chunk:
    sections = tuple(dict.fromkeys(p[0] for p in buf))
    return Chunk(id=f"{doc}#{n}", text="\n\n".join(p[1] for p in buf), tokens=sum(p[2] for p in buf),
                 sections=sections, document=doc,
                 index_text="\n\n".join(unlabelled(p[1], p[0]) for p in buf))


def content_order(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The chunks sorted by what they hold, not where: section ids, then the SHA-256 of the text,
    then the id (which only separates identical windows of one section, by their place in it). An
    index numbering its rows this way breaks equal scores by content, so reordering or renaming the
    corpus files changes no ranking (issue 22 §4)."""
    return sorted(chunks, key=lambda c: (c.sections, hashlib.sha256(c.text.encode("utf-8")).digest(), c.id))


@dataclass(frozen=True)
class ChunkStats:
    """Sizes of a chunking, as `rageval validate` prints them: how many chunks, tokens per chunk
    (smallest, median, mean, largest) and how many chunks hold more than one section."""

    chunks: int
    min_tokens: int
    median_tokens: float
    mean_tokens: float
    max_tokens: int
    multi_section: int

    @classmethod
    def of(cls, chunks: Sequence[Chunk]) -> ChunkStats:
        sizes = [c.tokens for c in chunks] or [0]
        return cls(len(chunks), min(sizes), float(statistics.median(sizes)), statistics.fmean(sizes), max(sizes),
                   sum(1 for c in chunks if len(c.sections) > 1))

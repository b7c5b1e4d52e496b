"""Sections → Chunks, sized in tokens (``rageval.text`` tokenizer).

Section-aware packing, the way markdown-header splitters work: whole sections of a document are
packed into a chunk while the chunk stays within ``size`` tokens; a section longer than ``size``
is cut into windows of ``size`` tokens that overlap by ``overlap`` tokens, each window keeping the
section's id. Every chunk records the sections it contains, so golden labels (section ids) are
compared across any two chunkings. Chunks never span two documents.
"""

from __future__ import annotations

from dataclasses import dataclass

from rageval.golden.corpus import Corpus, Section
from rageval.text import count_tokens, token_spans


@dataclass(frozen=True)
class Chunk:
    id: str
    text: str
    tokens: int
    sections: tuple[str, ...]
    document: str


def chunk_corpus(corpus: Corpus, size: int, overlap: int = 0) -> list[Chunk]:
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
        buf: list[tuple[str, str, int]] = []
        n_doc, buf_tokens = 0, 0
        for piece in pieces:
            if buf and buf_tokens + piece[2] > size:
                n_doc += 1
                chunks.append(_make(doc, n_doc, buf))
                buf, buf_tokens = [], 0
            buf.append(piece)
            buf_tokens += piece[2]
        if buf:
            chunks.append(_make(doc, n_doc + 1, buf))
    return chunks


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
                 sections=sections, document=doc)

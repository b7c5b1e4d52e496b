"""Scrubbed log entries → distinct questions → intent clusters → a diverse sample to label.

:func:`propose` scrubs every entry (:mod:`.scrub`), merges exact and near duplicates, drops the
questions the golden set already holds, clusters the rest by intent (spherical k-means) and samples
round-robin over the clusters. The records it returns (:class:`CandidateSet` of :class:`Candidate`
and :class:`Cluster`) are what :mod:`.output` renders.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rageval.errors import ConfigError, DatasetError
from rageval.golden.candidates.logs import LogEntry
from rageval.golden.candidates.scrub import (
    DEFAULT_ORDER_PATTERNS,
    PLACEHOLDER,
    WORD,
    Scrubber,
    cached_scrubber,
)
from rageval.text import fold

MAX_UNIQUE = 50_000

#: Words left out of the text that is embedded for de-duplication and clustering (folded forms):
#: Vietnamese particles, pronouns, pleasantries and question words that every intent shares
#: ("có … không", "thì sao ạ", "shop ơi", "cảm ơn"), and a few English ones. Words whose folded form collides with a
#: content word are kept: "bao" (bao lâu / bảo hành), "may" (mấy / máy), "tien" (tiền).
_STOPWORDS_TEXT = """
a ah ak alo anh ban cho chi chua co cua cung dc de den di do duoc em gi ha hok hoi k kg khi khong ko
la lai luon ma minh nao nay nha nhe nhieu nhu nua o oi ra roi sao sau sdt shop so the thi thoi toi
trong tu va vao vay ve voi vs cam on xin chao ok oke
an and are at about can do does for from hello hi how i is it me my of or please thank thanks the to what
when you
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())


@dataclass(frozen=True)
class Candidate:
    id: str                     # cand-001 …
    question: str               # scrubbed, otherwise exactly as the customer wrote it
    cluster: int                # 1-based; clusters are numbered by how often customers asked
    cluster_label: str          # the cluster's most distinctive (folded) words
    duplicates: int             # other log entries merged into this one (exact or near duplicates)
    lines: tuple[int, ...]      # source line numbers of this question and its duplicates
    scrubbed: tuple[str, ...]   # kinds of personal data replaced in ``question``
    variants: tuple[str, ...] = ()   # other spellings merged into it (scrubbed, at most 5)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "question": self.question, "cluster": self.cluster,
                "cluster_label": self.cluster_label, "duplicates": self.duplicates, "lines": list(self.lines),
                "scrubbed": list(self.scrubbed), "variants": list(self.variants)}


@dataclass(frozen=True)
class Cluster:
    id: int
    label: str
    questions: int      # distinct questions (after merging duplicates)
    occurrences: int    # log entries, duplicates included

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "questions": self.questions, "occurrences": self.occurrences}


@dataclass(frozen=True)
class CandidateSet:
    candidates: tuple[Candidate, ...]
    clusters: tuple[Cluster, ...]
    entries: int             # log entries given
    unique: int              # distinct questions left after de-duplication
    merged: int              # entries merged into another as an exact or near duplicate
    dropped_empty: int       # entries with fewer than min_words content words once personal data is removed
    dropped_existing: int    # distinct questions already (nearly) in the golden set
    embedder: str
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": [c.to_dict() for c in self.candidates], "clusters": [c.to_dict() for c in self.clusters],
                "entries": self.entries, "unique": self.unique, "merged": self.merged,
                "dropped_empty": self.dropped_empty, "dropped_existing": self.dropped_existing,
                "embedder": self.embedder, "seed": self.seed}


@dataclass
class _Group:
    """A distinct question while proposing (mutable scratch, never returned)."""
    text: str
    kinds: tuple[str, ...]
    key: str
    lines: list[int]
    variants: list[str]


def _folded_words(text: str) -> list[str]:
    """The folded words of ``text``, placeholders removed."""
    return WORD.findall(fold(PLACEHOLDER.sub(" ", text)))


def _key(text: str) -> str:
    """The form two texts must share to be exact duplicates: folded words, placeholders removed."""
    return " ".join(_folded_words(text))


def _content_words(text: str, stopwords: frozenset[str]) -> list[str]:
    """Folded words of ``text`` without placeholders and stop words (all words if none is left)."""
    words = _folded_words(text)
    return [w for w in words if w not in stopwords] or words


def _check_params(n: int, dedupe_threshold: float, min_words: int, k: int | None) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"candidates: n (how many candidates to propose) must be a positive integer, got {n!r}.")
    if isinstance(dedupe_threshold, bool) or not isinstance(dedupe_threshold, (int, float)) \
            or not 0.0 < float(dedupe_threshold) <= 1.0:
        raise ConfigError(f"candidates: dedupe_threshold must be a cosine similarity in (0, 1], e.g. 0.9; "
                          f"got {dedupe_threshold!r}.")
    if isinstance(min_words, bool) or not isinstance(min_words, int) or min_words < 1:
        raise ConfigError(f"candidates: min_words must be a positive integer, got {min_words!r}.")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"candidates: k (number of intent clusters) must be a positive integer, got {k!r}.")


def _near_duplicates(vectors: np.ndarray, threshold: float, block: int = 1024) -> list[int]:
    """For each row, the index of the earlier row it merges into (itself when it starts a group).

    Greedy in order: a row joins the most similar earlier group representative with cosine >=
    threshold. Similarities are computed in blocks of rows, so memory stays O(block × m).
    """
    m = len(vectors)
    parent = list(range(m))
    is_rep = np.zeros(m, dtype=bool)
    for start in range(0, m, block):
        sims = vectors[start:start + block] @ vectors[:start + block].T
        for r in range(sims.shape[0]):
            i = start + r
            row = sims[r, :i]
            candidates = np.nonzero((row >= threshold) & is_rep[:i])[0]
            if len(candidates):
                best = candidates[np.argmax(row[candidates])]
                parent[i] = int(best)
            else:
                is_rep[i] = True
    return parent


def _kmeans(x: np.ndarray, k: int, rng: np.random.Generator, n_init: int = 8, iters: int = 50) -> np.ndarray:
    """Spherical k-means (cosine) with k-means++ seeding; the best of ``n_init`` runs. Labels 0..k-1."""
    m = len(x)
    best_labels, best_score = None, -math.inf
    for _ in range(n_init):
        centers = [int(rng.integers(m))]
        closest = x @ x[centers[0]]
        for _ in range(1, k):
            d = np.clip(1.0 - closest, 0.0, None) ** 2
            d[centers] = 0.0
            total = d.sum()
            if total <= 0:
                choices = np.setdiff1d(np.arange(m), centers)
                nxt = int(choices[rng.integers(len(choices))])
            else:
                nxt = int(rng.choice(m, p=d / total))
            centers.append(nxt)
            closest = np.maximum(closest, x @ x[nxt])
        c = x[centers].copy()
        labels = np.full(m, -1)
        for _ in range(iters):
            sims = x @ c.T
            new = np.argmax(sims, axis=1)
            if np.array_equal(new, labels):
                break
            labels = new
            for j in range(k):
                members = x[labels == j]
                if len(members) == 0:       # an emptied cluster restarts at the worst-served point
                    far = int(np.argmin(sims[np.arange(m), labels]))
                    c[j] = x[far]
                    labels[far] = j
                    continue
                mean = members.sum(axis=0)
                norm = np.linalg.norm(mean)
                c[j] = mean / norm if norm > 0 else members[0]
        score = float((x @ c.T)[np.arange(m), labels].sum())
        if score > best_score + 1e-9:
            best_labels, best_score = labels.copy(), score
    return best_labels


def _diverse_order(x: np.ndarray, occurrences: list[int], first_line: list[int], limit: int) -> list[int]:
    """Up to ``limit`` row indices of one cluster: first the question that best stands for it
    (times asked × similarity to the whole cluster; ties: the earliest), then repeatedly the one
    least similar to all picked so far (ties: the most asked, then the earliest)."""
    size = len(x)
    occ = np.asarray(occurrences)
    line = np.asarray(first_line)
    typical = occ * (x @ x.sum(axis=0))
    first = int(np.lexsort((line, -typical))[0])
    picked = [first]
    closest = x @ x[first]
    closest[first] = np.inf
    while len(picked) < min(size, limit):
        nxt = int(np.lexsort((line, -occ, closest))[0])
        picked.append(nxt)
        closest = np.maximum(closest, x @ x[nxt])
        closest[picked] = np.inf
    return picked


def _default_k(m: int) -> int:
    return max(1, min(m, 30, round(math.sqrt(m / 2))))


def _mean_position(word: str, texts: list[list[str]]) -> float:
    """Mean relative position (0 = first word, 1 = last) of ``word`` where it occurs, so a label
    reads in the customers' word order ("bao hanh", not "hanh bao")."""
    spots = [t.index(word) / max(1, len(t) - 1) for t in texts if word in t]
    return sum(spots) / len(spots)


def _labels(texts: list[list[str]], members: list[list[int]], top: int = 3) -> list[str]:
    """Most distinctive folded words of each cluster: share of the cluster's questions using a word
    × log(#questions / #questions using it); words of one letter and numbers are left out. The
    chosen words are put in the order customers write them."""
    m = len(texts)
    df: dict[str, int] = {}
    for words in texts:
        for w in set(words):
            df[w] = df.get(w, 0) + 1
    out = []
    for group in members:
        cdf: dict[str, int] = {}
        for i in group:
            for w in set(texts[i]):
                if len(w) > 1 and not w.isdigit():
                    cdf[w] = cdf.get(w, 0) + 1
        best = sorted(cdf, key=lambda w: (-(cdf[w] / len(group)) * math.log((m + 1) / df[w]), w))[:top]
        out.append(" ".join(sorted(best, key=lambda w: (_mean_position(w, [texts[i] for i in group]), w))))
    return out


def propose(entries: Iterable[LogEntry], *, embedder: Any, n: int = 40, names: Sequence[str] = (),
            order_patterns: Sequence[str] = DEFAULT_ORDER_PATTERNS, existing_questions: Iterable[str] = (),
            dedupe_threshold: float = 0.9, seed: int = 0, k: int | None = None, min_words: int = 2,
            stopwords: Iterable[str] = STOPWORDS) -> CandidateSet:
    """Propose up to ``n`` diverse, scrubbed questions from ``entries`` for a person to label.

    1. Scrub every entry (:class:`Scrubber`); drop those with fewer than ``min_words`` words left
       that are neither placeholders nor ``stopwords`` ("alo shop oi", "<PHONE>").
    2. Merge exact duplicates (same folded words, placeholders ignored), then near duplicates
       (cosine >= ``dedupe_threshold``); the first occurrence is kept, as written. What is
       embedded is the question's folded words without placeholders and without ``stopwords``
       (:data:`STOPWORDS`: particles and question words every intent shares, which would
       otherwise decide the clusters), so "Đổi trả trong mấy ngày vậy shop?" and
       "doi tra trong may ngay" are near duplicates.
    3. Drop questions equal or near (same threshold) to one of ``existing_questions``.
    4. Cluster what is left by intent: spherical k-means on the embeddings, ``k`` defaulting to
       round(sqrt(questions / 2)) within 1..30, seeded by ``seed``.
    5. Sample round-robin over the clusters (most asked first): in each cluster first the question
       that best stands for it (times asked × similarity to the cluster), then each time the one
       least similar to those already picked.

    ``embedder`` (the CLI passes a new local embedder: customers' text never leaves the machine) is
    fitted on the questions (and ``existing_questions``) with ``fit``, as the Embedder protocol expects.
    Candidates come grouped by cluster, numbered cand-001, cand-002, …
    """
    _check_params(n, dedupe_threshold, min_words, k)
    scrubber = cached_scrubber(names, order_patterns)
    entries = list(entries)
    stop = frozenset(fold(w) for w in stopwords)
    groups, dropped_empty = _distinct_questions(entries, scrubber, stop, min_words)
    existing = [q for q in existing_questions if isinstance(q, str) and q.strip()]
    name = str(getattr(embedder, "name", type(embedder).__name__))
    if not groups:
        return CandidateSet((), (), len(entries), 0, 0, dropped_empty, 0, name, seed)
    texts = [" ".join(_content_words(g.text, stop)) for g in groups]
    existing_texts = [" ".join(_content_words(q, stop)) for q in existing]
    embedder.fit(texts + existing_texts)
    vectors = np.asarray(embedder.embed_queries(texts), dtype=np.float64)
    keep = _merge_near_duplicates(groups, vectors, float(dedupe_threshold))
    fresh = keep
    if existing:
        existing_vectors = np.asarray(embedder.embed_queries(existing_texts), dtype=np.float64)
        fresh = _not_in_golden(groups, keep, vectors, existing, existing_vectors, dedupe_threshold)
    dropped_existing = len(keep) - len(fresh)
    merged = len(entries) - dropped_empty - len(keep)
    if not fresh:
        return CandidateSet((), (), len(entries), 0, merged, dropped_empty, dropped_existing, name, seed)
    candidates, clusters = _cluster_and_sample([groups[i] for i in fresh], vectors[fresh],
                                               [texts[i] for i in fresh], k=k, seed=seed, n=n)
    return CandidateSet(candidates, clusters, len(entries), len(fresh), merged, dropped_empty, dropped_existing,
                        name, seed)


def _distinct_questions(entries: Sequence[LogEntry], scrubber: Scrubber, stop: frozenset[str],
                        min_words: int) -> tuple[list[_Group], int]:
    """Steps 1 and 2a: the scrubbed entries merged by exact duplicates, in order of first
    occurrence, and how many entries were dropped as too short."""
    groups: list[_Group] = []
    by_key: dict[str, _Group] = {}
    dropped_empty = 0
    for entry in entries:
        result = scrubber.scrub(entry.text)
        key = _key(result.text)
        if len([w for w in key.split() if w not in stop]) < min_words:
            dropped_empty += 1
            continue
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = _Group(result.text, result.kinds, key, [], [])
            groups.append(group)
        elif result.text != group.text and result.text not in group.variants:
            group.variants.append(result.text)
        group.lines.append(entry.line)
    if len(groups) > MAX_UNIQUE:
        raise DatasetError(f"the logs hold {len(groups)} distinct questions, more than {MAX_UNIQUE}. "
                           "Propose from a random sample of the logs instead.")
    return groups, dropped_empty


def _merge_near_duplicates(groups: list[_Group], vectors: np.ndarray, threshold: float) -> list[int]:
    """Step 2b: fold each near duplicate's lines and spellings into the group it merges into;
    the indices of the groups that remain."""
    parent = _near_duplicates(vectors, threshold)
    for i, p in enumerate(parent):
        if p != i:
            rep, dup = groups[p], groups[i]
            rep.lines.extend(dup.lines)
            for v in [dup.text, *dup.variants]:
                if v != rep.text and v not in rep.variants:
                    rep.variants.append(v)
    return [i for i, p in enumerate(parent) if p == i]


def _not_in_golden(groups: list[_Group], keep: list[int], vectors: np.ndarray, existing: list[str],
                   existing_vectors: np.ndarray, threshold: float) -> list[int]:
    """Step 3: the kept groups that are neither equal nor near (cosine >= ``threshold``) to a
    question of the golden set."""
    existing_keys = {_key(q) for q in existing}
    near = (vectors[keep] @ existing_vectors.T).max(axis=1) >= threshold
    return [i for i, is_near in zip(keep, near) if not is_near and groups[i].key not in existing_keys]


def _cluster_and_sample(groups: list[_Group], x: np.ndarray, texts: list[str], *, k: int | None, seed: int,
                        n: int) -> tuple[tuple[Candidate, ...], tuple[Cluster, ...]]:
    """Steps 4 and 5 over the questions left (``groups``, their embeddings ``x`` and embedded
    ``texts``): the clusters, most asked first, and the candidates grouped by cluster."""
    occurrences = [len(g.lines) for g in groups]
    first_line = [min(g.lines) for g in groups]
    clustered = _clusters(x, occurrences, first_line, k, seed)
    labels = _labels([t.split() for t in texts], clustered)
    clusters = tuple(Cluster(cid + 1, labels[cid], len(group), sum(occurrences[j] for j in group))
                     for cid, group in enumerate(clustered))
    picked = _sample(x, clustered, occurrences, first_line, n)
    candidates: list[Candidate] = []
    for cluster, rows in zip(clusters, picked):
        for j in rows:
            g = groups[j]
            candidates.append(Candidate(
                id=f"cand-{len(candidates) + 1:03d}", question=g.text, cluster=cluster.id,
                cluster_label=cluster.label, duplicates=len(g.lines) - 1,
                lines=tuple(sorted(g.lines)), scrubbed=g.kinds, variants=tuple(g.variants[:5])))
    return tuple(candidates), clusters


def _clusters(x: np.ndarray, occurrences: list[int], first_line: list[int], k: int | None,
              seed: int) -> list[list[int]]:
    """Step 4: the row indices of each intent cluster, the most asked cluster first (ties: the
    earliest asked)."""
    m = len(x)
    k_used = min(k, m) if k is not None else _default_k(m)
    raw = _kmeans(x, k_used, np.random.default_rng(seed))
    members: dict[int, list[int]] = {}
    for j, label in enumerate(raw):
        members.setdefault(int(label), []).append(j)
    order = sorted(members, key=lambda c: (-sum(occurrences[j] for j in members[c]),
                                           min(first_line[j] for j in members[c])))
    return [members[c] for c in order]


def _sample(x: np.ndarray, clustered: list[list[int]], occurrences: list[int], first_line: list[int],
            n: int) -> list[list[int]]:
    """Step 5: round-robin over the clusters, each in its diverse order, until ``n`` are taken;
    for each cluster the rows picked, in that order. A cluster never gives more than ``n``, so
    only that many are ranked."""
    ranked = [_diverse_order(x[group], [occurrences[j] for j in group], [first_line[j] for j in group], n)
              for group in clustered]
    ranked = [[group[r] for r in order] for group, order in zip(clustered, ranked)]
    chosen: list[set[int]] = [set() for _ in ranked]
    taken = 0
    for depth in range(max(len(r) for r in ranked)):
        for cid, r in enumerate(ranked):
            if taken < n and depth < len(r):
                chosen[cid].add(r[depth])
                taken += 1
    return [[j for j in r if j in chosen[cid]] for cid, r in enumerate(ranked)]

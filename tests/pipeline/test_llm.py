"""rageval.pipeline.llm against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_server.py),
through the real ``openai`` client: caching, retries, budget, concurrency, secrets."""

from __future__ import annotations

import json
import os
import random
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from openai_server import (  # tests/ is on sys.path (conftest.py)
    Fault,
    OpenAIServer,
    Refusal,
    deterministic_embedding,
)

from rageval.cost import StageCost
from rageval.errors import BudgetExceeded, ConfigError, ModelCallError, ModelError
from rageval.pipeline import llm_cache
from rageval.pipeline.generation import ChatGenerator
from rageval.pipeline.llm import MAX_WAIT_S, ChatResult, LLMClient
from rageval.settings import LLMConfig

SENTINEL = "sk-SENTINEL-123"
Q = [{"role": "system", "content": "Trả lời ngắn."},
     {"role": "user", "content": "Mua áo mặc không vừa thì được trả trong mấy ngày?"}]


@pytest.fixture
def server(model_server):
    return model_server(rules=[("mấy ngày", "Trong 7 ngày kể từ ngày nhận hàng.")])


def make_client(server, cache_dir, *, env=None, rng=None, **cfg):
    waits: list[float] = []
    cfg.setdefault("base_url", server.base_url)
    client = LLMClient(LLMConfig(**cfg), env={} if env is None else env, cache_dir=cache_dir,
                       sleep=waits.append, rng=rng or random.Random(7))
    return client, waits


def ask(text):
    return [{"role": "user", "content": text}]


def cache_files(cache_dir: Path) -> list[Path]:
    return sorted(p for p in cache_dir.rglob("*") if p.is_file())


# --- cache -------------------------------------------------------------------------------------------
def test_second_identical_call_is_served_from_cache_without_a_server_call(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    first = client.chat(Q, model="gen-a", seed=1, max_tokens=50)
    second = client.chat(Q, model="gen-a", seed=1, max_tokens=50)
    assert first == ChatResult("Trong 7 ngày kể từ ngày nhận hàng.", 3 + 11, 8, False, "gen-a")
    assert second.text == first.text and second.cached is True
    assert (second.prompt_tokens, second.completion_tokens) == (14, 8)
    assert server.calls["chat"] == 1
    usage = client.usage()
    assert usage["calls"] == {"generation": 1} and usage["calls_total"] == 1 and usage["cache_hits"] == 1
    files = cache_files(tmp_path)
    assert len(files) == 1 and files[0].parent.name == files[0].stem[:2] and len(files[0].stem) == 64


def test_a_fresh_client_reuses_the_cache_on_disk(server, tmp_path):
    make_client(server, tmp_path)[0].chat(Q, model="gen-a")
    again, _ = make_client(server, tmp_path)
    assert again.chat(Q, model="gen-a").cached is True
    assert server.calls["chat"] == 1 and again.usage()["calls_total"] == 0


@pytest.mark.parametrize("change", [{"temperature": 0.7}, {"seed": 2}, {"max_tokens": 10}, {"model": "gen-b"},
                                    {"response_format": {"type": "json_object"}},
                                    {"messages": Q[1:]}])
def test_any_request_parameter_change_is_a_cache_miss(server, tmp_path, change):
    client, _ = make_client(server, tmp_path)
    base = {"messages": Q, "model": "gen-a", "temperature": 0.0, "seed": 1, "max_tokens": 50}
    client.chat(**base)
    result = client.chat(**{**base, **change})
    assert result.cached is False and server.calls["chat"] == 2


def test_use_cache_false_calls_the_server_again_and_refreshes_the_cache(server, tmp_path):
    answers = iter(["first answer", "second answer"])
    server.responder = lambda body: next(answers)
    client, _ = make_client(server, tmp_path)
    assert client.chat(Q, model="gen-a").text == "first answer"
    fresh = client.chat(Q, model="gen-a", use_cache=False)
    assert fresh.text == "second answer" and fresh.cached is False
    assert server.calls["chat"] == 2
    cached = client.chat(Q, model="gen-a")
    assert cached.cached is True and cached.text == "second answer"
    assert server.calls["chat"] == 2 and len(cache_files(tmp_path)) == 1


def test_a_corrupted_cache_file_is_a_miss_and_is_overwritten(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    client.chat(Q, model="gen-a")
    [path] = cache_files(tmp_path)
    path.write_text('{"key": "half a fi', encoding="utf-8")
    result = client.chat(Q, model="gen-a")
    assert result.cached is False and server.calls["chat"] == 2
    assert json.loads(path.read_text(encoding="utf-8"))["response"]["text"] == result.text
    assert client.chat(Q, model="gen-a").cached is True
    assert cache_files(tmp_path) == [path]          # no temporary files left behind


def test_a_cache_entry_that_is_a_symlink_is_a_miss_and_is_replaced_not_written_through(server, tmp_path):
    client, _ = make_client(server, tmp_path / "cache")
    client.chat(Q, model="gen-a")
    [path] = cache_files(tmp_path / "cache")
    elsewhere = tmp_path / "elsewhere.json"
    path.rename(elsewhere)                   # a valid record, reached through a link
    path.symlink_to(elsewhere)
    before = elsewhere.read_bytes()
    assert client.chat(Q, model="gen-a").cached is False and server.calls["chat"] == 2
    assert not path.is_symlink() and elsewhere.read_bytes() == before
    assert client.chat(Q, model="gen-a").cached is True


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "too-big"])
def test_a_cache_entry_that_is_no_bounded_regular_file_is_a_miss_at_once(server, tmp_path, kind, monkeypatch):
    client, _ = make_client(server, tmp_path)
    client.chat(Q, model="gen-a")
    [path] = cache_files(tmp_path)
    if kind == "too-big":                    # a valid record over the bound
        monkeypatch.setattr(llm_cache, "MAX_ENTRY_BYTES", len(path.read_bytes()) - 1)
    else:
        path.unlink()
        path.symlink_to("/dev/zero") if kind == "dev-zero" else os.mkfifo(path)  # endless / no writer
    assert client.chat(Q, model="gen-a").cached is False and server.calls["chat"] == 2
    assert path.is_file() and not path.is_symlink()
    assert client.chat(Q, model="gen-a").cached is (kind != "too-big")


def test_embed_sends_only_texts_not_in_the_cache(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    first = client.embed("emb-1", ["a", "b"])
    second = client.embed("emb-1", ["b", "c"])
    assert [body["input"] for body in server.bodies("embeddings")] == [["a", "b"], ["c"]]
    assert first == [deterministic_embedding("emb-1", t, 8) for t in ["a", "b"]]
    assert second == [deterministic_embedding("emb-1", t, 8) for t in ["b", "c"]]
    assert client.embed("emb-1", ["c", "a", "c"]) == [second[1], first[0], second[1]]
    assert server.calls["embeddings"] == 2
    usage = client.usage()
    assert usage["calls"] == {"embedding": 2} and usage["cache_hits"] == 1 + 2


def test_embed_sends_each_new_text_once_and_another_model_is_another_cache(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    client.embed("emb-1", ["x", "y", "x"])
    client.embed("emb-2", ["x"])
    assert [(b["model"], b["input"]) for b in server.bodies("embeddings")] == [("emb-1", ["x", "y"]), ("emb-2", ["x"])]
    assert client.embed("emb-1", []) == [] and server.calls["embeddings"] == 2


def test_embed_batches_uncached_texts(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    client.embed("emb-1", ["t1", "t2", "t3"], batch_size=2)
    assert [b["input"] for b in server.bodies("embeddings")] == [["t1", "t2"], ["t3"]]


# --- retries -----------------------------------------------------------------------------------------
def test_429_with_retry_after_waits_what_the_server_asked_then_succeeds(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=3)
    server.faults.append(Fault.rate_limit(retry_after=1))
    result = client.chat(Q, model="gen-a")
    assert result.text == "Trong 7 ngày kể từ ngày nhận hàng."
    assert waits == [1.0] and server.calls["chat"] == 2
    assert client.usage()["retries"] == 1 and client.usage()["calls_total"] == 1


def test_retry_after_ms_takes_precedence_and_waits_are_capped(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=3)
    server.faults += [Fault.rate_limit(retry_after=2, retry_after_ms=250), Fault.rate_limit(retry_after=3600),
                      Fault("status", status=503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")]
    client.chat(Q, model="gen-a")
    assert waits == [0.25, MAX_WAIT_S, 0.0] and server.calls["chat"] == 4


def test_persistent_500_fails_after_exactly_max_retries_plus_one_attempts(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=2)
    server.faults.append(Fault.server_error(500, "The server had an error processing your request", times=10))
    with pytest.raises(ModelCallError, match=r"chat model 'gen-a' failed after 3 attempts for case q07: "
                                             r"HTTP 500: The server had an error processing your request") as info:
        client.chat(Q, model="gen-a", case_id="q07")
    assert info.value.status_code == 500 and info.value.attempts == 3
    assert isinstance(info.value, ModelError)
    assert server.calls["chat"] == 3
    # exponential backoff with jitter in [50 %, 100 %] of 0.5 s, 1 s
    assert len(waits) == 2 and 0.25 <= waits[0] <= 0.5 and 0.5 <= waits[1] <= 1.0
    assert client.usage()["errors"] == 1 and client.usage()["calls_total"] == 0
    assert cache_files(tmp_path) == []


def test_client_errors_other_than_429_are_not_retried(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=4)
    server.faults.append(Fault.server_error(400, "Invalid value for 'temperature'"))
    with pytest.raises(ModelCallError, match=r"after 1 attempt: HTTP 400: Invalid value for 'temperature'"):
        client.chat(Q, model="gen-a")
    assert server.calls["chat"] == 1 and waits == []


def test_wrong_key_gives_401_with_a_tip_naming_the_variable(tmp_path):
    with OpenAIServer(require_api_key="right-key") as srv:
        client, _ = make_client(srv, tmp_path, env={"MY_KEY": "wrong-key"}, api_key_env="MY_KEY")
        with pytest.raises(ModelCallError, match="HTTP 401: Incorrect API key provided") as info:
            client.chat(Q, model="gen-a")
        assert "$MY_KEY" in info.value.tip and srv.calls["chat"] == 1


def test_malformed_json_body_is_retried_once_then_fails(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=4)
    server.faults.append(Fault.malformed_json(times=5))
    with pytest.raises(ModelCallError, match=r"failed after 2 attempts: malformed response: the body is not JSON"):
        client.chat(Q, model="gen-a")
    assert server.calls["chat"] == 2 and len(waits) == 1


def test_one_malformed_body_then_a_good_one_succeeds(server, tmp_path):
    client, _ = make_client(server, tmp_path, max_retries=4)
    server.faults.append(Fault.malformed_json())
    assert client.chat(Q, model="gen-a").text == "Trong 7 ngày kể từ ngày nhận hàng."
    assert server.calls["chat"] == 2


@pytest.mark.parametrize("call, message", [
    (lambda c: c.chat(Q, model="gen-a"), "no 'choices' in the chat completion"),
    (lambda c: c.embed("emb-1", ["a"]), "expected 1 embeddings in 'data', got no"),
])
def test_json_of_the_wrong_shape_is_a_model_call_error(server, tmp_path, call, message):
    client, _ = make_client(server, tmp_path, max_retries=0)
    server.faults.append(Fault.malformed_content())
    with pytest.raises(ModelCallError, match=message):
        call(client)


def test_timeouts_are_retried(server, tmp_path):
    client, waits = make_client(server, tmp_path, max_retries=1, timeout_s=0.1)
    server.faults.append(Fault.slow(0.4, endpoint="chat"))
    assert client.chat(Q, model="gen-a").cached is False
    assert server.calls["chat"] == 2 and len(waits) == 1


def test_timeouts_exhausting_retries_name_the_setting(server, tmp_path):
    client, _ = make_client(server, tmp_path, max_retries=0, timeout_s=0.1)
    server.faults.append(Fault.slow(0.3))
    with pytest.raises(ModelCallError, match=r"timed out after 0.1 s \(llm.timeout_s\)"):
        client.chat(Q, model="gen-a")


def test_connection_refused_is_retried_then_fails(tmp_path):
    srv = OpenAIServer().start()
    base_url = srv.base_url
    srv.stop()
    client = LLMClient(LLMConfig(base_url=base_url, max_retries=2), env={}, cache_dir=tmp_path,
                       sleep=lambda s: None)
    with pytest.raises(ModelCallError, match=r"after 3 attempts: could not connect to http://127.0.0.1"):
        client.chat(Q, model="gen-a")


# --- budget and accounting -----------------------------------------------------------------------------
def test_budget_cap_stops_network_calls_but_not_cache_hits(tmp_path):
    with OpenAIServer(usage=(10, 5)) as srv:
        # 10 prompt tokens at $900/1M + 5 completion tokens at $200/1M = $0.009 + $0.001 = $0.01 a call
        client, _ = make_client(srv, tmp_path, max_cost_usd=0.03,
                                prices={"gen-a": {"prompt": 900.0, "completion": 200.0}, "emb-1": {"prompt": 1.0}})
        results = [client.chat(ask(f"câu hỏi {i}"), model="gen-a") for i in range(3)]
        assert all(not r.cached for r in results)
        with pytest.raises(BudgetExceeded, match=r"^budget exceeded: spent \$0\.03 of llm\.max_cost_usd \$0\.03$"):
            client.chat(ask("câu hỏi 3"), model="gen-a")
        assert srv.calls["chat"] == 3
        again = client.chat(ask("câu hỏi 1"), model="gen-a")
        assert again.cached is True and again.text == "echo: câu hỏi 1"
        with pytest.raises(BudgetExceeded):
            client.embed("emb-1", ["new text"])
        assert srv.calls["chat"] == 3 and srv.calls["embeddings"] == 0
        usage = client.usage()
        assert usage["usd"] == pytest.approx(0.03) and usage["calls_total"] == 3
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (30, 15)


def test_usage_counts_stages_cases_tokens_and_unpriced_models(server, tmp_path):
    client, _ = make_client(server, tmp_path, prices={"judge-m": {"prompt": 2.0, "completion": 8.0}})
    client.chat(ask("one two three"), model="gen-a", case_id="q01")                     # 3 + 4 tokens ("echo: one two three"), unpriced
    client.chat(ask("one two three four"), model="judge-m", stage="judge", case_id="q01")  # 4 + 5 tokens
    client.chat(ask("five"), model="judge-m", stage="judge", case_id="q02")                # 1 + 2 tokens
    client.chat(ask("five"), model="judge-m", stage="judge", case_id="q02")                # cache hit
    client.embed("emb-1", ["alpha beta"], case_id="q02")                                  # 2 tokens, unpriced
    usage = client.usage()
    assert usage["calls"] == {"generation": 1, "judge": 2, "embedding": 1} and usage["calls_total"] == 4
    assert usage["by_case"] == {"q01": {"generation": 1, "judge": 1}, "q02": {"judge": 1, "embedding": 1}}
    assert usage["cache_hits"] == 1
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (3 + 4 + 1 + 2, 4 + 5 + 2)
    assert usage["usd"] == pytest.approx(((4 + 1) * 2.0 + (5 + 2) * 8.0) / 1e6)   # 6.6e-05
    assert usage["unpriced_models"] == ["emb-1", "gen-a"]
    usage["by_case"]["q01"]["judge"] = 99
    assert client.usage()["by_case"]["q01"]["judge"] == 1     # a copy, not the live counters


def test_ledger_counts_calls_hits_tokens_and_usd_per_stage_and_case(server, tmp_path):
    client, _ = make_client(server, tmp_path, prices={"judge-m": {"prompt": 2.0, "completion": 8.0}})
    client.chat(ask("one two three"), model="gen-a", case_id="q01")                      # 3 + 4 tokens, unpriced
    start = client.ledger()
    client.chat(ask("one two three four"), model="judge-m", stage="judge", case_id="q01")  # 4 + 5 tokens
    client.chat(ask("one two three four"), model="judge-m", stage="judge", case_id="q01")  # cache hit
    client.embed("emb-1", ["alpha beta", "gamma"], case_id="q02")                         # 3 tokens, one call
    client.embed("emb-1", ["gamma"], case_id="q02")                                       # cache hit
    ledger = client.ledger()
    assert ledger.stages == {"generation": StageCost(1, 0, 3, 4, 0.0),
                             "judge": StageCost(1, 1, 4, 5, (4 * 2.0 + 5 * 8.0) / 1e6),
                             "embedding": StageCost(1, 1, 3, 0, 0.0)}
    since = ledger.since(start)                                  # what one run made, apart from the earlier one
    assert since.stages == {"judge": StageCost(1, 1, 4, 5, 4.8e-05), "embedding": StageCost(1, 1, 3, 0, 0.0)}
    assert since.by_case == {"q01": {"judge": StageCost(1, 1, 4, 5, 4.8e-05)},
                             "q02": {"embedding": StageCost(1, 1, 3, 0, 0.0)}}


def test_an_unpriced_model_with_a_budget_is_refused_before_any_call(server, tmp_path):
    client, _ = make_client(server, tmp_path, max_cost_usd=0.001, prices={"gpt-4o-mini": {"prompt": 0.15}})
    with pytest.raises(ConfigError, match=r"llm.max_cost_usd is set, but model 'gpt-4.1' has no price in "
                                          r"llm.prices.*Add `llm: \{prices: \{gpt-4.1: \{prompt: …"):
        client.chat(ask("hello"), model="gpt-4.1", stage="judge")
    assert server.calls["chat"] == 0


def test_calls_past_the_cap_are_bounded_by_the_concurrency(tmp_path):
    """16 threads, 4 calls in flight at most, $0.01 a call and a $0.05 cap: the cap allows 5 calls;
    the calls already in flight when it is reached finish, and nothing else starts."""
    concurrency, per_call, cap = 4, 0.01, 0.05
    with OpenAIServer(usage=(10, 5), latency_s=0.05) as srv:
        client, _ = make_client(srv, tmp_path, concurrency=concurrency, max_cost_usd=cap,
                                prices={"gen-a": {"prompt": 900.0, "completion": 200.0}})

        def one(i):
            try:
                return client.chat(ask(f"câu hỏi {i}"), model="gen-a")
            except BudgetExceeded as exc:
                return exc

        with ThreadPoolExecutor(max_workers=16) as pool:
            results = list(pool.map(one, range(40)))
    allowed = round(cap / per_call)
    answered = [r for r in results if isinstance(r, ChatResult)]
    assert allowed <= srv.calls["chat"] <= allowed + concurrency - 1
    assert len(answered) == srv.calls["chat"] == client.usage()["calls_total"]       # every call counted
    assert srv.max_in_flight <= concurrency
    assert sum(isinstance(r, BudgetExceeded) for r in results) == 40 - len(answered)
    assert client.usage()["usd"] == pytest.approx(per_call * len(answered))


def test_a_refusal_is_kept_apart_from_the_content_and_cached(tmp_path):
    with OpenAIServer(responder=lambda body: Refusal("I can't help with that.")) as srv:
        client, _ = make_client(srv, tmp_path)
        first = client.chat(ask("grade this"), model="judge-m", stage="judge")
        again = client.chat(ask("grade this"), model="judge-m", stage="judge")
        assert srv.calls["chat"] == 1
    assert (first.text, first.refusal, first.cached) == ("", "I can't help with that.", False)
    assert (again.text, again.refusal, again.cached) == ("", "I can't help with that.", True)


def test_the_chat_generator_answers_with_the_refusal_text(tmp_path):
    (tmp_path / "prompt.j2").write_text("{{ question }}", encoding="utf-8")
    with OpenAIServer(responder=lambda body: Refusal("Xin lỗi, tôi không thể trả lời.")) as srv:
        client, _ = make_client(srv, tmp_path / "cache")
        out = ChatGenerator(client, "gen-a", tmp_path / "prompt.j2").generate("Hỏi gì?", [], case_id="q01")
    assert out.answer == "Xin lỗi, tôi không thể trả lời." and out.error is None


# --- concurrency ---------------------------------------------------------------------------------------
def test_concurrency_bound_holds_across_eight_threads(tmp_path):
    with OpenAIServer(latency_s=0.1) as srv:
        client, _ = make_client(srv, tmp_path, concurrency=2)
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda i: client.chat(ask(f"q{i}"), model="gen-a", case_id=f"q{i}"), range(8)))
        assert [r.text for r in results] == [f"echo: q{i}" for i in range(8)]
        assert srv.calls["chat"] == 8
        assert srv.max_in_flight == 2   # never more than the bound, and the bound is actually used
        assert client.usage()["calls_total"] == 8


# --- secrets and configuration -------------------------------------------------------------------------
def test_the_api_key_is_sent_but_never_stored_or_shown(tmp_path):
    with OpenAIServer(require_api_key=SENTINEL) as srv:
        client, _ = make_client(srv, tmp_path, env={"OPENAI_API_KEY": SENTINEL}, max_retries=1,
                                prices={"gen-a": {"prompt": 1.0, "completion": 1.0}})
        client.chat(Q, model="gen-a", case_id="q01")
        client.embed("emb-1", ["a", "b"])
        assert {r.headers["authorization"] for r in srv.requests} == {f"Bearer {SENTINEL}"}
        srv.faults.append(Fault.server_error(500, f"upstream rejected key {SENTINEL}", times=2))
        with pytest.raises(ModelCallError) as info:
            client.chat(ask("another"), model="gen-a")
        exc = info.value
        shown = "".join(traceback.format_exception(exc)) + repr(exc) + str(exc.tip)
        assert "upstream rejected key ***" in str(exc) and SENTINEL not in shown
        assert exc.__cause__ is None and exc.__context__ is None   # no openai request (with headers) attached
        for path in cache_files(tmp_path):
            assert SENTINEL not in path.read_text(encoding="utf-8")
        assert len(cache_files(tmp_path)) == 3
        for text in (json.dumps(client.usage()), json.dumps(client.describe()), repr(client)):
            assert SENTINEL not in text
        assert client.describe()["api_key_env"] == "OPENAI_API_KEY"


def test_openai_base_url_from_the_env_mapping_is_used(server, tmp_path):
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
    client = LLMClient(LLMConfig(), env=env, cache_dir=tmp_path, sleep=lambda s: None)
    assert client.chat(Q, model="gen-a").text == "Trong 7 ngày kể từ ngày nhận hàng."
    assert server.calls["chat"] == 1 and client.describe()["base_url"] == server.base_url


def test_config_base_url_wins_over_the_environment(server, tmp_path):
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    client = LLMClient(LLMConfig(base_url=server.base_url + "/"), env=env, cache_dir=tmp_path)
    client.chat(Q, model="gen-a")
    assert server.calls["chat"] == 1


@pytest.mark.parametrize("cfg, env, message", [
    (LLMConfig(), {}, r"llm\.api_key_env: the environment variable OPENAI_API_KEY is not set, and the model "
                      r"endpoint https://api\.openai\.com/v1 needs an API key"),
    (LLMConfig(base_url="https://example.openai.azure.com/v1", api_key_env="AZURE_KEY"), {"AZURE_KEY": ""},
     r"environment variable AZURE_KEY is not set"),
    (LLMConfig(api_key_env="MY_KEY"), {"OPENAI_BASE_URL": "https://llm.internal/v1", "OPENAI_API_KEY": "k"},
     r"MY_KEY is not set, and the model endpoint https://llm\.internal/v1"),
    (LLMConfig(base_url="localhost:11434"), {}, r"llm\.base_url: 'localhost:11434' is not an http\(s\) URL"),
])
def test_bad_llm_settings_raise_config_error(tmp_path, cfg, env, message):
    with pytest.raises(ConfigError, match=message):
        LLMClient(cfg, env=env, cache_dir=tmp_path)


def test_a_local_endpoint_needs_no_key(server, tmp_path):
    client, _ = make_client(server, tmp_path, env={})
    client.chat(Q, model="gen-a")
    assert server.requests[0].headers["authorization"].startswith("Bearer ")


def test_describe_names_settings_without_credentials(tmp_path):
    client = LLMClient(LLMConfig(base_url="https://user:pw@llm.example.com/v1", concurrency=3, max_cost_usd=1.5),
                       env={"OPENAI_API_KEY": "k"}, cache_dir=tmp_path)
    assert client.describe() == {"base_url": "https://llm.example.com/v1", "api_key_env": "OPENAI_API_KEY",
                                 "concurrency": 3, "timeout_s": 60.0, "max_retries": 4,
                                 "cache_dir": tmp_path.as_posix(), "max_cost_usd": 1.5}


def test_concurrent_identical_embeds_leave_only_complete_cache_files(server, tmp_path):
    client, _ = make_client(server, tmp_path)
    texts = [f"chunk {i}" for i in range(20)]
    barrier = threading.Barrier(4)

    def work(_):
        barrier.wait(timeout=5)
        return client.embed("emb-1", texts)

    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(work, range(4)))
    assert all(o == outs[0] for o in outs)
    files = cache_files(tmp_path)
    assert len(files) == 20 and all(p.suffix == ".json" for p in files)
    for p in files:
        assert json.loads(p.read_text(encoding="utf-8"))["kind"] == "embedding"

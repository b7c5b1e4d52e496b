"""Every call counted, every dollar held (issue 21 §3): unusable 200s are calls, a server that sends
no ``usage`` is charged an estimate that holds the cap, prices are found under the names a model
goes by, and a price that names one side only is refused. Real HTTP to tests/openai_server.py."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from openai_server import Fault, OpenAIServer, Raw, ToolCall

from rageval import flow
from rageval.config import load_config
from rageval.cost import TEMPLATE_TOKENS_PER_MESSAGE, Cost
from rageval.errors import BudgetExceeded, ConfigError, ModelCallError
from rageval.metrics.judge import judge_case
from rageval.pipeline.llm import LLMClient, Spend
from rageval.pipeline.runner import prepare
from rageval.settings import LLMConfig

PRICE = {"prompt": 1000.0, "completion": 1000.0}          # $0.001 per token each way: easy sums


def client_for(server, tmp_path, spend=None, **cfg):
    return LLMClient(LLMConfig(base_url=server.base_url, **cfg), env={}, cache_dir=tmp_path / "cache",
                     sleep=lambda s: None, rng=random.Random(3), spend=spend)


def ask(text):
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("reply", [ToolCall("grade", '{"verdict": "pass"}'), Raw(b'{"choices": [')])
def test_an_unusable_200_is_retried_and_both_calls_are_counted(tmp_path, reply):
    with OpenAIServer(responder=lambda body: reply) as srv:
        client = client_for(srv, tmp_path, prices={"judge-m": PRICE})
        check = judge_case(client, "judge-m", "Q?", "7 ngày", "7 ngày", "30 ngày", case_id="q01")
        served = srv.calls["chat"]
    usage = client.usage()
    assert check.status == "error" and served == 2
    assert usage["calls_total"] == 2 and usage["by_case"] == {"q01": {"judge": 2}} and usage["errors"] == 1
    assert usage["usd"] > 0                                  # billed, as far as we can tell: never $0
    # a tool call carries usage (read from the unusable body); broken JSON does not (estimated)
    assert usage["estimated_calls"] == (0 if isinstance(reply, ToolCall) else 2)


def test_without_usage_the_tokens_are_estimated_marked_and_the_cap_holds(tmp_path):
    """'xin chào' is 9 UTF-8 bytes, the reply 'echo: xin chào' 15: (9 + 8) + (15 + 8) = 40 tokens a
    call at $0.001 each, $0.04 a call; a $0.10 cap lets three calls start, the fourth is refused."""
    assert TEMPLATE_TOKENS_PER_MESSAGE == 8
    with OpenAIServer(usage=False) as srv:
        client = client_for(srv, tmp_path, prices={"gen-a": PRICE}, max_cost_usd=0.10)
        for i in range(3):
            client.chat(ask("xin chào"), model="gen-a", seed=i, case_id=f"q{i}")
        with pytest.raises(BudgetExceeded, match=r"spent \$0\.12 of llm\.max_cost_usd \$0\.10"):
            client.chat(ask("xin chào"), model="gen-a", seed=99)
        assert srv.calls["chat"] == 3
    usage = client.usage()
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (3 * 17, 3 * 23)
    assert usage["usd"] == pytest.approx(0.12) and usage["estimated_calls"] == 3
    cost = Cost.of(client.ledger(), 3)
    assert cost.estimated and cost.estimated_calls == 3 and cost.to_dict()["estimated_calls"] == 3
    assert cost.stages["generation"].to_dict()["estimated"] == 3


def test_embeddings_without_usage_are_estimated_too(tmp_path):
    with OpenAIServer(usage=False) as srv:
        client = client_for(srv, tmp_path, prices={"emb": {"prompt": 1000.0}}, max_cost_usd=1.0)
        client.embed("emb", ["ab", "cde"])
    usage = client.usage()
    assert (usage["prompt_tokens"], usage["estimated_calls"]) == (2 + 8 + 3 + 8, 1)
    assert usage["usd"] == pytest.approx(0.021)


def test_a_cost_with_usage_is_not_estimated_and_reads_back_as_it_was(tmp_path):
    with OpenAIServer(usage=(10, 5)) as srv:
        client = client_for(srv, tmp_path, prices={"gen-a": PRICE})
        client.chat(ask("hello"), model="gen-a")
    cost = Cost.of(client.ledger(), 1)
    assert not cost.estimated and "estimated_calls" not in cost.to_dict() and "priced_as" not in cost.to_dict()


def test_one_spend_is_one_budget_across_clients(tmp_path):
    """A run, its re-runs and its attribution runs share one cap (issue 21 §3)."""
    spend = Spend()
    with OpenAIServer(usage=(10, 10)) as srv:                       # $0.02 a call
        first = client_for(srv, tmp_path, spend, prices={"gen-a": PRICE}, max_cost_usd=0.05)
        second = client_for(srv, tmp_path / "other", spend, prices={"gen-a": PRICE}, max_cost_usd=0.05)
        first.chat(ask("a"), model="gen-a")
        second.chat(ask("b"), model="gen-a")
        first.chat(ask("c"), model="gen-a")
        with pytest.raises(BudgetExceeded):
            second.chat(ask("d"), model="gen-a")
        assert srv.calls["chat"] == 3 and spend.usd == pytest.approx(0.06)


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "gpt-4o-mini-2024-07-18", "GPT-4o-mini", "openai:gpt-4o-mini"])
def test_a_model_is_priced_under_the_names_it_goes_by_and_the_key_used_is_said(tmp_path, model):
    with OpenAIServer(usage=(1000, 1000)) as srv:
        client = client_for(srv, tmp_path, prices={"gpt-4o-mini": {"prompt": 0.15, "completion": 0.60}},
                            max_cost_usd=1.0)
        client.chat(ask("hi"), model=model)
    usage = client.usage()
    assert usage["usd"] == pytest.approx(0.00075) and usage["unpriced_models"] == []
    assert usage["priced_as"] == {model: "gpt-4o-mini"}
    assert Cost.of(client.ledger(), 1).to_dict()["priced_as"] == {model: "gpt-4o-mini"}


def test_a_price_giving_one_side_is_refused_before_any_call(tmp_path):
    with OpenAIServer() as srv:
        client = client_for(srv, tmp_path, prices={"gpt-4o-mini": {"prompt": 0.15}}, max_cost_usd=1.0)
        with pytest.raises(ConfigError, match=r"llm.prices.gpt-4o-mini .* gives no 'completion' price"):
            client.chat(ask("hi"), model="openai/gpt-4o-mini")
        assert srv.calls["chat"] == 0


def test_a_model_matching_two_different_prices_is_refused(tmp_path):
    prices = {"gpt-4o": {"prompt": 2.5, "completion": 10.0}, "gpt-4o-2024-05-13": {"prompt": 5.0, "completion": 15.0}}
    with OpenAIServer() as srv:
        client = client_for(srv, tmp_path, prices=prices, max_cost_usd=1.0)
        with pytest.raises(ConfigError, match=r"matches several llm.prices keys with different prices"):
            client.chat(ask("hi"), model="openai/gpt-4o-2024-08-06")
        client.chat(ask("hi"), model="gpt-4o-2024-05-13")            # its own name: that price
    assert client.usage()["unpriced_models"] == []


BASE = "golden: g.yaml\ncorpus: docs/*.md\n"


@pytest.mark.parametrize("text, message", [
    ("judge: {model: j}\nllm: {prices: {j: {}}}\n", r"llm.prices.j gives no 'prompt' price"),
    ("judge: {model: j}\nllm: {prices: {j: {prompt: 1.0}}}\n", r"llm.prices.j gives no 'completion' price"),
    ("judge: {model: openai/j-2024-07-18}\nllm: {prices: {j: {prompt: 1.0}}}\n", r"llm.prices.j gives no 'completion'"),
    ("embedding: {provider: openai, model: e}\nllm: {prices: {e: {completion: 1.0}}}\n",
     r"llm.prices.e gives no 'prompt' price"),
    ("judge: {model: openai/gpt-4o-2024-08-06}\nllm: {prices: {gpt-4o: {prompt: 2.5, completion: 10}, "
     "gpt-4o-2024-05-13: {prompt: 5, completion: 15}}}\n",
     r"judge.model: model 'openai/gpt-4o-2024-08-06' matches several llm.prices keys with different prices"),
])
def test_a_half_price_in_the_config_is_refused(tmp_path, text, message):
    (tmp_path / "rageval.yml").write_text(BASE + text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path / "rageval.yml")


def test_an_embedding_price_needs_no_completion_and_a_dated_judge_name_is_priced(tmp_path):
    (tmp_path / "rageval.yml").write_text(BASE + "embedding: {provider: openai, model: e}\njudge: {model: "
                                          "openai/gpt-4o-mini-2024-07-18}\nllm: {max_cost_usd: 1, prices: {e: {prompt: "
                                          "0.02}, gpt-4o-mini: {prompt: 0.15, completion: 0.6}}}\n", encoding="utf-8")
    assert load_config(tmp_path / "rageval.yml").llm.max_cost_usd == 1.0


def test_a_failed_call_that_got_no_answer_is_not_a_call(tmp_path):
    with OpenAIServer() as srv:
        srv.faults.append(Fault.server_error(500, times=2))
        client = client_for(srv, tmp_path, max_retries=1)
        with pytest.raises(ModelCallError):
            client.chat(ask("hi"), model="gen-a")
    assert client.usage()["calls_total"] == 0 and client.usage()["errors"] == 1


def test_attribution_runs_use_the_runs_client_or_one_spending_from_its_budget(tmp_path, copy_demo):
    """flow's attribution runs (issue 21 §3, one budget): a variant with the run's llm settings gets
    the run's own client; one with other llm settings gets a client spending from the same Spend."""
    project = copy_demo(tmp_path / "banhang")
    cfg = load_config(project / "rageval-openai.yml")
    ev = prepare(cfg, env={"OPENAI_API_KEY": "sk-test-not-a-secret", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    knob = replace(cfg, generation=replace(cfg.generation, temperature=0.5))
    assert flow._sharing(ev, knob) is ev.client
    other = flow._sharing(ev, replace(cfg, llm=replace(cfg.llm, timeout_s=5.0)))
    assert other is not ev.client and other.spend is ev.client.spend
    offline = replace(cfg, generation=replace(cfg.generation, provider="extractive"),
                      judge=replace(cfg.judge, model=None, faithfulness=False))
    assert flow._sharing(ev, offline) is None

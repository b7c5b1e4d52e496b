"""Which model a name denotes, and the rules between the models a config calls.

* :func:`model_key` — one model under its many names: case folded; a provider prefix dropped
  (``openai/gpt-4o-mini``, ``models/gemini-1.5-pro``, ``openai:gpt-4o-mini``); a version after ``@``
  (``gpt-4o-mini@2024-07-18``), a ``latest`` tag or suffix and a snapshot suffix (a date
  ``-2024-07-18`` / ``-20241022``, ``-0613``, ``-002``) removed; an Ollama tag cut to its size
  (``llama3.1:8b-instruct-q4_K_M`` is ``llama3.1:8b``). Prices are looked up by it
  (:func:`price_for`).
* :func:`same_model` — the judge ≠ generator rule: equal keys, or the same family where one name
  has no size tag (``llama3.1`` is Ollama's default size, so it may be ``llama3.1:8b``).
* :func:`model_rules` — the problems ``rageval.config`` reports when a section is read: the judge
  is the generator (unless ``judge.allow_same_model``); a price that gives only one side (the
  other would count $0); ``llm.max_cost_usd`` set while a model the config calls has no price in
  ``llm.prices`` — its calls would count as $0 and the cap could never stop them.

The comparability of two runs' judges is not decided here: it is the model the endpoint *served*
(``rageval.metrics.judge.judge_identity``), which tells two dated snapshots apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MSG_SAME_MODEL = ("{path}{where}: judge.model '{j}' and generation.model '{g}' are the same model ({m}: case, provider "
                  "prefix, tags and snapshot suffixes aside). A model grading its own answers favours them; use a "
                  "different judge.model, or set judge.allow_same_model: true.")
MSG_UNPRICED = ("{path}{where}: llm.max_cost_usd is set, but {key} '{m}' has no price in llm.prices, so its calls "
                "would count as $0 and the cap could never stop them. Add `llm: {{prices: {{{m}: {{prompt: …, "
                "completion: …}}}}}}` (USD per 1M tokens), or remove llm.max_cost_usd.")
MSG_HALF_PRICED = ("{path}{where}: llm.prices.{m} gives no '{side}' price, so that side of every call would count as "
                   "$0. Give {need} (USD per 1M tokens), e.g. `{m}: {{prompt: 0.15, completion: 0.60}}`.")
MSG_PRICE_PROBLEM = "{path}{where}: {key}: {problem}"
MSG_AMBIGUOUS_PRICE = ("model '{model}' matches several llm.prices keys with different prices ({keys}); price it by "
                       "its own name in llm.prices.")

#: provider prefixes written with a colon (LiteLLM, gateways); a colon otherwise starts an Ollama tag
PROVIDERS = frozenset({"openai", "azure", "azure_ai", "anthropic", "google", "gemini", "vertex_ai", "vertex", "ollama",
                       "ollama_chat", "groq", "together", "together_ai", "mistral", "bedrock", "openrouter",
                       "deepseek", "fireworks", "fireworks_ai", "huggingface", "hf", "cohere", "perplexity", "xai",
                       "lm_studio", "vllm", "hosted_vllm"})
_SNAPSHOT = re.compile(r"(?:-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|\d{3})|-latest)$")
_SIZE = re.compile(r"\d+(?:\.\d+)?[bmk]\b")


def model_key(name: str) -> str:
    """The model a name denotes (see the module docstring)."""
    key = name.strip().casefold().rsplit("/", 1)[-1]
    head, colon, tail = key.partition(":")
    if colon and head in PROVIDERS:
        key = tail
    key = key.split("@", 1)[0].removesuffix(":latest")
    family, colon, tag = key.partition(":")
    family = _SNAPSHOT.sub("", family)
    size = _SIZE.match(tag) if colon else None
    return f"{family}:{size.group(0)}" if size else family


def same_model(a: str, b: str) -> bool:
    """Whether two names may denote one model (the judge ≠ generator rule; see the module docstring)."""
    ka, kb = model_key(a), model_key(b)
    if ka == kb:
        return True
    (fa, _, sa), (fb, _, sb) = ka.partition(":"), kb.partition(":")
    return fa == fb and not (sa and sb)


def price_for(model: str, prices: Mapping[str, Mapping[str, float]]) -> tuple[str, Mapping[str, float]] | None:
    """(the ``llm.prices`` key, its price) that prices ``model``: its own name, else the one key of
    the same :func:`model_key` (several keys with one price: the first by name). None when no key
    does; ValueError when several keys with different prices do."""
    if model in prices:
        return model, prices[model]
    key = model_key(model)
    found = sorted(k for k in prices if model_key(k) == key)
    if not found:
        return None
    if len({tuple(sorted(prices[k].items())) for k in found}) > 1:
        raise ValueError(MSG_AMBIGUOUS_PRICE.format(model=model, keys=", ".join(found)))
    return found[0], prices[found[0]]


def called_models(sections: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(config key, model name) of every model the config calls through ``llm``."""
    gen, emb, judge = sections["generation"], sections["embedding"], sections["judge"]
    return [(key, model) for key, model, used in (("generation.model", gen.model, gen.provider == "openai"),
                                                  ("embedding.model", emb.model, emb.provider == "openai"),
                                                  ("judge.model", judge.model, True)) if used and model]


def model_rules(name: str, section: Any, before: Mapping[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """The problems of section ``name`` (``judge`` or ``llm``) given the sections read before it,
    as (dotted key, message template, its values) for ``rageval.config``'s reader to raise."""
    if name == "judge":
        generator = before["generation"].model
        if section.model and generator and same_model(section.model, generator) and not section.allow_same_model:
            return [("judge.model", MSG_SAME_MODEL, {"j": section.model, "g": generator, "m": model_key(section.model)})]
    if name != "llm":
        return []
    called = called_models({**before, "llm": section})
    chat = {m for key, m in called if key != "embedding.model"}
    problems = []
    for key, model in called:
        try:
            price_for(model, section.prices)
        except ValueError as exc:
            problems.append(("llm.prices", MSG_PRICE_PROBLEM, {"key": key, "problem": str(exc)}))
    for model, price in section.prices.items():
        needed = ("prompt", "completion") if any(_priced_by(m, model, section.prices) for m in chat) else ("prompt",)
        for side in needed:
            if side not in price:
                need = "both 'prompt' and 'completion'" if len(needed) == 2 else "a 'prompt' price"
                problems.append((f"llm.prices.{model}", MSG_HALF_PRICED, {"m": model, "side": side, "need": need}))
    if section.max_cost_usd is not None:
        problems += [("llm.max_cost_usd", MSG_UNPRICED, {"key": key, "m": model})
                     for key, model in called if _price_or_none(model, section.prices) is None]
    return problems


def _price_or_none(model: str, prices: Mapping[str, Mapping[str, float]]) -> tuple[str, Mapping[str, float]] | None:
    try:
        return price_for(model, prices)
    except ValueError:
        return None


def _priced_by(model: str, key: str, prices: Mapping[str, Mapping[str, float]]) -> bool:
    found = _price_or_none(model, prices)
    return found is not None and found[0] == key

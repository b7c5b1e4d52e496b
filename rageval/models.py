"""Which model a name denotes, and the rules between the models a config calls.

* :func:`model_key` — ``GPT-4o-mini``, ``gpt-4o-mini-2024-07-18`` and ``openai/gpt-4o-mini`` are
  all ``gpt-4o-mini``: case folded, a provider prefix and a ``:latest`` tag dropped, a release
  date suffix removed. The judge ≠ generator rule and judge comparability
  (``rageval.metrics.judge.judge_signature``) compare these keys.
* :func:`model_rules` — the problems ``rageval.config`` reports when a section is read: the judge
  is the generator (unless ``judge.allow_same_model``), or ``llm.max_cost_usd`` is set while a
  model the config calls has no price in ``llm.prices`` — its calls would count as $0 and the cap
  could never stop them, so it is refused at ``validate`` time rather than left uncapped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MSG_SAME_MODEL = ("{path}{where}: judge.model '{j}' and generation.model '{g}' are the same model ({m}: case, provider "
                  "prefix and date suffix aside). A model grading its own answers favours them; use a different "
                  "judge.model, or set judge.allow_same_model: true.")
MSG_UNPRICED = ("{path}{where}: llm.max_cost_usd is set, but {key} '{m}' has no price in llm.prices, so its calls "
                "would count as $0 and the cap could never stop them. Add `llm: {{prices: {{{m}: {{prompt: …, "
                "completion: …}}}}}}` (USD per 1M tokens), or remove llm.max_cost_usd.")

_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def model_key(name: str) -> str:
    """The model a name denotes (see the module docstring)."""
    key = name.strip().casefold().rsplit("/", 1)[-1].removesuffix(":latest")
    return _DATE_SUFFIX.sub("", key)


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
        if section.model and generator and model_key(section.model) == model_key(generator) \
                and not section.allow_same_model:
            return [("judge.model", MSG_SAME_MODEL, {"j": section.model, "g": generator, "m": model_key(section.model)})]
    if name == "llm" and section.max_cost_usd is not None:
        return [("llm.max_cost_usd", MSG_UNPRICED, {"key": key, "m": model})
                for key, model in called_models({**before, "llm": section}) if model not in section.prices]
    return []

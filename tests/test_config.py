import re

import pytest

from rageval.config import load_config
from rageval.errors import ConfigError

BASE = "golden: g.yaml\ncorpus: docs/*.md\n"


def write(tmp_path, text):
    p = tmp_path / "rageval.yml"
    p.write_text(BASE + text, encoding="utf-8")
    return p


@pytest.mark.parametrize("text, message", [
    ("gaet: {}\n", r"line 3: unknown key 'gaet' \(did you mean 'gate'\?\)"),
    ("gate: {flors: {hit@3: 0.9}}\n", r"unknown key 'gate.flors' \(did you mean 'floors'\?\)"),
    ("gate: {floors: {hti@3: 0.9}}\n", r"unknown metric 'hti@3'; valid metrics are: hit@K"),
    ("gate: {floors: {hit@3: high}}\n", r"'gate.floors.hit@3' must be a number"),
    ("gate: {zero_tolerance: [money]}\n", r"'gate.zero_tolerance' must be one of numbers"),
    ("gate: {missing_baseline: ignore}\n", r"must be one of floors_only, fail"),
    ("gate: {slices: {injection: {floors: {pass_rate: 0.9}}}}\n", r"must look like \"type=injection\""),
    ("chunking: {size: 0}\n", r"'chunking.size' must be an integer ≥ 1"),
    ("chunking: {size: 100, overlap: 100}\n", r"overlap \(100\) must be smaller than chunking.size"),
    ("retrieval: {top_k: 3, k: [1, 5]}\n", r"cut-off of 5 but retrieval.top_k is 3"),
    ("embedding: {provider: bert}\n", r"'embedding.provider' must be one of local, openai, e5"),
    ("embedding: {provider: openai}\n", r"missing required key 'embedding.model'"),
    ("app: {type: replay}\n", r"app.type is replay, so it needs 'app.path'"),
    ("generation: {provider: openai, model: m, prompt: p.j2}\n", r"template .*p.j2 not found"),
    ("generation: {provider: openai, model: gpt-x, prompt: rageval.yml}\njudge: {model: gpt-x}\n",
     r"judge.model 'gpt-x' and generation.model 'gpt-x' are the same model \(gpt-x\b"),
    ("generation: {provider: openai, model: gpt-4o-mini, prompt: rageval.yml}\njudge: {model: openai/GPT-4o-mini-2024-07-18}\n",
     r"judge.model 'openai/GPT-4o-mini-2024-07-18' and generation.model 'gpt-4o-mini' are the same model \(gpt-4o-mini:"),
    ("judge: {faithfulness: true}\n", r"judge.faithfulness needs judge.model"),
    ("judge: {model: j, faithfulness_calls: both}\n", r"'judge.faithfulness_calls' must be one of judge, separate"),
    ("judge: {model: gpt-4.1}\nllm: {max_cost_usd: 0.001, prices: {gpt-4o: {prompt: 2.5}}}\n",
     r"line 4: llm.max_cost_usd is set, but judge.model 'gpt-4.1' has no price in llm.prices, .*"
     r"Add `llm: \{prices: \{gpt-4.1: \{prompt: …, completion: …\}\}\}` \(USD per 1M tokens\), or remove llm.max_cost_usd"),
    ("checks: {units: [furlongs]}\n", r"checks.units"),
    ("llm: {prices: {m: {input: 1}}}\n", r"unknown key 'llm.prices.m.input'"),
])
def test_config_errors_name_the_key_and_the_fix(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(write(tmp_path, text))
    assert "rageval.yml" in str(info.value)


def test_missing_required_key(tmp_path):
    p = tmp_path / "rageval.yml"
    p.write_text("corpus: docs/*.md\n")
    with pytest.raises(ConfigError, match=r"missing required key 'golden'"):
        load_config(p)


def test_paths_are_relative_to_the_config_file(tmp_path):
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "rageval.yml").write_text(BASE)
    cfg = load_config(sub / "rageval.yml")
    assert cfg.golden == (sub / "g.yaml").resolve()
    assert cfg.root == sub.resolve()


def test_same_model_allowed_explicitly(tmp_path):
    (tmp_path / "p.j2").write_text("{{ question }}")
    cfg = load_config(write(tmp_path, "generation: {provider: openai, model: m, prompt: p.j2}\n"
                                      "judge: {model: m, allow_same_model: true}\n"))
    assert cfg.judge.model == cfg.generation.model == "m"


def test_defaults_and_fingerprint_stability(tmp_path):
    a = load_config(write(tmp_path, ""))
    assert a.retrieval.k == (1, 3, 5) and a.chunking.size == 200 and a.embedding.provider == "local"
    assert a.metric_names()[:3] == ["hit@1", "hit@3", "hit@5"]
    b = load_config(write(tmp_path, "chunking: {size: 200}\n"))
    assert a.fingerprint() == b.fingerprint()
    c = load_config(write(tmp_path, "chunking: {size: 800}\n"))
    assert c.fingerprint() != a.fingerprint()
    assert c.to_dict()["chunking"]["size"] == 800


def test_resolved_config_never_holds_the_api_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SENTINEL-config")
    cfg = load_config(write(tmp_path, "llm: {api_key_env: OPENAI_API_KEY}\n"))
    assert "sk-SENTINEL-config" not in repr(cfg.to_dict())
    assert cfg.to_dict()["llm"]["api_key_env"] == "OPENAI_API_KEY"


def test_literal_header_values_never_reach_results(tmp_path):
    cfg = load_config(write(tmp_path, 'app: {type: http, url: "http://127.0.0.1:1/a", '
                                      'headers: {Authorization: "Bearer ${TOK}", X-Key: literal-secret}}\n'))
    headers = cfg.to_dict()["app"]["headers"]
    assert headers == {"Authorization": "Bearer ${TOK}", "X-Key": "***"}


def test_a_project_folder_is_accepted_where_a_config_file_is(run_cli, tmp_path):
    from conftest import ROOT
    code, out, err = run_cli("validate", ROOT / "examples" / "banhang", "--no-git")
    assert code == 0, err
    assert out.startswith("ok: rageval.yml: golden set banhang-returns v4 (123 cases)")
    code, _, err = run_cli("run", tmp_path)
    assert code == 2 and f"{tmp_path / 'rageval.yml'}: config file not found" in err


# --- defaults written once; numbers finite and in range ------------------------------------------

def test_defaults_come_from_the_dataclasses(tmp_path):
    from dataclasses import replace

    from rageval.settings import (
        AppConfig,
        ChecksConfig,
        ChunkingConfig,
        EmbeddingConfig,
        GateConfig,
        GenerationConfig,
        GoldenChecksConfig,
        JudgeConfig,
        LLMConfig,
        ReportConfig,
        RetrievalConfig,
    )
    cfg = load_config(write(tmp_path, ""))
    assert (cfg.app, cfg.chunking, cfg.embedding, cfg.retrieval, cfg.generation, cfg.judge, cfg.gate, cfg.checks,
            cfg.golden_checks, cfg.report) == (AppConfig(), ChunkingConfig(), EmbeddingConfig(), RetrievalConfig(),
                                               GenerationConfig(), JudgeConfig(), GateConfig(), ChecksConfig(),
                                               GoldenChecksConfig(), ReportConfig())
    # the three defaults that depend on something else
    assert cfg.llm == replace(LLMConfig(), cache_dir=tmp_path / ".rageval-cache")
    assert load_config(write(tmp_path, "retrieval: {k: [1, 10]}\n")).retrieval.top_k == 10
    assert load_config(write(tmp_path, "embedding: {provider: e5}\n")).embedding.model == "multilingual-e5-small"


def _number_keys():
    """Every float key of rageval.yml, as (dotted key, YAML that sets it to VALUE)."""
    from dataclasses import fields

    from rageval.config import _SECTIONS
    keys = [(f"{name}.{f.name}", f"{name}: {{{f.name}: VALUE}}\n")
            for name, cls in _SECTIONS.items() for f in fields(cls) if f.metadata["kind"] in ("nonneg", "positive", "rate", "level")]
    keys += [("gate.rerun.margin", "gate: {rerun: {margin: VALUE}}\n"),
             ("gate.floors.pass_rate", "gate: {floors: {pass_rate: VALUE}}\n"),
             ("gate.floors.context_tokens", "gate: {floors: {context_tokens: VALUE}}\n"),
             ("gate.max_drop.mrr@5", "gate: {max_drop: {mrr@5: VALUE}}\n"),
             ("gate.slices.type=a.floors.hit@3", "gate: {slices: {type=a: {floors: {hit@3: VALUE}}}}\n"),
             ("llm.prices.m.prompt", "llm: {prices: {m: {prompt: VALUE}}}\n")]
    return keys


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "1" + "0" * 400])
@pytest.mark.parametrize("key, text", _number_keys(), ids=[k for k, _ in _number_keys()])
def test_every_number_must_be_finite(tmp_path, key, text, value):
    with pytest.raises(ConfigError, match=rf"rageval.yml: line 3: '{re.escape(key)}' must be a finite number"):
        load_config(write(tmp_path, text.replace("VALUE", value)))


def test_the_float_keys_are_all_covered():
    assert {k for k, _ in _number_keys()} >= {
        "app.timeout_s", "generation.temperature", "judge.min_agreement", "llm.timeout_s", "llm.max_cost_usd",
        "gate.noise_k", "gate.significance", "golden_checks.leak_overlap"}


@pytest.mark.parametrize("text, message", [
    ("gate: {floors: {pass_rate: 1.1}}\n", r"'gate.floors.pass_rate' must be a number between 0 and 1, got 1.1"),
    ("gate: {floors: {hit@3: -0.1}}\n", r"'gate.floors.hit@3' must be a number between 0 and 1"),
    ("gate: {max_drop: {judge_pass: 2}}\n", r"'gate.max_drop.judge_pass' must be a number between 0 and 1"),
    ("gate: {floors: {context_tokens: -5}}\n", r"'gate.floors.context_tokens' must be a number ≥ 0"),
    ("gate: {slices: {type=a: {floors: {recall@600tok: 1.5}}}}\n", r"'gate.slices.type=a.floors.recall@600tok' must be"),
    ("embedding: {dim: 100000000000}\n", r"'embedding.dim' must be an integer from 16 to 1048576, got 100000000000"),
    ("embedding: {dim: 8}\n", r"'embedding.dim' must be an integer from 16 to 1048576"),
    ("retrieval: {k: []}\n", r"'retrieval.k' must be a non-empty list of integers ≥ 1"),
    ("app: {type: command, command: \"python 'app.py\"}\n", r"line 3: app.command: cannot split .* \(No closing quotation\)"),
    ("app: {type: http, url: not a url}\n", r"line 3: 'app.url' must be an http\(s\) URL with a host, .*got 'not a url'"),
    ("app: {type: http, url: 'file:///etc/passwd'}\n", r"'app.url' must be an http\(s\) URL"),
    ("app: {type: http, url: 'http://:80/x'}\n", r"'app.url' must be an http\(s\) URL"),
    ("app: {type: http, url: 'http://h:99999/x'}\n", r"'app.url' must be an http\(s\) URL"),
    ("llm: {base_url: 'localhost:8000/v1'}\n", r"'llm.base_url' must be an http\(s\) URL"),
    ("report: {title: " + "x" * 300 + ", max_cases: " + "x" * 300 + "}\n", r"got 'x{78}…\.$"),
])
def test_numbers_in_range_and_values_that_would_crash_later(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message) as info:
        load_config(write(tmp_path, text))
    assert str(info.value).startswith(str(tmp_path / "rageval.yml"))


def test_in_range_values_load(tmp_path):
    cfg = load_config(write(tmp_path, "gate: {floors: {context_tokens: 900, pass_rate: 1}, max_drop: {context_tokens: 50}}\n"
                                      "embedding: {dim: 1048576}\n"
                                      "app: {type: http, url: 'https://[::1]:8443/answer'}\n"))
    assert cfg.gate.floors == {"context_tokens": 900.0, "pass_rate": 1.0} and cfg.embedding.dim == 2**20
    cmd = load_config(write(tmp_path, "app: {type: command, command: \"python 'my app.py'\"}\n"))
    assert cmd.app.command == ("python", "my app.py")


def test_a_key_given_twice_is_an_error_not_the_last_one_winning(tmp_path, run_cli):
    path = write(tmp_path, "gate: {floors: {pass_rate: 1.1}}\ngate: {}\n")
    code, _, err = run_cli("validate", "--config", path, "--no-git")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"ERROR {path}: line 4: key 'gate' appears twice (lines 3 and 4)" in err


@pytest.mark.parametrize("text, message", [
    ("llm: {concurrency: 0}\n", r"'llm.concurrency' must be an integer ≥ 1, got 0"),
    ("llm: {max_retries: -1}\n", r"'llm.max_retries' must be an integer ≥ 0, got -1"),
    ("llm: {timeout_s: 0}\n", r"'llm.timeout_s' must be a number > 0, got 0"),
    ("app: {timeout_s: 0}\n", r"'app.timeout_s' must be a number > 0, got 0"),
    ("gate: {errors: skip}\n", r"'gate.errors' must be one of fail, ignore"),
    ("gate: {significance: 5.0}\n", r"'gate.significance' must be a number strictly between 0 and 1"),
    ("gate: {significance: 0}\n", r"'gate.significance' must be a number strictly between 0 and 1 \(e.g. 0.05\), got 0"),
    ("gate: {significance: 1.0}\n", r"'gate.significance' must be a number strictly between 0 and 1"),
    ("gate: {not_comparable: block}\n", r"'gate.not_comparable' must be one of pass, fail"),
    ("gate: {min_common_cases: 0}\n", r"'gate.min_common_cases' must be an integer ≥ 1"),
])
def test_settings_the_model_client_and_the_gate_rely_on_are_checked_when_the_config_loads(tmp_path, text, message):
    path = tmp_path / "rageval.yml"
    path.write_text("golden: g.yaml\ncorpus: docs\n" + text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_judge_defaults_and_a_priced_judge_under_a_budget(tmp_path):
    cfg = load_config(write(tmp_path, "judge: {model: gpt-4.1, faithfulness: true}\n"
                                      "llm: {max_cost_usd: 1, prices: {gpt-4.1: {prompt: 2, completion: 8}}}\n"))
    assert (cfg.judge.always, cfg.judge.faithfulness_calls) == (False, "judge")
    cfg = load_config(write(tmp_path, "judge: {model: j, always: true, faithfulness_calls: separate}\n"))
    assert (cfg.judge.always, cfg.judge.faithfulness_calls) == (True, "separate")

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


def test_judge_defaults_and_the_evaluator_identity_in_the_resolved_config(tmp_path):
    from rageval.metrics.judge import JUDGE_PROMPT_VERSION
    cfg = load_config(write(tmp_path, "judge: {model: gpt-4.1, faithfulness: true}\n"
                                      "llm: {max_cost_usd: 1, prices: {gpt-4.1: {prompt: 2, completion: 8}}}\n"))
    assert (cfg.judge.always, cfg.judge.faithfulness_calls) == (False, "judge")
    judge = cfg.to_dict()["judge"]
    assert judge["prompt_version"] == JUDGE_PROMPT_VERSION and judge["temperature"] == 0.0
    assert load_config(write(tmp_path, "judge: {model: j, always: true, faithfulness_calls: separate}\n")).judge.always

"""rageval.yml: load, validate, resolve into typed, immutable records.

Every error names the file, the key (dotted path) and the line where PyYAML can tell, says what
was wrong and how to fix it. Unknown keys are errors — a mistyped ``gate:`` must never silently
disable the gate — with "did you mean …". Paths are resolved relative to the config file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rageval.errors import ConfigError, did_you_mean
from rageval.metrics.base import parse_metric

DEFAULT_CONFIG = "rageval.yml"


@dataclass(frozen=True)
class AppConfig:
    type: str = "builtin"                 # builtin | replay | command | http
    path: Path | None = None              # replay: JSONL of traces
    command: tuple[str, ...] | None = None  # command: argv, JSON lines on stdin/stdout
    url: str | None = None                # http: POST each case here
    timeout_s: float = 60.0
    concurrency: int = 4
    headers: dict[str, str] = field(default_factory=dict)  # http: extra headers; values may be ${ENV}


@dataclass(frozen=True)
class ChunkingConfig:
    size: int = 200                       # tokens per chunk (rageval.text tokenizer)
    overlap: int = 0                      # tokens shared by consecutive chunks of a document


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str = "local"               # local | openai | e5
    model: str = "hashed-ngrams-v1"
    dim: int = 2048                       # local only: hashed feature dimension
    batch_size: int = 64                  # openai only


@dataclass(frozen=True)
class RetrievalConfig:
    top_k: int = 5
    k: tuple[int, ...] = (1, 3, 5)
    token_budgets: tuple[int, ...] = ()


@dataclass(frozen=True)
class GenerationConfig:
    provider: str = "extractive"          # extractive | openai | none
    model: str | None = None
    prompt: Path | None = None            # jinja2 template; required for openai
    temperature: float = 0.0
    max_tokens: int = 400
    max_sentences: int = 2                # extractive only
    seed: int | None = None


@dataclass(frozen=True)
class JudgeConfig:
    model: str | None = None              # None: judge and faithfulness report "skipped"
    allow_same_model: bool = False
    faithfulness: bool = False            # also score claims against context and expected sections
    min_agreement: float | None = None    # refuse to gate on judge_pass below this measured agreement
    agreement_file: Path | None = None    # output of `rageval judge-agreement --out`


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = None           # default: $OPENAI_BASE_URL, else the openai client's default
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 4
    cache_dir: Path | None = None         # default .rageval-cache/ beside the config
    max_cost_usd: float | None = None
    prices: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> {prompt, completion} USD per 1M tokens


@dataclass(frozen=True)
class SliceGate:
    floors: dict[str, float] = field(default_factory=dict)
    max_drop: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class RerunConfig:
    margin: float = 0.02
    times: int = 1


@dataclass(frozen=True)
class GateConfig:
    floors: dict[str, float] = field(default_factory=dict)      # metric -> minimum value
    max_drop: dict[str, float] = field(default_factory=dict)    # metric -> allowed drop vs baseline
    noise_k: float = 2.0
    zero_tolerance: tuple[str, ...] = ()                        # subset of ("numbers",)
    slices: dict[str, SliceGate] = field(default_factory=dict)  # "type=injection" -> gates
    rerun: RerunConfig = field(default_factory=RerunConfig)
    missing_baseline: str = "floors_only"                       # floors_only | fail
    errors: str = "fail"                                        # fail | ignore: cases whose App call errored
    significance: float | None = None                           # block drops only when p < this
    min_slice_cases: int = 3                                     # fewer in a gated slice -> insufficient_data


@dataclass(frozen=True)
class ChecksConfig:
    units: tuple[str, ...] | None = None          # None: the built-in Vietnamese + English units
    refusal_markers: tuple[str, ...] | None = None  # None: built-in phrases that mean "the documents do not say"


@dataclass(frozen=True)
class GoldenChecksConfig:
    leaks: str = "warn"                   # warn | fail | off: golden questions found in prompt, few-shot or corpus
    leak_overlap: float = 0.8             # share of a question's word 3-grams found in one place to call it a leak
    leak_files: tuple[Path, ...] = ()     # more places examples live (few-shot files, system prompts)
    policy_drift: str = "block"           # block | warn | off: a source section's numbers changed, a case did not
    min_cases_per_section: int = 2        # coverage: sections with fewer cases are listed


@dataclass(frozen=True)
class ReportConfig:
    max_cases: int = 25                   # pass→fail cases shown in full before "…and N more"
    title: str = "RAG eval gate"


@dataclass(frozen=True)
class Config:
    path: Path                            # the config file itself
    golden: Path
    corpus: str                           # path or glob, resolved against the config's folder
    app: AppConfig = field(default_factory=AppConfig)
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    golden_checks: GoldenChecksConfig = field(default_factory=GoldenChecksConfig)
    report: ReportConfig = field(default_factory=ReportConfig)

    @property
    def root(self) -> Path:
        return self.path.parent

    def metric_names(self) -> list[str]:
        """The retrieval metric set this config produces, in report order."""
        names = [f"{fam}@{k}" for fam in ("hit", "recall", "mrr", "ndcg") for k in self.retrieval.k]
        names += [f"{fam}@{b}tok" for fam in ("hit", "recall", "mrr", "ndcg") for b in self.retrieval.token_budgets]
        return names

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain JSON: paths relative to the config folder, no secrets
        (only the *name* of the API key variable is ever stored)."""
        data = _plain(asdict(self), self.root)
        data["app"]["headers"] = {k: _header_for_results(v) for k, v in data["app"]["headers"].items()}
        return data

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()


#: ``${NAME}``: an environment variable resolved at call time (http app headers).
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _header_for_results(value: str) -> str:
    """Header values may carry tokens: keep ``${ENV}`` references (with an optional Bearer
    scheme), hide any literal value."""
    literal = ENV_REF.sub("", value)
    return value if ENV_REF.search(value) and not literal.replace("Bearer", "").strip(" :") else "***"


def _plain(value: Any, root: Path) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v, root) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, root) for v in value]
    if isinstance(value, Path):
        try:
            return value.relative_to(root).as_posix()
        except ValueError:
            return value.as_posix()
    return value


# --- loading -------------------------------------------------------------------------------

PROVIDERS = {
    "app.type": ("builtin", "replay", "command", "http"),
    "embedding.provider": ("local", "openai", "e5"),
    "generation.provider": ("extractive", "openai", "none"),
    "gate.missing_baseline": ("floors_only", "fail"),
    "gate.errors": ("fail", "ignore"),
    "golden_checks.leaks": ("warn", "fail", "off"),
    "golden_checks.policy_drift": ("block", "warn", "off"),
}
ZERO_TOLERANCE_RULES = ("numbers",)

_SECTIONS: dict[str, type] = {
    "app": AppConfig, "chunking": ChunkingConfig, "embedding": EmbeddingConfig,
    "retrieval": RetrievalConfig, "generation": GenerationConfig, "judge": JudgeConfig,
    "llm": LLMConfig, "gate": GateConfig, "checks": ChecksConfig, "golden_checks": GoldenChecksConfig,
    "report": ReportConfig,
}
TOP_LEVEL_KEYS = ("golden", "corpus", *_SECTIONS)

MSG_NOT_FOUND = "{path}: config file not found. Create it (see examples/banhang/rageval.yml) or pass --config."
MSG_YAML = "{path}: line {line}: not valid YAML: {problem}. Fix the syntax at that line."
MSG_UNKNOWN_KEY = "{path}{where}: unknown key '{key}'{hint}. Valid keys here: {valid}."
MSG_TYPE = "{path}{where}: '{key}' must be {expected}, got {got!r}."
MSG_CHOICE = "{path}{where}: '{key}' must be one of {choices}, got {got!r}."
MSG_REQUIRED = "{path}: missing required key '{key}'. Add e.g. `{example}`."


def parse_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """Parse YAML once (safe loader): the data, and the node tree that knows every line number
    (for error messages). Raises yaml.YAMLError like yaml.safe_load."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


class _Located:
    """Line numbers of every mapping key in a YAML document, by dotted path."""

    def __init__(self, node: yaml.Node | None) -> None:
        self.lines: dict[str, int] = {}
        self._walk(node, "")

    def _walk(self, node: Any, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                self.lines[key] = key_node.start_mark.line + 1
                self._walk(value_node, key)

    def where(self, dotted: str) -> str:
        line = self.lines.get(dotted)
        return f": line {line}" if line else ""


class _Reader:
    def __init__(self, path: Path, located: _Located) -> None:
        self.path = path
        self.located = located

    def fail(self, template: str, dotted: str, **kw: Any) -> ConfigError:
        return ConfigError(template.format(path=self.path, where=self.located.where(dotted), **kw))

    def mapping(self, value: Any, dotted: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a mapping (key: value lines)", got=value)
        return value

    def check_keys(self, data: dict[str, Any], valid: tuple[str, ...] | list[str], prefix: str) -> None:
        for key in data:
            if key not in valid:
                dotted = f"{prefix}.{key}" if prefix else str(key)
                raise self.fail(MSG_UNKNOWN_KEY, dotted, key=dotted, hint=did_you_mean(str(key), valid),
                                valid=", ".join(valid))

    def typed(self, value: Any, dotted: str, kind: str) -> Any:
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "posint": isinstance(value, int) and not isinstance(value, bool) and value >= 1,
            "nonnegint": isinstance(value, int) and not isinstance(value, bool) and value >= 0,
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "nonneg": isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0,
            "rate": isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1,
            "str": isinstance(value, str) and value != "",
            "optstr": value is None or (isinstance(value, str) and value != ""),
            "bool": isinstance(value, bool),
        }[kind]
        if not ok:
            expected = {"int": "an integer", "posint": "an integer ≥ 1", "nonnegint": "an integer ≥ 0",
                        "number": "a number", "nonneg": "a number ≥ 0", "rate": "a number between 0 and 1",
                        "str": "a non-empty string", "optstr": "a string or null", "bool": "true or false"}[kind]
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected=expected, got=value)
        return value

    def choice(self, value: Any, dotted: str) -> str:
        choices = PROVIDERS[dotted]
        if value not in choices:
            raise self.fail(MSG_CHOICE, dotted, key=dotted, choices=", ".join(choices), got=value)
        return value

    def int_list(self, value: Any, dotted: str) -> tuple[int, ...]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a list of integers ≥ 1, e.g. [1, 3, 5]", got=value)
        return tuple(sorted(set(value)))

    def str_list(self, value: Any, dotted: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a list of strings", got=value)
        return tuple(value)

    def metric_map(self, value: Any, dotted: str, kind: str = "number") -> dict[str, float]:
        data = self.mapping(value, dotted)
        out: dict[str, float] = {}
        for name, threshold in data.items():
            try:
                parse_metric(str(name))
            except ValueError as exc:
                raise self.fail("{path}{where}: " + str(exc).replace("{", "{{").replace("}", "}}")
                                + f" (in '{dotted}').", f"{dotted}.{name}") from None
            out[str(name)] = float(self.typed(threshold, f"{dotted}.{name}", kind))
        return out

    def relpath(self, value: Any, dotted: str) -> Path:
        self.typed(value, dotted, "str")
        return (self.path.parent / value).resolve()


def load_config(path: str | os.PathLike[str] = DEFAULT_CONFIG) -> Config:
    """Read and validate a rageval.yml. Raises ConfigError naming the file, key and line."""
    path = Path(path)
    if path.is_dir():
        path = path / DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(MSG_NOT_FOUND.format(path=path))
    text = path.read_text(encoding="utf-8")
    try:
        raw, node = parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else "?"
        raise ConfigError(MSG_YAML.format(path=path, line=line, problem=getattr(exc, "problem", exc))) from None
    return config_from_dict(raw, path.resolve(), located=_Located(node))


def config_from_dict(raw: Any, path: Path, *, located: _Located | None = None) -> Config:
    r = _Reader(path, located or _Located(None))
    data = r.mapping(raw, "(top level)")
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    for key, example in (("golden", "golden: golden.yaml"), ("corpus", "corpus: docs/*.md")):
        if key not in data:
            raise ConfigError(MSG_REQUIRED.format(path=path, key=key, example=example))
    golden = r.relpath(data["golden"], "golden")
    corpus = r.typed(data["corpus"], "corpus", "str")
    sec = {name: r.mapping(data.get(name), name) for name in _SECTIONS}
    for name, cls in _SECTIONS.items():
        r.check_keys(sec[name], [f.name for f in cls.__dataclass_fields__.values()], name)

    a = sec["app"]
    app = AppConfig(
        type=r.choice(a.get("type", "builtin"), "app.type"),
        path=r.relpath(a["path"], "app.path") if a.get("path") is not None else None,
        command=_command(r, a.get("command")),
        url=r.typed(a.get("url"), "app.url", "optstr"),
        timeout_s=float(r.typed(a.get("timeout_s", 60.0), "app.timeout_s", "nonneg")),
        concurrency=r.typed(a.get("concurrency", 4), "app.concurrency", "posint"),
        headers={str(k): str(v) for k, v in r.mapping(a.get("headers"), "app.headers").items()},
    )
    needs = {"replay": ("path", "app: {type: replay, path: traces.jsonl}"),
             "command": ("command", "app: {type: command, command: [python, my_app.py]}"),
             "http": ("url", "app: {type: http, url: http://127.0.0.1:8000/answer}")}
    if app.type in needs and getattr(app, needs[app.type][0]) is None:
        key, example = needs[app.type]
        raise ConfigError(MSG_REQUIRED.format(path=path, key=f"app.{key}", example=example)
                          .replace("missing required key", f"app.type is {app.type}, so it needs"))

    c = sec["chunking"]
    chunking = ChunkingConfig(size=r.typed(c.get("size", 200), "chunking.size", "posint"),
                              overlap=r.typed(c.get("overlap", 0), "chunking.overlap", "nonnegint"))
    if chunking.overlap >= chunking.size:
        raise r.fail("{path}{where}: chunking.overlap ({o}) must be smaller than chunking.size ({s}).",
                     "chunking.overlap", o=chunking.overlap, s=chunking.size)

    e = sec["embedding"]
    provider = r.choice(e.get("provider", "local"), "embedding.provider")
    default_model = {"local": "hashed-ngrams-v1", "e5": "multilingual-e5-small"}.get(provider)
    model = r.typed(e.get("model", default_model), "embedding.model", "optstr")
    if model is None:
        raise ConfigError(MSG_REQUIRED.format(path=path, key="embedding.model",
                                              example="embedding: {provider: openai, model: text-embedding-3-small}"))
    embedding = EmbeddingConfig(provider=provider, model=model,
                                dim=r.typed(e.get("dim", 2048), "embedding.dim", "posint"),
                                batch_size=r.typed(e.get("batch_size", 64), "embedding.batch_size", "posint"))

    rt = sec["retrieval"]
    ks = r.int_list(rt.get("k", [1, 3, 5]), "retrieval.k")
    top_k = r.typed(rt.get("top_k", max(ks)), "retrieval.top_k", "posint")
    if max(ks) > top_k:
        raise r.fail("{path}{where}: retrieval.k asks for a cut-off of {k} but retrieval.top_k is {t}; "
                     "raise top_k or drop that k.", "retrieval.k", k=max(ks), t=top_k)
    retrieval = RetrievalConfig(top_k=top_k, k=ks,
                                token_budgets=r.int_list(rt.get("token_budgets", []), "retrieval.token_budgets"))

    g = sec["generation"]
    generation = GenerationConfig(
        provider=r.choice(g.get("provider", "extractive"), "generation.provider"),
        model=r.typed(g.get("model"), "generation.model", "optstr"),
        prompt=r.relpath(g["prompt"], "generation.prompt") if g.get("prompt") is not None else None,
        temperature=float(r.typed(g.get("temperature", 0.0), "generation.temperature", "nonneg")),
        max_tokens=r.typed(g.get("max_tokens", 400), "generation.max_tokens", "posint"),
        max_sentences=r.typed(g.get("max_sentences", 2), "generation.max_sentences", "posint"),
        seed=r.typed(g.get("seed"), "generation.seed", "int") if g.get("seed") is not None else None,
    )
    if generation.provider == "openai":
        for key, example in (("model", "generation: {provider: openai, model: gpt-4o-mini, prompt: prompt.j2}"),
                             ("prompt", "generation: {provider: openai, model: gpt-4o-mini, prompt: prompt.j2}")):
            if getattr(generation, key) is None:
                raise ConfigError(MSG_REQUIRED.format(path=path, key=f"generation.{key}", example=example))
        if not generation.prompt.is_file():
            raise r.fail("{path}{where}: generation.prompt: template {p} not found (paths are relative to the config file).",
                         "generation.prompt", p=generation.prompt)

    j = sec["judge"]
    judge = JudgeConfig(
        model=r.typed(j.get("model"), "judge.model", "optstr"),
        allow_same_model=r.typed(j.get("allow_same_model", False), "judge.allow_same_model", "bool"),
        faithfulness=r.typed(j.get("faithfulness", False), "judge.faithfulness", "bool"),
        min_agreement=float(r.typed(j["min_agreement"], "judge.min_agreement", "rate")) if j.get("min_agreement") is not None else None,
        agreement_file=r.relpath(j["agreement_file"], "judge.agreement_file") if j.get("agreement_file") is not None else None,
    )
    if judge.model and generation.model and judge.model == generation.model and not judge.allow_same_model:
        raise r.fail("{path}{where}: judge.model and generation.model are both '{m}'. A model grading its own "
                     "answers favours them; use a different judge.model, or set judge.allow_same_model: true.",
                     "judge.model", m=judge.model)
    if judge.faithfulness and not judge.model:
        raise r.fail("{path}{where}: judge.faithfulness needs judge.model (the model that checks claims).",
                     "judge.faithfulness")

    lc = sec["llm"]
    prices: dict[str, dict[str, float]] = {}
    for model_name, price in r.mapping(lc.get("prices"), "llm.prices").items():
        pm = r.mapping(price, f"llm.prices.{model_name}")
        r.check_keys(pm, ("prompt", "completion"), f"llm.prices.{model_name}")
        prices[str(model_name)] = {k: float(r.typed(v, f"llm.prices.{model_name}.{k}", "nonneg")) for k, v in pm.items()}
    llm = LLMConfig(
        base_url=r.typed(lc.get("base_url"), "llm.base_url", "optstr"),
        api_key_env=r.typed(lc.get("api_key_env", "OPENAI_API_KEY"), "llm.api_key_env", "str"),
        concurrency=r.typed(lc.get("concurrency", 4), "llm.concurrency", "posint"),
        timeout_s=float(r.typed(lc.get("timeout_s", 60.0), "llm.timeout_s", "nonneg")),
        max_retries=r.typed(lc.get("max_retries", 4), "llm.max_retries", "nonnegint"),
        cache_dir=r.relpath(lc["cache_dir"], "llm.cache_dir") if lc.get("cache_dir") is not None else path.parent / ".rageval-cache",
        max_cost_usd=float(r.typed(lc["max_cost_usd"], "llm.max_cost_usd", "nonneg")) if lc.get("max_cost_usd") is not None else None,
        prices=prices,
    )
    if "api_key" in str(lc.get("base_url", "")):
        raise r.fail("{path}{where}: put the API key in an environment variable named by llm.api_key_env, not in the URL.",
                     "llm.base_url")

    gate = _gate(r, sec["gate"])

    ch = sec["checks"]
    checks = ChecksConfig(
        units=r.str_list(ch["units"], "checks.units") if ch.get("units") is not None else None,
        refusal_markers=r.str_list(ch["refusal_markers"], "checks.refusal_markers") if ch.get("refusal_markers") is not None else None,
    )
    from rageval.metrics.numbers import resolve_units
    from rageval.metrics.rules import validate_refusal_markers
    for key, check, value in (("checks.units", resolve_units, checks.units),
                              ("checks.refusal_markers", validate_refusal_markers, checks.refusal_markers)):
        if value is not None:
            try:
                check(value)
            except ValueError as exc:
                raise r.fail("{path}{where}: " + key + ": " + str(exc).replace("{", "{{").replace("}", "}}"), key) from None

    gc = sec["golden_checks"]
    golden_checks = GoldenChecksConfig(
        leaks=r.choice(_off(gc.get("leaks", "warn")), "golden_checks.leaks"),
        leak_overlap=float(r.typed(gc.get("leak_overlap", 0.8), "golden_checks.leak_overlap", "rate")),
        leak_files=tuple(r.relpath(f, "golden_checks.leak_files")
                         for f in r.str_list(gc.get("leak_files", []), "golden_checks.leak_files")),
        policy_drift=r.choice(_off(gc.get("policy_drift", "block")), "golden_checks.policy_drift"),
        min_cases_per_section=r.typed(gc.get("min_cases_per_section", 2), "golden_checks.min_cases_per_section",
                                      "nonnegint"),
    )
    for leak_file in golden_checks.leak_files:
        if not leak_file.is_file():
            raise r.fail("{path}{where}: golden_checks.leak_files: {p} not found (paths are relative to the config file).",
                         "golden_checks.leak_files", p=leak_file)

    rp = sec["report"]
    report = ReportConfig(max_cases=r.typed(rp.get("max_cases", 25), "report.max_cases", "posint"),
                          title=r.typed(rp.get("title", "RAG eval gate"), "report.title", "str"))

    return Config(path=path, golden=golden, corpus=corpus, app=app, chunking=chunking, embedding=embedding,
                  retrieval=retrieval, generation=generation, judge=judge, llm=llm, gate=gate, checks=checks,
                  golden_checks=golden_checks, report=report)


def _off(value: Any) -> Any:
    """YAML 1.1 reads an unquoted ``off`` as false; for a mode that means "off"."""
    return "off" if value is False else value


def _command(r: _Reader, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        import shlex
        value = shlex.split(value)
    return r.str_list(value, "app.command") or None


def _gate(r: _Reader, g: dict[str, Any]) -> GateConfig:
    slices: dict[str, SliceGate] = {}
    for key, spec in r.mapping(g.get("slices"), "gate.slices").items():
        dotted = f"gate.slices.{key}"
        if not isinstance(key, str) or "=" not in key:
            raise r.fail("{path}{where}: slice gate key {k!r} must look like \"type=injection\" (slice key=value).",
                         dotted, k=key)
        sm = r.mapping(spec, dotted)
        r.check_keys(sm, ("floors", "max_drop"), dotted)
        slices[key] = SliceGate(floors=r.metric_map(sm.get("floors"), f"{dotted}.floors"),
                                max_drop=r.metric_map(sm.get("max_drop"), f"{dotted}.max_drop", "nonneg"))
    rr = r.mapping(g.get("rerun"), "gate.rerun")
    r.check_keys(rr, ("margin", "times"), "gate.rerun")
    zt = r.str_list(g.get("zero_tolerance", []), "gate.zero_tolerance")
    for rule in zt:
        if rule not in ZERO_TOLERANCE_RULES:
            raise r.fail(MSG_CHOICE, "gate.zero_tolerance", key="gate.zero_tolerance",
                         choices=", ".join(ZERO_TOLERANCE_RULES), got=rule)
    return GateConfig(
        floors=r.metric_map(g.get("floors"), "gate.floors"),
        max_drop=r.metric_map(g.get("max_drop"), "gate.max_drop", "nonneg"),
        noise_k=float(r.typed(g.get("noise_k", 2.0), "gate.noise_k", "nonneg")),
        zero_tolerance=zt,
        slices=slices,
        rerun=RerunConfig(margin=float(r.typed(rr.get("margin", 0.02), "gate.rerun.margin", "nonneg")),
                          times=r.typed(rr.get("times", 1), "gate.rerun.times", "nonnegint")),
        missing_baseline=r.choice(g.get("missing_baseline", "floors_only"), "gate.missing_baseline"),
        errors=r.choice(g.get("errors", "fail"), "gate.errors"),
        significance=float(r.typed(g["significance"], "gate.significance", "rate")) if g.get("significance") is not None else None,
        min_slice_cases=r.typed(g.get("min_slice_cases", 3), "gate.min_slice_cases", "posint"),
    )

"""The settings of rageval.yml as typed, immutable records, each field declared once with its
default and the kind that checks a given value: ``setting(default, kind)``. ``rageval.config``
reads a file into these.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rageval.metrics.numbers import Unit, resolve_units
from rageval.metrics.registry import REGISTRY, retrieval_metric_names, zero_tolerance_names
from rageval.metrics.rules import validate_refusal_markers
from rageval.text import LANGUAGES, hide_password


def setting(default: Any = MISSING, kind: str = "", *, factory: Any = MISSING, **spec: Any) -> Any:
    """A config field: its one default, and the kind (plus options) the reader checks a given value by."""
    return field(default=default, default_factory=factory, metadata={"kind": kind, **spec})


@dataclass(frozen=True)
class AppConfig:
    type: str = setting("builtin", "choice", choices=("builtin", "replay", "command", "http"))
    path: Path | None = setting(None, "path")                # replay: JSONL of traces
    command: tuple[str, ...] | None = setting(None, "command")  # command: argv, JSON lines on stdin/stdout
    url: str | None = setting(None, "url")                   # http: POST each case here
    timeout_s: float = setting(60.0, "positive")                # per case: the whole request, not per read
    concurrency: int = setting(4, "posint")
    headers: dict[str, str] = setting(kind="headers", factory=dict)  # http: extra headers; values may be ${ENV}


@dataclass(frozen=True)
class ChunkingConfig:
    size: int = setting(200, "posint")                       # tokens per chunk (rageval.text tokenizer)
    overlap: int = setting(0, "nonnegint")                   # tokens shared by consecutive chunks of a document
    merge_sections: bool = setting(False, "bool")            # pack several sections into a chunk (else one per chunk)


@dataclass(frozen=True)
class EmbeddingConfig:
    provider: str = setting("local", "choice", choices=("local", "openai", "e5"))
    model: str = setting("hashed-ngrams-v1", "optstr")       # the local default; e5 and openai: _EMBEDDING_MODELS
    dim: int = setting(2048, "int", bounds=(16, 2**20))      # local only: hashed feature dimension
    batch_size: int = setting(64, "posint")                  # openai only


@dataclass(frozen=True)
class RetrievalConfig:
    top_k: int = setting(5, "posint")                        # when not given: the largest k
    k: tuple[int, ...] = setting((1, 3, 5), "ints", nonempty=True)
    token_budgets: tuple[int, ...] = setting((), "ints")
    mode: str = setting("dense", "choice", choices=("dense", "bm25", "hybrid"))  # hybrid: reciprocal-rank fusion
    relevance_min: int = setting(1, "posint")                # least grade hit/recall/mrr count (trec_eval -l)
    store_k: int = setting(20, "posint")                     # retrieved items kept per case in the RunResult
    bm25_words: str = setting("folded", "choice", choices=("folded", "exact", "both"))  # BM25's terms: see lexical.py


@dataclass(frozen=True)
class GenerationConfig:
    provider: str = setting("extractive", "choice", choices=("extractive", "openai", "none"))
    model: str | None = setting(None, "optstr")
    prompt: Path | None = setting(None, "path")              # jinja2 template; required for openai
    temperature: float = setting(0.0, "nonneg")
    max_tokens: int = setting(400, "posint")
    max_sentences: int = setting(2, "posint")                # extractive only
    seed: int | None = setting(None, "int")


@dataclass(frozen=True)
class JudgeConfig:
    model: str | None = setting(None, "optstr")              # None: judge and faithfulness report "skipped"
    allow_same_model: bool = setting(False, "bool")
    faithfulness: bool = setting(False, "bool")              # also score claims against context and expected sections
    faithfulness_calls: str = setting("judge", "choice", choices=("judge", "separate"))  # judge: in the judge's one call
    always: bool = setting(False, "bool")                    # judge cases that already fail a rule too
    min_agreement: float | None = setting(None, "rate")      # no gating on judge_pass below this measured agreement
    agreement_file: Path | None = setting(None, "path")      # output of `rageval judge-agreement --out`


@dataclass(frozen=True)
class LLMConfig:
    base_url: str | None = setting(None, "url")              # default: $OPENAI_BASE_URL, else the client's default
    api_key_env: str = setting("OPENAI_API_KEY", "str")
    concurrency: int = setting(4, "posint")
    timeout_s: float = setting(60.0, "positive")
    max_retries: int = setting(4, "nonnegint")
    cache_dir: Path | None = setting(None, "path")           # the reader's default: .rageval-cache/ beside the config
    max_cost_usd: float | None = setting(None, "nonneg")
    prices: dict[str, dict[str, float]] = setting(kind="prices", factory=dict)  # model -> {prompt, completion} $/1M


@dataclass(frozen=True)
class SliceGate:
    floors: dict[str, float] = setting(kind="metrics", factory=dict)
    max_drop: dict[str, float] = setting(kind="metrics", factory=dict)


@dataclass(frozen=True)
class RerunConfig:
    margin: float = setting(0.02, "nonneg")
    times: int = setting(1, "nonnegint")


@dataclass(frozen=True)
class GateConfig:
    floors: dict[str, float] = setting(kind="metrics", factory=dict)    # metric -> minimum value
    max_drop: dict[str, float] = setting(kind="metrics", factory=dict)  # metric -> allowed drop vs baseline
    noise_k: float = setting(2.0, "nonneg")
    zero_tolerance: tuple[str, ...] = setting((), "strs", choices=zero_tolerance_names)  # checks declared so
    slices: dict[str, SliceGate] = setting(kind="slices", factory=dict)  # "type=injection" -> gates
    rerun: RerunConfig = setting(kind="section", factory=RerunConfig)
    missing_baseline: str = setting("floors_only", "choice", choices=("floors_only", "fail"))
    errors: str = setting("fail", "choice", choices=("fail", "ignore"))  # for cases whose App call errored
    significance: float | None = setting(None, "level")                 # block drops only when p < this (0 < α < 1)
    min_slice_cases: int = setting(3, "posint")                          # fewer in a gated slice -> insufficient_data
    # a golden version change is compared on the cases it left unchanged; fewer than this many (or
    # than half of the PR's cases) and the run is not comparable
    min_common_cases: int = setting(10, "posint")
    # what cannot be compared (no usable golden snapshot of main's cases, another project's baseline) blocks,
    # unless main sets pass
    not_comparable: str = setting("fail", "choice", choices=("pass", "fail"))
    # a case failing a per-case rule (zero tolerance) on main too: report it (a ratchet) or block on it;
    # None: the mode's default (report for pull requests and merge queues, block for release verification)
    known_failures: str | None = setting(None, "choice", choices=("report", "block"))


@dataclass(frozen=True)
class ChecksConfig:
    # None: built-in vi + en units; a name restricts to it; {name, words} adds a unit
    units: tuple[str | Unit, ...] | None = setting(None, "units", check=resolve_units)
    # None: built-in phrases that mean "the documents do not say"
    refusal_markers: tuple[str, ...] | None = setting(None, "strs", check=validate_refusal_markers)


@dataclass(frozen=True)
class GoldenChecksConfig:
    # golden questions found in the prompt, leak_files or the corpus
    leaks: str = setting("warn", "choice", choices=("warn", "fail", "off"))
    leak_overlap: float = setting(0.8, "rate")               # share of a question's word 3-grams found in one place
    leak_files: tuple[Path, ...] = setting((), "paths")      # more places examples live (few-shot files, prompts)
    # a source section's numbers changed, a case expecting them did not
    policy_drift: str = setting("block", "choice", choices=("block", "warn", "off"))
    min_cases_per_section: int = setting(2, "nonnegint")     # coverage: sections with fewer cases are listed
    # an expected section no corpus file has: fail (the run stops) or skip (left out of the case's metrics, counted)
    missing_sections: str = setting("fail", "choice", choices=("fail", "skip"))


@dataclass(frozen=True)
class ReportConfig:
    max_cases: int = setting(25, "posint")                   # pass→fail cases shown in full before "…and N more"
    title: str = setting("RAG eval gate", "str")
    # main's trend: earlier baselines each baseline carries (0: none), drawn in the comment and the HTML
    history: int = setting(30, "nonnegint", bounds=(0, 1000))


@dataclass(frozen=True)
class AttributionConfig:
    # when a blocked PR's drop is attributed to the knobs it changed, by ablation runs
    run: str = setting("on_block", "choice", choices=("off", "on_block", "always"))
    max_knobs: int = setting(4, "posint", bounds=(1, 8))     # knobs past it are grouped; runs ≤ 2·max_knobs
    models: bool = setting(False, "bool")                    # also when model stages must be called


@dataclass(frozen=True)
class RunConfig:
    # `rageval run` exits 1 when more than this share of cases errored (the app crashed, a model failed):
    # a run that measured almost nothing is not a result
    max_error_rate: float = setting(0.5, "rate")


@dataclass(frozen=True)
class Config:
    path: Path                            # the config file itself
    golden: Path
    corpus: str                           # path or glob, resolved against the config's folder
    # the language answers are expected in: the offline generator's decline, how the report words things;
    # auto: detected from the corpus (rageval.text.detect_language)
    language: str = setting("auto", "choice", choices=("auto", *LANGUAGES))
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
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    run: RunConfig = field(default_factory=RunConfig)

    @property
    def root(self) -> Path:
        return self.path.parent

    def metric_names(self) -> list[str]:
        """The retrieval metric set this config produces, in report order (rageval.metrics.registry);
        the same name objects every call, so every case's metrics share their keys."""
        return list(_metric_names(self.retrieval.k, self.retrieval.token_budgets, tuple(REGISTRY.families)))

    def to_dict(self) -> dict[str, Any]:
        """The resolved config as plain JSON: paths relative to the config folder, no secrets
        (only the *name* of the API key variable is ever stored)."""
        data = _plain(asdict(self), self.root)
        data["app"]["headers"] = {k: _header_for_results(v) for k, v in data["app"]["headers"].items()}
        for section, key in (("app", "url"), ("llm", "base_url")):
            if data[section][key]:
                data[section][key] = hide_password(data[section][key])
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


@functools.lru_cache(maxsize=64)
def _metric_names(k: tuple[int, ...], token_budgets: tuple[int, ...], families: tuple[str, ...]) -> tuple[str, ...]:
    """``families``: the registry's retrieval families when asked (a family declared later is measured)."""
    return tuple(retrieval_metric_names(k, token_budgets))


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


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    """``{"chunking": {"size": 200}}`` -> ``{"chunking.size": 200}``; lists are leaf values."""
    out: dict[str, Any] = {}
    if isinstance(config, Mapping) and (config or not prefix):
        for key, value in config.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    else:
        out[prefix] = config
    return out


@functools.cache
def default_values() -> dict[str, Any]:
    """Every key's default as the resolved config JSON writes it (``chunking.size`` → 200,
    ``language`` → auto), so a key an older rageval did not write can be told from one a PR changed."""
    out: dict[str, Any] = {}
    for f in fields(Config):
        if f.default is not MISSING:
            out[f.name] = f.default
        if f.default_factory is MISSING:
            continue
        for key, value in _plain(asdict(f.default_factory()), Path(".")).items():
            out[f"{f.name}.{key}"] = value
    return out


def new_at_default(key: str, before: Any, after: Any) -> bool:
    """Whether a config-diff row (``key``: ``before`` → ``after``) is a key an older rageval did not
    write that is at its default now: no change a PR made."""
    defaults = default_values()
    return before is None and key in defaults and defaults[key] == after

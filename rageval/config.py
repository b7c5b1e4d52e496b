"""rageval.yml: load, validate, resolve into typed, immutable records (``rageval.settings``; import
the records from there).

Every error names the file, the key (dotted path) and the line where PyYAML can tell, says what
was wrong and how to fix it. Unknown keys are errors — a mistyped ``gate:`` must never silently
disable the gate — with "did you mean …". Paths are resolved relative to the config file.

Defaults are written once, on the dataclass fields (rageval/settings.py), with the kind that checks a given value:
``setting(default, kind)`` (``posint``, ``rate``, ``path``, ``metrics`` …). Every section is read
the same way — each key given, by its field's kind; the dataclass supplies the rest — and the rules
between keys (chunking.overlap < chunking.size, judge ≠ generator …) are explicit: ``_check_rules``.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from dataclasses import MISSING, Field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rageval import DEFAULT_CONFIG
from rageval.errors import ConfigError, did_you_mean
from rageval.metrics.numbers import Unit
from rageval.metrics.registry import is_rate, parse_metric, producible
from rageval.models import model_rules
from rageval.parse import (
    finite,
    key_lines,
    load_yaml_node,
    read_bytes,
    shown,
)
from rageval.settings import Config, EmbeddingConfig, SliceGate

# --- loading -------------------------------------------------------------------------------

_LANGUAGE = next(f for f in fields(Config) if f.name == "language")
#: The sections of rageval.yml in reading order: the fields of Config that default to a record.
_SECTIONS: dict[str, type] = {f.name: f.default_factory for f in fields(Config) if f.default_factory is not MISSING}
TOP_LEVEL_KEYS = ("golden", "corpus", "language", *_SECTIONS)
#: "app.type" -> its choices, and so on for every one-of key.
PROVIDERS = {f"{name}.{f.name}": f.metadata["choices"] for name, cls in _SECTIONS.items()
             for f in fields(cls) if f.metadata["kind"] == "choice"}
#: embedding.model when the key is not given, by provider; openai has none, so there it is required.
_EMBEDDING_MODELS = {"local": EmbeddingConfig.model, "e5": "multilingual-e5-small"}

MSG_NOT_FOUND = "{path}: config file not found. Create it (see examples/banhang/rageval.yml) or pass --config."
MSG_UNKNOWN_KEY = "{path}{where}: unknown key '{key}'{hint}. Valid keys here: {valid}."
MSG_TYPE = "{path}{where}: '{key}' must be {expected}, got {got}."
MSG_CHOICE = "{path}{where}: '{key}' must be one of {choices}, got {got}."
MSG_REQUIRED = "{path}: missing required key '{key}'. Add e.g. `{example}`."
MSG_PROBLEM = "{path}{where}: {key}: {problem}"
MSG_METRIC = "{path}{where}: {problem} (in '{key}')."
MSG_COMMAND = "{path}{where}: {key}: cannot split {got} into words ({problem}); close the quote, or write a list."
MSG_SLICE_KEY = "{path}{where}: slice gate key {k!r} must look like \"type=injection\" (slice key=value)."
MSG_APP_NEEDS = "{path}: app.type is {type}, so it needs 'app.{key}'. Add e.g. `{example}`."
MSG_OVERLAP = "{path}{where}: chunking.overlap ({o}) must be smaller than chunking.size ({s})."
MSG_TOP_K = "{path}{where}: retrieval.k asks for a cut-off of {k} but retrieval.top_k is {t}; raise top_k or drop that k."
MSG_PROMPT = "{path}{where}: generation.prompt: template {p} not found (paths are relative to the config file)."
MSG_FAITHFULNESS = "{path}{where}: judge.faithfulness needs judge.model (the model that checks claims)."
MSG_KEY_IN_URL = "{path}{where}: put the API key in an environment variable named by llm.api_key_env, not in the URL."
MSG_CANNOT_PRODUCE = ("{path}{where}: {key}: this config does not produce {metric} ({missing}), so the gate could "
                      "never check it.")
MSG_LEAK_FILE = "{path}{where}: golden_checks.leak_files: {p} not found (paths are relative to the config file)."

#: The kinds ``_Reader.typed`` checks itself, with what the message says they must be.
_EXPECTED = {"int": "an integer", "posint": "an integer ≥ 1", "nonnegint": "an integer ≥ 0",
             "nonneg": "a number ≥ 0", "positive": "a number > 0", "rate": "a number between 0 and 1",
             "level": "a number strictly between 0 and 1 (e.g. 0.05)",
             "str": "a non-empty string", "optstr": "a string or null", "bool": "true or false"}
_NUMBERS = ("nonneg", "positive", "rate", "level")


def _keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


class _Reader:
    """Reads values by kind; every error names the file, the dotted key and its line."""

    def __init__(self, path: Path, lines: dict[str, int], label: str | None = None) -> None:
        self.path = path
        self.name = label or str(path)  # what messages call it
        self.lines = lines  # dotted key -> line in the file

    def fail(self, template: str, dotted: str, **kw: Any) -> ConfigError:
        line = self.lines.get(dotted)
        if "got" in kw:
            kw["got"] = shown(kw["got"])
        return ConfigError(template.format(path=self.name, where=f": line {line}" if line else "", **kw))

    def mapping(self, value: Any, dotted: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a mapping (key: value lines)", got=value)
        return value

    def check_keys(self, data: dict[str, Any], valid: tuple[str, ...], prefix: str) -> None:
        for key in data:
            if key not in valid:
                dotted = f"{prefix}.{key}" if prefix else str(key)
                raise self.fail(MSG_UNKNOWN_KEY, dotted, key=dotted, hint=did_you_mean(str(key), valid),
                                valid=", ".join(valid))

    def section(self, cls: type, value: Any, dotted: str) -> dict[str, Any]:
        """The keys a section gives, each read by its field's kind (null: the default, if that is None)."""
        data = self.mapping(value, dotted)
        self.check_keys(data, _keys(cls), dotted)
        given: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in data:
                value = data[f.name]
                given[f.name] = None if value is None and f.default is None else self.read(f, value, f"{dotted}.{f.name}")
        return given

    def read(self, f: Field[Any], value: Any, dotted: str) -> Any:
        kind = f.metadata["kind"]
        if kind not in _EXPECTED:
            return getattr(self, f"read_{kind}")(value, dotted, f)
        value = self.typed(value, dotted, kind)
        low, high = f.metadata.get("bounds", (None, None))
        if low is not None and not low <= value <= high:
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected=f"an integer from {low} to {high}", got=value)
        return float(value) if kind in _NUMBERS else value

    def typed(self, value: Any, dotted: str, kind: str) -> Any:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        integer = isinstance(value, int) and not isinstance(value, bool)
        if number and kind in _NUMBERS and not finite(value):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a finite number", got=value)
        ok = {"int": integer, "posint": integer and value >= 1, "nonnegint": integer and value >= 0,
              "nonneg": number and value >= 0, "positive": number and value > 0, "rate": number and 0 <= value <= 1,
              "level": number and 0 < value < 1,
              "str": isinstance(value, str) and value != "", "bool": isinstance(value, bool),
              "optstr": value is None or (isinstance(value, str) and value != "")}[kind]
        if not ok:
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected=_EXPECTED[kind], got=value)
        return value

    def str_list(self, value: Any, dotted: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="a list of strings", got=value)
        return tuple(value)

    # --- the kinds a field's setting() names: read_<kind>(value, dotted key, field) ---

    def read_choice(self, value: Any, dotted: str, f: Field[Any]) -> str:
        choices = f.metadata["choices"]
        if callable(choices):          # declared elsewhere, read when the file is (the checks' registry)
            choices = choices()
        if value is False and "off" in choices:  # YAML 1.1 reads an unquoted off as false
            value = "off"
        if value not in choices:
            raise self.fail(MSG_CHOICE, dotted, key=dotted, choices=", ".join(choices), got=value)
        return value

    def read_ints(self, value: Any, dotted: str, f: Field[Any]) -> tuple[int, ...]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        ints = isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
        if not ints or (f.metadata.get("nonempty") and not value):
            expected = ("a non-empty" if f.metadata.get("nonempty") else "a") + " list of integers ≥ 1, e.g. [1, 3, 5]"
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected=expected, got=value)
        return tuple(sorted(set(value)))

    def read_path(self, value: Any, dotted: str, f: Field[Any] | None = None) -> Path:
        self.typed(value, dotted, "str")
        return (self.path.parent / value).resolve()

    def read_paths(self, value: Any, dotted: str, f: Field[Any]) -> tuple[Path, ...]:
        return tuple(self.read_path(item, dotted) for item in self.str_list(value, dotted))

    def read_strs(self, value: Any, dotted: str, f: Field[Any]) -> tuple[str, ...]:
        items = self.str_list(value, dotted)
        for item in items if "choices" in f.metadata else ():
            self.read_choice(item, dotted, f)
        if "check" in f.metadata:
            try:
                f.metadata["check"](items)
            except ValueError as exc:
                raise self.fail(MSG_PROBLEM, dotted, key=dotted, problem=exc) from None
        return items

    def read_units(self, value: Any, dotted: str, f: Field[Any]) -> tuple[str | Unit, ...]:
        """checks.units: unit names, and ``{name, words}`` mappings that add a unit."""
        items: list[str | Unit] = []
        listed = [value] if isinstance(value, str | dict) else value if isinstance(value, list) else [None]
        for i, item in enumerate(listed):
            where = f"{dotted}[{i}]"
            if isinstance(item, dict):
                self.check_keys(item, ("name", "words"), where)
                items.append(Unit(self.typed(item.get("name"), f"{where}.name", "str"),
                                  self.str_list(item.get("words"), f"{where}.words")))
            elif isinstance(item, str) and item:
                items.append(item)
            else:
                raise self.fail(MSG_TYPE, dotted, key=dotted, got=value,
                                expected="a list of unit names and {name: …, words: […]} entries")
        try:
            f.metadata["check"](items)
        except ValueError as exc:
            raise self.fail(MSG_PROBLEM, dotted, key=dotted, problem=exc) from None
        return tuple(items)

    def read_command(self, value: Any, dotted: str, f: Field[Any]) -> tuple[str, ...] | None:
        if isinstance(value, str):
            try:
                value = shlex.split(value)
            except ValueError as exc:  # an unclosed quote
                raise self.fail(MSG_COMMAND, dotted, key=dotted, got=value, problem=exc) from None
        return self.str_list(value, dotted) or None

    def read_url(self, value: Any, dotted: str, f: Field[Any]) -> str:
        try:
            parts = urlsplit(value) if isinstance(value, str) else None
            ok = parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
        except ValueError:  # a malformed host, or a port out of range
            ok = False
        if not ok:
            raise self.fail(MSG_TYPE, dotted, key=dotted, expected="an http(s) URL with a host, "
                            "e.g. http://127.0.0.1:8000/answer", got=value)
        return value

    def read_headers(self, value: Any, dotted: str, f: Field[Any]) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.mapping(value, dotted).items()}

    def read_metrics(self, value: Any, dotted: str, f: Field[Any]) -> dict[str, float]:
        """Metric -> threshold: a floor or a drop, between 0 and 1 for a rate (all but context_tokens)."""
        out: dict[str, float] = {}
        for name, threshold in self.mapping(value, dotted).items():
            try:
                rate = is_rate(str(parse_metric(str(name))))
            except ValueError as exc:
                raise self.fail(MSG_METRIC, f"{dotted}.{name}", key=dotted, problem=exc) from None
            out[str(name)] = float(self.typed(threshold, f"{dotted}.{name}", "rate" if rate else "nonneg"))
        return out

    def read_prices(self, value: Any, dotted: str, f: Field[Any]) -> dict[str, dict[str, float]]:
        prices: dict[str, dict[str, float]] = {}
        for model, price in self.mapping(value, dotted).items():
            where = f"{dotted}.{model}"
            per_token = self.mapping(price, where)
            self.check_keys(per_token, ("prompt", "completion"), where)
            prices[str(model)] = {k: float(self.typed(v, f"{where}.{k}", "nonneg")) for k, v in per_token.items()}
        return prices

    def read_section(self, value: Any, dotted: str, f: Field[Any]) -> Any:
        return f.default_factory(**self.section(f.default_factory, value, dotted))

    def read_slices(self, value: Any, dotted: str, f: Field[Any]) -> dict[str, SliceGate]:
        slices: dict[str, SliceGate] = {}
        for key, spec in self.mapping(value, dotted).items():
            where = f"{dotted}.{key}"
            if not isinstance(key, str) or "=" not in key:
                raise self.fail(MSG_SLICE_KEY, where, k=key)
            slices[key] = SliceGate(**self.section(SliceGate, spec, where))
        return slices


def read_section(cls: type, value: Any, dotted: str, label: str, path: Path | None = None) -> Any:
    """One section of rageval.yml (``gate``, ``golden_checks`` …) read alone, the way
    :func:`config_from_dict` reads it (unknown keys, kinds, choices); ConfigError naming ``label``
    and the dotted key. Paths are relative to ``path``'s folder."""
    r = _Reader(path or Path(DEFAULT_CONFIG).resolve(), {}, label)
    return cls(**r.section(cls, value, dotted))


def load_config(path: str | os.PathLike[str] = DEFAULT_CONFIG) -> Config:
    """Read and validate a rageval.yml. Raises ConfigError naming the file, key and line."""
    path = Path(path)
    if path.is_dir():
        path = path / DEFAULT_CONFIG
    if not path.is_file():
        raise ConfigError(MSG_NOT_FOUND.format(path=path))
    raw, node = load_yaml_node(read_bytes(path, error=ConfigError), str(path), error=ConfigError)
    return config_from_dict(raw, path.resolve(), lines=key_lines(node))


def config_from_dict(raw: Any, path: Path, *, lines: dict[str, int] | None = None, label: str | None = None) -> Config:
    """A Config from parsed YAML; ``lines`` (dotted key -> line) puts line numbers in messages.
    ``path``: the config file paths are relative to; ``label``: what messages call the config (its
    path unless given, e.g. "the config recorded in baseline.json")."""
    r = _Reader(path, lines or {}, label)
    data = r.mapping(raw, "(top level)")
    r.check_keys(data, TOP_LEVEL_KEYS, "")
    for key, example in (("golden", "golden: golden.yaml"), ("corpus", "corpus: docs/*.md")):
        if key not in data:
            raise ConfigError(MSG_REQUIRED.format(path=r.name, key=key, example=example))
    golden = r.read_path(data["golden"], "golden")
    corpus = r.typed(data["corpus"], "corpus", "str")
    for name, cls in _SECTIONS.items():  # every unknown key is reported before any bad value
        r.check_keys(r.mapping(data.get(name), name), _keys(cls), name)
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        given = r.section(cls, data.get(name), name)
        sections[name] = _derived(r, name, cls(**given), given)
        _check_rules(r, name, sections[name], sections)
    language = r.read_choice(data["language"], "language", _LANGUAGE) if "language" in data else "auto"
    config = Config(path=path, golden=golden, corpus=corpus, language=language, **sections)
    _check_thresholds(r, config)
    return config


def _check_thresholds(r: _Reader, cfg: Config) -> None:
    """Every metric the gate thresholds (floors, max_drop, overall and per slice) is one this config
    produces: a threshold on a metric it cannot produce would block every PR on "n/a"."""
    places = [("gate", cfg.gate.floors, "floors"), ("gate", cfg.gate.max_drop, "max_drop")]
    places += [(f"gate.slices.{k}", g.floors, "floors") for k, g in cfg.gate.slices.items()]
    places += [(f"gate.slices.{k}", g.max_drop, "max_drop") for k, g in cfg.gate.slices.items()]
    for where, thresholds, kind in places:
        for metric in thresholds:
            missing = producible(metric, cfg)
            if missing:
                raise r.fail(MSG_CANNOT_PRODUCE, f"{where}.{kind}.{metric}", key=f"{where}.{kind}.{metric}",
                             metric=metric, missing=missing)


def _derived(r: _Reader, name: str, section: Any, given: dict[str, Any]) -> Any:
    """The defaults that depend on another key or on where the config is; the dataclass has the rest."""
    if name == "embedding" and "model" not in given:
        return replace(section, model=_EMBEDDING_MODELS.get(section.provider))
    if name == "retrieval" and "top_k" not in given:  # as deep as the largest cut-off
        return replace(section, top_k=max(section.k))
    if name == "llm" and section.cache_dir is None:
        return replace(section, cache_dir=r.path.parent / ".rageval-cache")
    return section


_APP_NEEDS = {"replay": ("path", "app: {type: replay, path: traces.jsonl}"),
              "command": ("command", "app: {type: command, command: [python, my_app.py]}"),
              "http": ("url", "app: {type: http, url: http://127.0.0.1:8000/answer}")}
_OPENAI_GENERATION = "generation: {provider: openai, model: gpt-4o-mini, prompt: prompt.j2}"


def _check_rules(r: _Reader, name: str, s: Any, before: dict[str, Any]) -> None:
    """The rules between keys, checked as soon as section ``name`` is read (``before``: the sections
    read so far)."""
    if name == "app" and s.type in _APP_NEEDS and getattr(s, _APP_NEEDS[s.type][0]) is None:
        key, example = _APP_NEEDS[s.type]
        raise ConfigError(MSG_APP_NEEDS.format(path=r.name, type=s.type, key=key, example=example))
    if name == "chunking" and s.overlap >= s.size:
        raise r.fail(MSG_OVERLAP, "chunking.overlap", o=s.overlap, s=s.size)
    if name == "embedding" and s.model is None:
        raise ConfigError(MSG_REQUIRED.format(path=r.name, key="embedding.model",
                                              example="embedding: {provider: openai, model: text-embedding-3-small}"))
    if name == "retrieval" and max(s.k) > s.top_k:
        raise r.fail(MSG_TOP_K, "retrieval.k", k=max(s.k), t=s.top_k)
    if name == "generation" and s.provider == "openai":
        for key in ("model", "prompt"):
            if getattr(s, key) is None:
                raise ConfigError(MSG_REQUIRED.format(path=r.name, key=f"generation.{key}", example=_OPENAI_GENERATION))
        if not s.prompt.is_file():
            raise r.fail(MSG_PROMPT, "generation.prompt", p=s.prompt)
    for dotted, template, values in model_rules(name, s, before):  # judge ≠ generator; a price under a budget
        raise r.fail(template, dotted, **values)
    if name == "judge" and s.faithfulness and not s.model:
        raise r.fail(MSG_FAITHFULNESS, "judge.faithfulness")
    if name == "llm" and "api_key" in (s.base_url or ""):
        raise r.fail(MSG_KEY_IN_URL, "llm.base_url")
    if name == "golden_checks":
        for leak_file in s.leak_files:
            if not leak_file.is_file():
                raise r.fail(MSG_LEAK_FILE, "golden_checks.leak_files", p=leak_file)


# --- the files the config points to ---------------------------------------------------------

#: path keys whose file is no input of a run (where a cache lives), so no knob
NOT_INPUT_FILES = ("llm.cache_dir",)


def _path_keys(cfg: Config) -> list[tuple[str, tuple[Path, ...]]]:
    """(dotted key, the paths it holds) for every path setting of ``cfg``'s sections, in order."""
    out = []
    for name in _SECTIONS:
        section = getattr(cfg, name)
        for f in fields(section):
            kind, value = f.metadata.get("kind"), getattr(section, f.name)
            if kind == "path" and value is not None:
                out.append((f"{name}.{f.name}", (value,)))
            elif kind == "paths" and value:
                out.append((f"{name}.{f.name}", tuple(value)))
    return [(k, v) for k, v in out if k not in NOT_INPUT_FILES]


def config_files(cfg: Config) -> dict[str, dict[str, str]]:
    """Every file the config points to (the generation prompt, leak files, a replay's traces …) by
    its content: ``{dotted key: {path relative to the config's folder: sha256 of the bytes}}``, so an
    edit in place is a change although the path is the same. A file that cannot be read is left out
    (validation reports it; the run then fails on it)."""
    out: dict[str, dict[str, str]] = {}
    for key, paths in _path_keys(cfg):
        found = {}
        for path in paths:
            try:
                data = read_bytes(path, error=ConfigError)
            except ConfigError:
                continue
            found[path_label(path, cfg.root)] = hashlib.sha256(data).hexdigest()
        if found:
            out[key] = found
    return out


def path_label(path: Path, root: Path) -> str:
    """``path`` as the resolved config writes it: relative to the config's folder when inside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()

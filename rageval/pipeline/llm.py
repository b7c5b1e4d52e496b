"""The one place rageval talks to models: an OpenAI-compatible client wrapper.

``LLMClient`` adds to the ``openai`` client what an evaluation run needs:

* **retries** on 408/409/429/5xx, timeouts and connection errors, up to ``llm.max_retries``,
  waiting what the server asks (``retry-after-ms`` / ``Retry-After``) or an exponential backoff
  with jitter, every wait capped at ``MAX_WAIT_S``; the openai client's own retries are off;
* a **content-addressed response cache** on disk (``llm_cache.ResponseCache``), so an unchanged
  re-run costs zero calls. The key covers the request kind, the endpoint host, the model and every
  request parameter (messages, temperature, seed, max_tokens, response_format); embeddings are
  cached per text (model + text). The API key is never part of a key or a cache file;
* a **concurrency bound** (``llm.concurrency`` requests in flight, whatever the callers' pools);
* **accounting** of calls, cache hits, tokens and USD (from ``llm.prices``) per stage and per
  case (``ledger()``, a ``rageval.cost.Usage``). Every HTTP 200 is a call, a body that is no
  usable response included (a tool call with ``content: null``, broken JSON): it is retried and
  both calls are counted. A response without ``usage`` is counted with estimated tokens — the
  upper bound of ``rageval.cost.estimate_tokens`` — and marked ``estimated``. Prices are looked
  up by ``rageval.models.price_for`` (``openai/gpt-4o-mini`` and ``gpt-4o-mini-2024-07-18`` are
  priced as ``gpt-4o-mini``; the key used is reported in ``priced_as``);
* a **budget cap** (``llm.max_cost_usd``) checked before every network call, once the call holds
  its concurrency slot: when spending (estimates included) reaches the cap no new call starts,
  and the calls already in flight — at most ``llm.concurrency`` — finish and are counted. A model
  without a price (or a chat model priced on one side only) while a cap is set is refused
  (``ConfigError``) before any call, since its calls would cost "$0" and never reach the cap;
  ``rageval validate`` reports the same from the config. Clients built with one
  :class:`Spend` (a run, its re-runs, its attribution runs) share one cap.

The endpoint host is in the cache key (but not its port): the same model name served by two
providers is two models, while a local server restarted on another port is the same one.

The API key lives only inside the ``openai`` client: it is never stored on this object, never put
in an exception (errors are raised ``from None`` so the underlying request, which carries the
Authorization header, is not attached), a cache file, ``usage()`` or ``describe()``.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from rageval.cost import StageCost, Usage, estimate_tokens
from rageval.errors import (
    BudgetExceeded,
    ConfigError,
    MalformedResponse,
    ModelCallError,
)
from rageval.models import price_for
from rageval.pipeline.llm_cache import ResponseCache
from rageval.pipeline.llm_parse import (
    parse_chat,
    parse_embeddings,
    retry_after,
    server_message,
    usage_in,
)
from rageval.settings import LLMConfig

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CACHE_DIR = ".rageval-cache"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
LOCAL_DUMMY_KEY = "sk-local-no-key"       # local servers (Ollama, vLLM, tests) accept any key
MAX_WAIT_S = 30.0                          # no single retry wait is longer than this
BACKOFF_BASE_S = 0.5                       # first backoff; doubles per attempt, jitter in [50 %, 100 %]
MALFORMED_RETRIES = 1                      # a 200 with an unusable body is retried once
RETRYABLE_STATUS = frozenset({408, 409, 429})

MISSING_KEY = (
    "llm.api_key_env: the environment variable {var} is not set, and the model endpoint {url} needs an "
    "API key. Set {var} (in a workflow: `env: {var}: ${{{{ secrets.{var} }}}}`), or point llm.api_key_env "
    "at the variable that holds your key."
)
BAD_BASE_URL = "llm.base_url: {url!r} is not an http(s) URL. Use e.g. https://api.openai.com/v1 or http://localhost:11434/v1."
BUDGET_EXCEEDED = "budget exceeded: spent ${spent} of llm.max_cost_usd ${cap}"
BUDGET_TIP = "Raise llm.max_cost_usd, run a smaller golden subset, or keep the response cache (.rageval-cache) between runs."
UNPRICED = ("llm.max_cost_usd is set, but model '{model}' has no price in llm.prices, so its calls would count as $0 "
            "and the cap could never stop them. Add `llm: {{prices: {{{model}: {{prompt: …, completion: …}}}}}}` "
            "(USD per 1M tokens), or remove llm.max_cost_usd.")
HALF_PRICED = ("llm.prices.{key} (the price of model '{model}') gives no '{side}' price, so that side of its calls "
               "would count as $0. Give both `prompt` and `completion` (USD per 1M tokens).")
CALL_FAILED = "{what} failed after {attempts} attempt{s}{case}: {reason}"


class Spend:
    """What the clients sharing it have spent, in USD (estimates included): one budget for a run,
    its re-runs and its attribution runs. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usd = 0.0

    @property
    def usd(self) -> float:
        with self._lock:
            return self._usd

    def add(self, usd: float) -> None:
        with self._lock:
            self._usd += usd


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    model: str
    refusal: str | None = None       # the model declined: its reason (``content`` was null)


@dataclass(frozen=True)
class _Failure:
    reason: str                      # short, user-facing, no secrets
    status_code: int | None = None
    retryable: bool = False
    malformed: bool = False
    wait_s: float | None = None      # what the server asked us to wait, if it said


class LLMClient:
    """See the module docstring. Thread-safe: share one instance across a run's thread pools."""

    def __init__(
        self,
        cfg: LLMConfig,
        *,
        env: Mapping[str, str] = os.environ,
        cache_dir: Path | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        spend: Spend | None = None,
    ) -> None:
        self._cfg = cfg
        self.spend = spend if spend is not None else Spend()
        base_url = (cfg.base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(BAD_BASE_URL.format(url=_strip_userinfo(base_url)))
        self._base_url = base_url
        self._host = parts.hostname.lower()
        key = env.get(cfg.api_key_env) or ""
        if not key:
            if self._host not in LOCAL_HOSTS:
                raise ConfigError(MISSING_KEY.format(var=cfg.api_key_env, url=_strip_userinfo(base_url)))
            key = LOCAL_DUMMY_KEY
        # The key is held by the openai client only. Its own retries are off: we retry here.
        self._sdk = _openai_sdk()
        self._openai = self._sdk.OpenAI(base_url=base_url, api_key=key, timeout=cfg.timeout_s, max_retries=0)
        self._redact = key if key != LOCAL_DUMMY_KEY else None
        del key
        self._cache = ResponseCache(Path(cache_dir if cache_dir is not None else (cfg.cache_dir or DEFAULT_CACHE_DIR)),
                                    self._host)
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._rng_lock = threading.Lock()
        self._sem = threading.BoundedSemaphore(cfg.concurrency)
        self._lock = threading.Lock()
        self._stages: dict[str, StageCost] = {}
        self._cases: dict[str, dict[str, StageCost]] = {}
        self._usd = 0.0
        self._retries = 0
        self._errors = 0
        self._unpriced: set[str] = set()
        self._priced_as: dict[str, str] = {}

    def __repr__(self) -> str:
        return (f"LLMClient(base_url={_strip_userinfo(self._base_url)!r}, api_key_env={self._cfg.api_key_env!r}, "
                f"concurrency={self._cfg.concurrency})")

    # --- public API ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The client's settings for the RunResult. Names the key's variable, never the key."""
        return {
            "base_url": _strip_userinfo(self._base_url),
            "api_key_env": self._cfg.api_key_env,
            "concurrency": self._cfg.concurrency,
            "timeout_s": self._cfg.timeout_s,
            "max_retries": self._cfg.max_retries,
            "cache_dir": self._cache.directory.as_posix(),
            "max_cost_usd": self._cfg.max_cost_usd,
        }

    def ledger(self) -> Usage:
        """A snapshot of the counts per stage and per case and stage (``Usage.since`` diffs two)."""
        with self._lock:
            return Usage(dict(self._stages), {case: dict(stages) for case, stages in self._cases.items()},
                         dict(self._priced_as))

    def usage(self) -> dict[str, Any]:
        """Network calls per stage (cache hits are not calls), tokens, USD, calls per case."""
        with self._lock:
            stages = list(self._stages.values())
            return {
                "calls": {s: c.calls for s, c in self._stages.items() if c.calls},
                "calls_total": sum(c.calls for c in stages),
                "cache_hits": sum(c.cache_hits for c in stages),
                "prompt_tokens": sum(c.prompt_tokens for c in stages),
                "completion_tokens": sum(c.completion_tokens for c in stages),
                "usd": round(self._usd, 10),
                "by_case": {case: {s: c.calls for s, c in per.items() if c.calls}
                            for case, per in self._cases.items() if any(c.calls for c in per.values())},
                "retries": self._retries,
                "errors": self._errors,
                "unpriced_models": sorted(self._unpriced),
                "estimated_calls": sum(c.estimated for c in stages),
                "priced_as": {m: k for m, k in sorted(self._priced_as.items()) if m != k},
            }

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str,
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        stage: str = "generation",
        case_id: str | None = None,
        use_cache: bool = True,
    ) -> ChatResult:
        """One chat completion. ``use_cache=False`` skips the cache lookup (a re-run of a
        non-deterministic stage) but still stores the fresh answer."""
        if not isinstance(messages, list) or not messages:
            raise ValueError("chat() needs a non-empty list of messages")
        request = {"model": model, "messages": messages, "temperature": temperature, "seed": seed,
                   "max_tokens": max_tokens, "response_format": response_format}
        key = self._cache.key("chat", request)
        if use_cache:
            hit = self._cache.read(key, "chat")
            if hit is not None:
                self._count(stage, case_id, StageCost(cache_hits=1))
                return ChatResult(text=hit["text"], prompt_tokens=hit["prompt_tokens"],
                                  completion_tokens=hit["completion_tokens"], cached=True, model=hit["model"],
                                  refusal=hit.get("refusal"))
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature}
        if seed is not None:
            kwargs["seed"] = seed
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if response_format is not None:
            kwargs["response_format"] = response_format
        asked = estimate_tokens(_texts(messages))
        parsed = self._call(
            what=f"chat model '{model}'", model=model, stage=stage, case_id=case_id,
            send=lambda: self._openai.chat.completions.with_raw_response.create(**kwargs),
            parse=lambda body: parse_chat(body, model),
            estimate=lambda parsed: (asked, estimate_tokens([parsed["text"] + (parsed["refusal"] or "")])),
        )
        response = {"text": parsed["text"], "prompt_tokens": parsed["prompt_tokens"],
                    "completion_tokens": parsed["completion_tokens"], "model": parsed["model"]}
        if parsed["refusal"] is not None:
            response["refusal"] = parsed["refusal"]
        self._cache.write(key, "chat", request, response)
        return ChatResult(cached=False, **response)

    def embed(self, model: str, texts: list[str], *, stage: str = "embedding", case_id: str | None = None,
              batch_size: int | None = None) -> list[list[float]]:
        """Embeddings for ``texts``, in order. Cached per text (model + text): only texts not in the
        cache are sent, each once, in one request (or requests of ``batch_size``)."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise ValueError("embed() needs a list of strings")
        if batch_size is not None and batch_size < 1:
            raise ValueError("embed() batch_size must be at least 1")
        keys = [self._cache.key("embedding", {"model": model, "text": t}) for t in texts]
        found: dict[str, list[float]] = {}
        missing: dict[str, str] = {}
        hits = 0
        for key, text in zip(keys, texts):
            if key in found or key in missing:
                continue
            hit = self._cache.read(key, "embedding")
            if hit is not None:
                found[key] = hit["embedding"]
                hits += 1
            else:
                missing[key] = text
        if hits:
            self._count(stage, case_id, StageCost(cache_hits=hits))
        todo = list(missing.items())
        size = batch_size or max(len(todo), 1)
        for start in range(0, len(todo), size):
            batch = todo[start:start + size]
            inputs = [t for _, t in batch]
            parsed = self._call(
                what=f"embedding model '{model}'", model=model, stage=stage, case_id=case_id,
                send=lambda inputs=inputs: self._openai.embeddings.with_raw_response.create(
                    model=model, input=inputs, encoding_format="float"),
                parse=lambda body, n=len(inputs): parse_embeddings(body, n),
                estimate=lambda parsed, inputs=inputs: (estimate_tokens(inputs), 0), kind="embedding",
            )
            for (key, text), vector in zip(batch, parsed["vectors"]):
                self._cache.write(key, "embedding", {"model": model, "text": text}, {"embedding": vector})
                found[key] = vector
        return [list(found[k]) for k in keys]

    # --- network -------------------------------------------------------------------------------
    def _call(self, *, what: str, model: str, stage: str, case_id: str | None, send: Callable[[], Any],
              parse: Callable[[str], dict[str, Any]], estimate: Callable[[dict[str, Any]], tuple[int, int]],
              kind: str = "chat") -> dict[str, Any]:
        """One request, retried as the module docstring says; every 200 counted. ``estimate(parsed)``
        gives (prompt, completion) tokens for a response without ``usage``."""
        attempts = 0
        malformed = 0
        while True:
            attempts += 1
            failure: _Failure | None = None
            with self._sem:
                self._check_budget(model, kind)     # holding the slot: at most `concurrency` calls pass the cap
                try:
                    raw = send()
                    body = raw.text
                except self._sdk.APIStatusError as exc:
                    failure = self._status_failure(exc)
                except self._sdk.APITimeoutError:
                    failure = _Failure(f"timed out after {self._cfg.timeout_s:g} s (llm.timeout_s)", retryable=True)
                except self._sdk.APIConnectionError:
                    failure = _Failure(f"could not connect to {_strip_userinfo(self._base_url)}", retryable=True)
            if failure is None:
                try:
                    parsed = parse(body)
                except MalformedResponse as exc:
                    failure = _Failure(f"malformed response: {self._clean(str(exc))}", status_code=raw.status_code,
                                       retryable=True, malformed=True)
                    # answered, so counted (and billed, as far as we can tell): its usage, else a bound
                    tokens = usage_in(body)
                    asked = estimate({"text": "", "refusal": None})[0]
                    bound = (asked, estimate_tokens([body]) if kind == "chat" else 0)
                    self._account(stage, case_id, model, tokens or bound, tokens is None, kind)
                else:
                    tokens = parsed["usage"]
                    tokens, estimated = (tokens, False) if tokens is not None else (estimate(parsed), True)
                    self._account(stage, case_id, model, tokens, estimated, kind)
                    return {**parsed, "prompt_tokens": tokens[0], "completion_tokens": tokens[1]}
            if not self._retry(failure, attempts, malformed):
                with self._lock:
                    self._errors += 1
                case = f" for case {case_id}" if case_id else ""
                raise ModelCallError(
                    CALL_FAILED.format(what=what, attempts=attempts, s="" if attempts == 1 else "s", case=case,
                                       reason=failure.reason),
                    status_code=failure.status_code, attempts=attempts, tip=_tip(failure.status_code, self._cfg),
                ) from None
            malformed += failure.malformed
            with self._lock:
                self._retries += 1
            self._sleep(self._wait_s(failure, attempts))

    def _retry(self, failure: _Failure, attempts: int, malformed: int) -> bool:
        """Whether a failed attempt is tried again: retryable, retries left, and a malformed body only once."""
        retry = failure.retryable and attempts <= self._cfg.max_retries
        return retry and not (failure.malformed and malformed >= MALFORMED_RETRIES)

    def _status_failure(self, exc: openai.APIStatusError) -> _Failure:
        status = exc.status_code
        message = server_message(exc.body) or exc.__class__.__name__
        return _Failure(
            f"HTTP {status}: {self._clean(message)}",
            status_code=status,
            retryable=status in RETRYABLE_STATUS or status >= 500,
            wait_s=retry_after(exc.response.headers),
        )

    def _wait_s(self, failure: _Failure, attempt: int) -> float:
        if failure.wait_s is not None:
            return min(max(failure.wait_s, 0.0), MAX_WAIT_S)
        with self._rng_lock:
            jitter = 0.5 + 0.5 * self._rng.random()
        return min(BACKOFF_BASE_S * 2 ** (attempt - 1), MAX_WAIT_S) * jitter

    def _clean(self, text: str) -> str:
        text = " ".join(text.split())
        if self._redact:
            text = text.replace(self._redact, "***")
        return text if len(text) <= 300 else text[:297] + "..."

    # --- accounting ----------------------------------------------------------------------------
    def _price(self, model: str) -> tuple[str, Mapping[str, float]] | None:
        try:
            return price_for(model, self._cfg.prices)
        except ValueError as exc:
            raise ConfigError(f"llm.prices: {exc}") from None

    def _check_budget(self, model: str, kind: str = "chat") -> None:
        cap = self._cfg.max_cost_usd
        if cap is None:
            return
        found = self._price(model)
        if found is None:
            raise ConfigError(UNPRICED.format(model=model))
        key, price = found
        for side in ("prompt", "completion") if kind == "chat" else ("prompt",):
            if side not in price:
                raise ConfigError(HALF_PRICED.format(key=key, model=model, side=side))
        spent = self.spend.usd
        if spent >= cap - 1e-12:
            raise BudgetExceeded(BUDGET_EXCEEDED.format(spent=_usd(spent), cap=_usd(cap)), tip=BUDGET_TIP)

    def _account(self, stage: str, case_id: str | None, model: str, tokens: tuple[int, int], estimated: bool,
                 kind: str = "chat") -> None:
        prompt, completion = tokens
        found = self._price(model)
        cost = 0.0
        if found is not None:
            price = found[1]
            cost = (prompt * float(price.get("prompt", 0.0)) + completion * float(price.get("completion", 0.0))) / 1e6
        self.spend.add(cost)
        with self._lock:
            self._usd += cost
            if found is None:
                self._unpriced.add(model)
            else:
                self._priced_as[model] = found[0]
        self._count(stage, case_id, StageCost(1, 0, prompt, completion, cost, int(estimated)))

    def _count(self, stage: str, case_id: str | None, cost: StageCost) -> None:
        with self._lock:
            self._stages[stage] = self._stages.get(stage, StageCost()).plus(cost)
            if case_id is not None:
                per_case = self._cases.setdefault(case_id, {})
                per_case[stage] = per_case.get(stage, StageCost()).plus(cost)


# --- helpers ---------------------------------------------------------------------------------------
@functools.cache
def _openai_sdk() -> ModuleType:
    """The ``openai`` package, imported when the first client is built: importing it takes ~0.45 s,
    and a run whose stages make no model call (the offline demo, most CI runs of the builtin app)
    never needs it."""
    import openai

    return openai


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every message (content parts joined), for the token estimate."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append(content if isinstance(content, str) else "")
    return out


def _tip(status: int | None, cfg: LLMConfig) -> str | None:
    if status in (401, 403):
        return f"Check the API key in ${cfg.api_key_env} (llm.api_key_env) and that it may use this model."
    if status == 404:
        return "Check llm.base_url (it usually ends in /v1) and the model name."
    if status == 429:
        return "The endpoint is rate-limiting: lower llm.concurrency or raise llm.max_retries."
    return None


def _strip_userinfo(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _usd(x: float) -> str:
    text = f"{x:.4f}".rstrip("0")
    whole, _, frac = text.partition(".")
    return f"{whole}.{frac.ljust(2, '0')}"

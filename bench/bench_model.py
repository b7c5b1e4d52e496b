"""Model-stack bench: LLM calls, tokens and wall time per case of rageval's model stack
(generation + judge, with the claims for faithfulness) on the banhang golden set, and — side by
side on the same cases, the same local server and in one run — the faithfulness metrics of Ragas
and DeepEval.

Everything talks to ``tests/openai_server.py`` (an OpenAI-compatible server on 127.0.0.1, an
ephemeral port) whose responder gives well-formed JSON to every prompt the three tools send. The
replies are mechanical, not intelligent (a claim is "supported" when its text occurs in the
source), so the scores are a sanity check only; the calls, tokens and wall times are the point.
A socket guard refuses, and records, any connection or DNS look-up that is not loopback.

Our stack is measured in three settings (:data:`MODES`), each with its own response cache:
rules first then one judge call returning verdict and claims (the default); every case judged
(``judge.always: true``, what 0.1.0 did); and every case judged with faithfulness in two calls of
its own (``judge.faithfulness_calls: separate``, the 0.1.0 stack). ``rules_first`` in the results
counts the judge-stage calls on the cases that fail a rule, before (every case judged) and after
(rules first); ``gate_rerun`` runs ``rageval gate`` twice and checks that the unchanged second run
reports its re-run calls exactly as the server counted them.

Our stack alone (needs only the project's own dependencies):

    python bench/bench_model.py --only ours                   # all 123 cases, cold then warm cache
    python bench/bench_model.py --only ours --cases 20

Ragas and DeepEval are not project dependencies; install them in a separate venv that sees the
system packages and run all three there, in one process. Ragas 0.4.3 imports
``langchain_community.chat_models.vertexai``, which langchain-community 0.4 removed, hence the pin:

    python -m venv /tmp/benchvenv --system-site-packages
    /tmp/benchvenv/bin/pip install ragas deepeval "langchain-community<0.4"
    /tmp/benchvenv/bin/python bench/bench_model.py --only all

(The venv's openai SDK is 1.x, which Ragas and DeepEval need and which the package accepts,
``openai>=1.40``; the calls and tokens do not depend on the SDK.)

``--only all`` (the default) runs whatever is importable in one process and records
``"not installed"`` (with the pip command) for the rest. Each run merges its sections into
``--out`` (default bench/results-model.json) and prints the markdown table for the README.

Tokens are the test server's usage numbers: whitespace-separated words of the request's message
texts (prompt) and of the reply (completion) — one ruler for all three tools, not tiktoken.
``--latency-ms`` (default 50) makes the server sleep per request, standing in for a model, so
wall time reflects how many calls each tool makes and how concurrently; every tool runs its cases
with the config's ``llm.concurrency`` (4) in flight.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import math
import os
import platform
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "tests"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from openai_server import OpenAIServer

from rageval import flow
from rageval.config import load_config
from rageval.metrics.faithfulness import EXTRACT_SYSTEM, VERIFY_SYSTEM, check_faithfulness
from rageval.metrics.judge import JUDGE_CLAIMS_SYSTEM, JUDGE_SYSTEM, NO_SOURCES
from rageval.metrics.registry import rule_check_names
from rageval.pipeline.llm import LLMClient
from rageval.pipeline.runner import prepare
from rageval.text import sentences

EXAMPLE = ROOT / "examples" / "banhang"
CONFIG_NAME = "rageval-openai.yml"
DEFAULT_OUT = ROOT / "bench" / "results-model.json"
BENCH_KEY = "sk-bench-local-not-a-secret"
DECLINE = "Tài liệu không đề cập thông tin này."
TOOLS = ("ours", "ragas", "deepeval")
PIP = {"ragas": 'pip install ragas "langchain-community<0.4"', "deepeval": 'pip install deepeval "langchain-community<0.4"'}

#: Environment that keeps Ragas, DeepEval and their dependencies off the network.
OFFLINE_ENV = {
    "RAGAS_DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    "ERROR_REPORTING": "NO",
    "DO_NOT_TRACK": "1",
    "ANONYMIZED_TELEMETRY": "false",
    "POSTHOG_DISABLED": "1",
    "OTEL_SDK_DISABLED": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

# Markers that identify each tool's prompts (taken from their installed sources).
RAGAS_STATEMENTS = "Break down each sentence into one or more fully understandable statements"
RAGAS_NLI = "judge the faithfulness of a series of statements based on a given context"
RAGAS_INPUT = "Now perform the same with the following input\ninput: "
DEEPEVAL_TRUTHS = 'with the "truths" key as a list of strings'
DEEPEVAL_CLAIMS = 'with the "claims" key as a list of strings'
DEEPEVAL_VERDICTS = "with the 'verdicts' key as a list of JSON objects"
DEEPEVAL_REASON = "with the 'reason' key providing the reason"
GENERATION_MARK = "Câu hỏi của khách (nằm giữa <<< và >>>):"

STAGE_OF_KIND = {"rageval.generation": "generation", "rageval.judge": "judge",
                 "rageval.claims": "faithfulness", "rageval.verify": "faithfulness"}


# --- the responder ------------------------------------------------------------------------------

def _norm(text: str) -> str:
    text = re.sub(r"\[[^\]]*\]", " ", text)            # citations like [DT-1]
    return " ".join(text.lower().split()).strip(" .;:,")


def claims_of(answer: str) -> list[str]:
    """The answer's sentences with citations removed; a refusal states nothing checkable."""
    if not answer or _norm(answer) == _norm(DECLINE):
        return []
    out = []
    for s in sentences(answer):
        s = re.sub(r"\s*\[[^\]]*\]", "", s).strip()
        if _norm(s):
            out.append(s)
    return out


def supported(claim: str, source: str) -> bool:
    """Mechanical entailment: the claim's text occurs in the source."""
    c = _norm(claim)
    return bool(c) and c in _norm(source)


def _between(text: str, start: str, end: str | None = None) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    rest = text[i + len(start):]
    if end is not None:
        j = rest.find(end)
        if j >= 0:
            rest = rest[:j]
    return rest.strip()


def _tag(text: str, tag: str) -> str:
    return _between(text, f"<{tag}>\n", f"\n</{tag}>")


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a content-parts list (DeepEval sends those)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _messages_text(body: dict[str, Any]) -> tuple[str, str]:
    system, parts = "", []
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        content = _content_text(m.get("content"))
        if m.get("role") == "system" and not system:
            system = content
        parts.append(content)
    return system, "\n".join(parts)


def classify(body: dict[str, Any]) -> str:
    """Which tool and step sent this chat request, e.g. ``rageval.judge`` or ``ragas.nli``."""
    system, text = _messages_text(body)
    if system == EXTRACT_SYSTEM:
        return "rageval.claims"
    if system == VERIFY_SYSTEM:
        return "rageval.verify"
    if system in (JUDGE_SYSTEM, JUDGE_CLAIMS_SYSTEM):
        return "rageval.judge"
    if GENERATION_MARK in text:
        return "rageval.generation"
    for marker, kind in ((RAGAS_STATEMENTS, "ragas.statements"), (RAGAS_NLI, "ragas.nli"),
                         (DEEPEVAL_TRUTHS, "deepeval.truths"), (DEEPEVAL_CLAIMS, "deepeval.claims"),
                         (DEEPEVAL_VERDICTS, "deepeval.verdicts"), (DEEPEVAL_REASON, "deepeval.reason")):
        if marker in text:
            return kind
    return "unknown"


def _generation(text: str) -> str:
    """The first sentence of the first chunk in the prompt, citing its section."""
    m = re.search(r"\[Đoạn 1 \| mã [^|\]]+ \| mục ([^\]]+)\]\n(.*?)(?:\n\[Đoạn 2 |\nCâu hỏi của khách)", text, re.DOTALL)
    if not m:
        return DECLINE
    body = "\n".join(line for line in m.group(2).splitlines() if line.rstrip().endswith((".", ":", ";", ")")))
    first = next((s for s in sentences(body or m.group(2)) if _norm(s)), "")  # headings skipped
    if not first:
        return DECLINE
    section = m.group(1).split(",")[0].strip()
    return f"{first.rstrip()} [{section}]"


def _verify(text: str) -> dict[str, Any]:
    claims = [re.sub(r"^\d+\.\s*", "", line).strip() for line in _tag(text, "claims").splitlines() if line.strip()]
    sources = {key: _tag(text, tag) for key, tag in (("in_context", "context"), ("in_expected", "expected_sections"))
               if f"<{tag}>" in text}
    return {"claims": [{"claim": c, **{k: "supported" if supported(c, src) else "unsupported"
                                      for k, src in sources.items()}} for c in claims]}


def _judge(text: str) -> dict[str, Any]:
    """The verdict, and — when the request asks for them (the judge with claims) — the answer's
    claims with their support in each source asked about."""
    answer, sources = _tag(text, "answer"), _tag(text, "sources")
    asked = {key: _tag(text, tag) for key, tag in (("in_context", "context"), ("in_expected", "sources"))
             if f'"{key}" for <{tag}>' in text}
    with_claims = "<context>" in text
    claims = [{"claim": c, **{k: "supported" if supported(c, src) else "unsupported" for k, src in asked.items()}}
              for c in claims_of(answer)]
    if _norm(answer) == _norm(DECLINE):
        if sources == NO_SOURCES:
            out: dict[str, Any] = {"verdict": "pass", "wrong_claims": [], "missing": []}
        else:
            out = {"verdict": "fail", "wrong_claims": [], "missing": ["the answer declines; the sources answer it"]}
    else:
        wrong = [c for c in claims_of(answer) if not supported(c, sources)]
        out = {"verdict": "fail" if wrong else "pass", "wrong_claims": [f"not in the sources: {c}" for c in wrong],
               "missing": []}
    return {**out, "claims": claims} if with_claims else out


def _ragas_input(text: str) -> dict[str, Any]:
    raw = text[text.rfind(RAGAS_INPUT) + len(RAGAS_INPUT):]
    raw = raw[: raw.rfind("\nOutput:")] if "\nOutput:" in raw else raw
    return json.loads(raw)


def _listish(raw: str) -> list[str]:
    raw = raw.strip()
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(raw)
        except (ValueError, SyntaxError):
            continue
        if isinstance(value, list):
            return [str(v) for v in value]
    return [line.strip("-• ").strip() for line in raw.splitlines() if line.strip()]


def reply(kind: str, body: dict[str, Any]) -> str:
    """A well-formed reply for a request of ``kind`` (see :func:`classify`)."""
    _, text = _messages_text(body)
    if kind == "rageval.generation":
        return _generation(text)
    if kind == "rageval.claims":
        out: Any = {"claims": claims_of(_tag(text, "answer"))}
    elif kind == "rageval.verify":
        out = _verify(text)
    elif kind == "rageval.judge":
        out = _judge(text)
    elif kind == "ragas.statements":
        out = {"statements": claims_of(_ragas_input(text).get("answer", ""))}
    elif kind == "ragas.nli":
        data = _ragas_input(text)
        context = data.get("context", "")
        out = {"statements": [{"statement": s, "reason": "found in the context" if supported(s, context)
                               else "not found in the context", "verdict": int(supported(s, context))}
                              for s in data.get("statements", [])]}
    elif kind == "deepeval.truths":
        out = {"truths": [s for s in sentences(_between(text, "\nText:\n", "\n\nJSON:")) if _norm(s)]}
    elif kind == "deepeval.claims":
        out = {"claims": claims_of(_between(text, "\nAI Output:\n", "\n\nJSON:"))}
    elif kind == "deepeval.verdicts":
        tail = text[text.rfind("Retrieval Contexts:"):]
        context = _between(tail, "Retrieval Contexts:\n", "\n\nClaims:")
        claims = _listish(_between(tail, "\n\nClaims:\n", "\n\nJSON:"))
        out = {"verdicts": [{"verdict": "yes"} if supported(c, context) else
                            {"verdict": "no", "reason": "the retrieval context does not state this"} for c in claims]}
    elif kind == "deepeval.reason":
        score = _between(text, "Faithfulness Score:\n", "\n").strip() or "?"
        out = {"reason": f"The score is {score} because the claims were checked against the context."}
    else:
        out = {"error": "bench responder: unrecognised prompt"}
    return json.dumps(out, ensure_ascii=False)


def _words(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True)
class Call:
    kind: str
    model: str
    prompt_tokens: int
    completion_tokens: int


class Recorder:
    """The server's responder: answers by :func:`reply` and records every chat call's kind and
    tokens, counted the way the test server reports usage (whitespace words)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    def __call__(self, body: dict[str, Any]) -> str:
        kind = classify(body)
        answer = reply(kind, body)
        prompt = sum(_words(_content_text(m.get("content"))) for m in body.get("messages", []) if isinstance(m, dict))
        with self._lock:
            self.calls.append(Call(kind, str(body.get("model")), prompt, _words(answer)))
        return answer

    def mark(self) -> int:
        with self._lock:
            return len(self.calls)

    def since(self, mark: int) -> list[Call]:
        with self._lock:
            return list(self.calls[mark:])


# --- the loopback guard -------------------------------------------------------------------------

def is_loopback(host: Any) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost; False for anything else, hostnames included."""
    if not isinstance(host, str):
        return False
    h = host.strip("[]").lower()
    return h in ("localhost", "::1", "0:0:0:0:0:0:0:1") or h.startswith(("127.", "::ffff:127."))


class LoopbackGuard:
    """While active, every socket connect and DNS look-up that is not loopback raises OSError and
    is recorded in ``blocked`` — nothing the bench runs can reach past 127.0.0.1."""

    def __init__(self) -> None:
        self.blocked: list[str] = []
        self._saved: tuple[Any, ...] = ()

    def _refuse(self, what: str) -> None:
        self.blocked.append(what)
        raise OSError(f"bench loopback guard: refused {what}")

    def __enter__(self) -> Self:
        guard = self
        orig_connect, orig_connect_ex, orig_gai = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

        def check(sock: socket.socket, address: Any) -> None:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address[0]):
                guard._refuse(f"connect {address[0]}:{address[1]}")

        def connect(sock: socket.socket, address: Any) -> Any:
            check(sock, address)
            return orig_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> Any:
            check(sock, address)
            return orig_connect_ex(sock, address)

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            if name is not None and not is_loopback(name):
                guard._refuse(f"resolve {name}")
            return orig_gai(host, *args, **kwargs)

        self._saved = (orig_connect, orig_connect_ex, orig_gai)
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo
        return self

    def __exit__(self, *exc: object) -> None:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = self._saved


# --- our stack ----------------------------------------------------------------------------------

def _per_case(calls: list[Call], n: int, key: Callable[[Call], str | None]) -> dict[str, Any]:
    count: Counter[str] = Counter()
    prompt: Counter[str] = Counter()
    completion: Counter[str] = Counter()
    for c in calls:
        k = key(c)
        if k is None:
            continue
        count[k] += 1
        prompt[k] += c.prompt_tokens
        completion[k] += c.completion_tokens
    div = max(n, 1)
    stages = sorted(count)
    return {
        "calls": dict(count), "calls_total": sum(count.values()),
        "calls_per_case": {**{s: round(count[s] / div, 3) for s in stages}, "total": round(sum(count.values()) / div, 3)},
        "prompt_tokens_per_case": {**{s: round(prompt[s] / div, 1) for s in stages},
                                   "total": round(sum(prompt.values()) / div, 1)},
        "completion_tokens_per_case": {**{s: round(completion[s] / div, 1) for s in stages},
                                       "total": round(sum(completion.values()) / div, 1)},
    }


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return round(sum(vals) / len(vals), 4) if vals else None


#: our stack as measured: mode -> (judge settings changed from the example's config, what it is)
MODES: dict[str, tuple[dict[str, Any], str]] = {
    "rules_first": ({}, "full stack: rules first, then one judge call returning verdict and claims"),
    "always": ({"always": True}, "full stack, every case judged (`judge.always: true`)"),
    "separate": ({"always": True, "faithfulness_calls": "separate"},
                 "full stack as in 0.1.0: every case judged, faithfulness in 2 calls of its own"),
}


def _run_phase(server: OpenAIServer, recorder: Recorder, cfg: Any, env: dict[str, str], *, subset: str | None,
               cases: int | None, warm: bool) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """One evaluation of ``cfg`` → (measured numbers, the RunResult as a dict, the evaluation)."""
    mark, server_before = recorder.mark(), sum(server.calls.values())
    started = time.perf_counter()
    ev = prepare(cfg, subset=subset, env=env)
    ids = [c.id for c in ev.golden.cases][:cases] if cases else None
    run = ev.run(case_ids=ids)
    result = {**run.to_dict(), "cases": [c.to_dict() for c in run.cases]}   # every case field inline
    wall = time.perf_counter() - started
    measured = _per_case(recorder.since(mark), result["summary"]["n_cases"], lambda c: STAGE_OF_KIND.get(c.kind, c.kind))
    ours = {k: v for k, v in measured["calls"].items() if k in ("generation", "judge", "faithfulness")}
    return {
        "wall_s": round(wall, 3), "eval_s": result["timings"]["eval_s"], "index_s": result["timings"]["index_s"],
        "server_requests": sum(server.calls.values()) - server_before, **measured,
        "runresult_cost": {k: v for k, v in result["cost"].items() if k != "by_case"},
        "runresult_agrees": result["cost"]["calls"] == ours
                            or (warm and result["cost"]["calls_total"] == 0 and not measured["calls"]),
    }, result, ev


def _fails_rules(case: dict[str, Any]) -> bool:
    return any((case["checks"].get(n) or {}).get("status") == "fail" for n in rule_check_names())


def rules_first_counts(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """Model calls of the judge stages (judge + faithfulness) on the cases that fail a rule, in a
    run that judges every case (``before``: ``judge.always: true``) and in one with rules first
    (``after``), from each RunResult's own per-case cost."""
    failing = sorted(c["id"] for c in after["cases"] if _fails_rules(c))
    assert failing == sorted(c["id"] for c in before["cases"] if _fails_rules(c)), "the two runs' answers differ"

    def judged(result: dict[str, Any], ids: list[str]) -> int:
        by_case = result["cost"].get("by_case") or {}
        return sum((by_case.get(i) or {}).get(s, {}).get("calls", 0) for i in ids for s in ("judge", "faithfulness"))

    everyone = [c["id"] for c in after["cases"]]
    return {"cases": len(everyone), "cases_failing_rules": len(failing),
            "judge_calls_on_failing_cases": {"before": judged(before, failing), "after": judged(after, failing)},
            "judge_calls_all_cases": {"before": judged(before, everyone), "after": judged(after, everyone)},
            "calls_total": {"before": before["cost"]["calls_total"], "after": after["cost"]["calls_total"]}}


def run_ours(server: OpenAIServer, recorder: Recorder, workdir: Path, *, cases: int | None = None,
             subset: str | None = None) -> dict[str, Any]:
    """Our stack on a copy of examples/banhang, in each of :data:`MODES` (each with its own
    response cache), cold then warm.

    Returns ``{"section": {...results...}, "inputs": [per-case question/answer/context/expected]}``;
    ``section["per_case_calls"]`` maps case id -> calls per stage (the LLM client's own count) of
    the rules-first run, ``section["rules_first"]`` the judge calls on cases failing a rule before
    and after."""
    project = workdir / "banhang"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".rageval-cache"))
    base = load_config(project / CONFIG_NAME)
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": BENCH_KEY}
    modes: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    for mode, (changes, label) in MODES.items():
        cfg = replace(base, judge=replace(base.judge, **changes), llm=replace(base.llm, cache_dir=project / f".cache-{mode}"))
        cold, results[mode], ev = _run_phase(server, recorder, cfg, env, subset=subset, cases=cases, warm=False)
        warm, _, _ = _run_phase(server, recorder, cfg, env, subset=subset, cases=cases, warm=True)
        modes[mode] = {"label": label, "judge": {k: getattr(cfg.judge, k) for k in ("always", "faithfulness_calls")},
                       "cold": cold, "warm": warm}
        if mode == "rules_first":
            cold_ev, per_case_calls = ev, ev.client.usage()["by_case"]
    cold_result = results["rules_first"]
    m = cold_result["summary"]["metrics"]
    inputs = []
    for case in cold_result["cases"]:
        if case["error"] or not case["answer"] or not case["retrieved"]:
            continue
        inputs.append({"id": case["id"], "question": case["question"], "answer": case["answer"],
                       "contexts": _context_texts(case, cold_result.get("chunks") or {}),
                       "expected_text": cold_ev.corpus.text_of(case["expected_sections"])})
    section = {
        "tool": "rageval", "version": cold_result["tool"]["version"], "config": f"examples/banhang/{CONFIG_NAME}",
        "golden": {k: cold_result["golden"].get(k) for k in ("name", "version", "subset", "n_total")},
        "cases": cold_result["summary"]["n_cases"], "models": {"generation": base.generation.model, "judge": base.judge.model},
        "concurrency": {"app": base.app.concurrency, "llm": base.llm.concurrency},
        "cold": modes["rules_first"]["cold"], "warm": modes["rules_first"]["warm"],
        "modes": {k: v for k, v in modes.items() if k != "rules_first"},
        "rules_first": rules_first_counts(cold_result, results["always"]),
        "per_case_calls": per_case_calls,
        "scores": {"judge_pass": m.get("judge_pass"), "faithfulness": m.get("faithfulness"),
                   "groundedness": m.get("groundedness")},
    }
    return {"section": section, "inputs": inputs, "judge_model": base.judge.model, "llm_cfg": base.llm}


def _context_texts(case: dict[str, Any], chunks: dict[str, Any]) -> list[str]:
    """The chunks the generator saw: the prefix of ``retrieved`` whose tokens add up to
    ``context_tokens`` (all of them when that is unknown). Texts come from the RunResult's chunk
    table unless the item carries its own."""
    retrieved = [{**r, "text": r["text"] if "text" in r else chunks[r["chunk_id"]]["text"]}
                 for r in case["retrieved"] or []]
    budget = case.get("context_tokens")
    if budget is None:
        return [r["text"] for r in retrieved]
    out, total = [], 0
    for r in retrieved:
        if total >= budget:
            break
        out.append(r["text"])
        total += r.get("tokens") or 0
    return out or [r["text"] for r in retrieved]


def run_ours_faithfulness(server: OpenAIServer, recorder: Recorder, workdir: Path, inputs: list[dict[str, Any]],
                          model: str, llm_cfg: Any) -> dict[str, Any]:
    """rageval's faithfulness check alone over ``inputs``, cold then warm (same cache dir)."""
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": BENCH_KEY}
    cache = workdir / "faithfulness-cache"
    out: dict[str, Any] = {"tool": "rageval", "metric": "faithfulness (check_faithfulness)", "cases": len(inputs)}
    for phase in ("cold", "warm"):
        client = LLMClient(llm_cfg, env=env, cache_dir=cache)
        mark = recorder.mark()
        started = time.perf_counter()

        def one(item: dict[str, Any], client: LLMClient = client) -> Any:
            return check_faithfulness(client, model, item["question"], item["answer"], item["contexts"],
                                      item["expected_text"], case_id=item["id"])

        with ThreadPoolExecutor(max_workers=max(1, llm_cfg.concurrency)) as pool:
            checks = list(pool.map(one, inputs))
        wall = time.perf_counter() - started
        out[phase] = {"wall_s": round(wall, 3), **_per_case(recorder.since(mark), len(inputs), lambda c: c.kind)}
        if phase == "cold":
            out["scores"] = {"groundedness": _mean([c.details.get("groundedness") for c in checks]),
                             "faithfulness": _mean([c.details.get("faithfulness") for c in checks]),
                             "errors": sum(1 for c in checks if c.status == "error")}
    return out


def run_gate_rerun(server: OpenAIServer, workdir: Path, *, subset: str) -> dict[str, Any]:
    """``rageval gate`` on the example twice, no baseline: the second, unchanged run answers from the
    cache and re-runs the failing cases with the cache bypassed. Its report must count those re-run
    calls exactly as the server did."""
    project = workdir / "banhang-gate"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".rageval-cache"))
    cfg = load_config(project / CONFIG_NAME)
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": BENCH_KEY}
    runs = []
    for _ in range(2):
        before = server.calls["chat"]
        outcome = flow.gate(cfg, None, evaluation=prepare(cfg, subset=subset, env=env))
        cost = outcome.candidate.cost
        runs.append({"server_calls": server.calls["chat"] - before, "first_run_calls": cost.calls_total,
                     "rerun_calls": cost.rerun.calls_total if cost.rerun else 0,
                     "verdict_rerun_calls": outcome.verdict.reran.cost.calls_total if outcome.verdict.reran.cost else 0,
                     "cases_rechecked": len(outcome.verdict.reran.targeted),
                     "report_line": next((line for line in outcome.markdown.splitlines()
                                          if line.startswith("**Re-run cost**")), None)})
    warm = runs[1]
    return {"subset": subset, "cold": runs[0], "unchanged": warm,
            "agrees": warm["first_run_calls"] == 0 and warm["rerun_calls"] == warm["verdict_rerun_calls"]
                      == warm["server_calls"] > 0}


# --- Ragas and DeepEval -------------------------------------------------------------------------

def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:  # noqa: BLE001 - a missing distribution is simply "unknown"
        return None


def not_installed(tool: str, exc: ImportError) -> dict[str, Any]:
    """The record for a tool that does not import: ``not installed`` when the package itself is
    missing, ``import failed`` when it is there but one of its dependencies breaks the import."""
    missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == tool
    return {"tool": tool, "version": _version(tool), "status": "not installed" if missing else "import failed",
            "error": f"{type(exc).__name__}: {exc}",
            "install": f"python -m venv /tmp/benchvenv --system-site-packages && /tmp/benchvenv/bin/{PIP[tool]}"}


async def _gather_bounded(items: list[Any], fn: Callable[[Any], Any], concurrency: int) -> list[Any]:
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(item: Any) -> Any:
        async with sem:
            return await fn(item)

    return await asyncio.gather(*(one(i) for i in items), return_exceptions=True)


def _ragas_runner(base_url: str, model: str) -> tuple[str, Callable[[dict[str, Any]], Any]]:
    from openai import AsyncOpenAI
    from ragas.llms import llm_factory
    from ragas.metrics.collections import Faithfulness

    client = AsyncOpenAI(base_url=base_url, api_key=BENCH_KEY, max_retries=0)
    metric = Faithfulness(llm=llm_factory(model, client=client))

    async def score(item: dict[str, Any]) -> float:
        result = await metric.ascore(user_input=item["question"], response=item["answer"],
                                     retrieved_contexts=item["contexts"])
        return float(result.value)

    return "Faithfulness (ragas.metrics.collections)", score


def _deepeval_runner(base_url: str, model: str) -> tuple[str, Callable[[dict[str, Any]], Any]]:
    from deepeval.metrics import FaithfulnessMetric
    try:
        from deepeval.models import OpenAIModel as GPTModel
    except ImportError:                      # DeepEval before the GPTModel -> OpenAIModel rename
        from deepeval.models import GPTModel
    from deepeval.test_case import LLMTestCase

    llm = GPTModel(model=model, api_key=BENCH_KEY, base_url=base_url)

    async def score(item: dict[str, Any]) -> float:
        metric = FaithfulnessMetric(model=llm, async_mode=True)   # one per case: the metric holds state
        case = LLMTestCase(input=item["question"], actual_output=item["answer"], retrieval_context=item["contexts"])
        await metric.a_measure(case, _show_indicator=False)
        return float(metric.score)

    return "FaithfulnessMetric", score


RUNNERS = {"ragas": _ragas_runner, "deepeval": _deepeval_runner}


def run_external(tool: str, server: OpenAIServer, recorder: Recorder, inputs: list[dict[str, Any]], model: str,
                 concurrency: int) -> dict[str, Any]:
    """Ragas' or DeepEval's faithfulness over ``inputs`` against ``server``, twice (the second run
    shows whether anything is cached). ``"not installed"`` when the package does not import."""
    os.environ.update(OFFLINE_ENV)
    try:
        metric_name, score = RUNNERS[tool](server.base_url, model)
    except ImportError as exc:
        return not_installed(tool, exc)
    out: dict[str, Any] = {"tool": tool, "version": _version(tool), "metric": metric_name, "model": model,
                           "cases": len(inputs), "openai_sdk": _version("openai"), "status": "ok"}
    for phase in ("cold", "warm"):
        mark = recorder.mark()
        started = time.perf_counter()
        scores = asyncio.run(_gather_bounded(inputs, score, concurrency))
        wall = time.perf_counter() - started
        errors = [f"{item['id']}: {type(s).__name__}: {s}" for item, s in zip(inputs, scores)
                  if isinstance(s, BaseException)]
        calls = recorder.since(mark)
        out[phase] = {"wall_s": round(wall, 3), **_per_case(calls, len(inputs), lambda c: c.kind),
                      "errors": len(errors)}
        if phase == "cold":
            values = [s for s in scores if not isinstance(s, BaseException)]
            out["scores"] = {"faithfulness": _mean(values),
                             "nan": sum(1 for v in values if math.isnan(v)),
                             "errors": len(errors), "first_errors": errors[:3]}
    if out["cold"]["errors"]:
        out["status"] = "errors"
    return out


# --- results ------------------------------------------------------------------------------------

def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:g}" if x == int(x) else f"{x:.2f}"
    return str(x)


def _row(tool: str, metric: str, run: dict[str, Any]) -> str:
    cold, warm = run["cold"], run["warm"]
    return (f"| {tool} | {metric} | {_fmt(cold['calls_per_case']['total'])} | "
            f"{cold['prompt_tokens_per_case']['total']:,.0f} | {cold['wall_s']:.1f} | {warm['calls_total']} |")


def _split(run: dict[str, Any]) -> str:
    per = run["cold"]["calls_per_case"]
    return " + ".join(f"{s} {_fmt(per[s])}" for s in ("generation", "judge", "faithfulness") if per.get(s))


def table(results: dict[str, Any]) -> str:
    """The markdown table for the README."""
    rows = ["| tool | metric | calls/case | prompt tokens/case | wall s | calls on an unchanged re-run |",
            "|---|---|---:|---:|---:|---:|"]
    ours = results.get("ours")
    if ours:
        name = f"rageval {ours['version']}"
        rows.append(_row(name, f"{MODES['rules_first'][1]} ({_split(ours)})", ours))
        for mode, run in (ours.get("modes") or {}).items():
            rows.append(_row(name, f"{run['label']} ({_split(run)})", run))
        f = ours.get("faithfulness_only")
        if f:
            rows.append(_row(name, "faithfulness only, separate path (claims, then one check against context *and* "
                                   "expected sections)", f))
    for tool in ("ragas", "deepeval"):
        r = results.get(tool)
        if not r:
            continue
        if r.get("status") not in ("ok", "errors"):
            rows.append(f"| {tool} | {r.get('metric', 'faithfulness')} | {r['status']}: {r.get('error', '')[:80]} | | | |")
            continue
        rows.append(_row(f"{'Ragas' if tool == 'ragas' else 'DeepEval'} {r['version']}", f"`{r['metric']}`", r))
    return "\n".join(rows)


def merge_results(path: Path, new: dict[str, Any]) -> dict[str, Any]:
    """Sections of ``new`` replace those in the file at ``path`` (others are kept); written atomically."""
    old: dict[str, Any] = {}
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            old = {}
    merged = {**old, **new}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(merged, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return merged


def bench(only: str, cases: int | None, subset: str | None, latency_ms: float) -> dict[str, Any]:
    tools = TOOLS if only == "all" else (only,)
    if only != "ours":
        os.environ.update(OFFLINE_ENV)     # before Ragas / DeepEval are imported
    recorder = Recorder()
    out: dict[str, Any] = {}
    with LoopbackGuard() as guard, OpenAIServer(responder=recorder, latency_s=latency_ms / 1000) as server, \
            tempfile.TemporaryDirectory(prefix="rageval-bench-") as tmp:
        ours = run_ours(server, recorder, Path(tmp), cases=cases, subset=subset)
        if "ours" in tools:
            section = ours["section"]
            section["faithfulness_only"] = run_ours_faithfulness(server, recorder, Path(tmp), ours["inputs"],
                                                                 ours["judge_model"], ours["llm_cfg"])
            section["gate_rerun"] = run_gate_rerun(server, Path(tmp), subset=subset or "pr")
            out["ours"] = section
        for tool in tools:
            if tool == "ours":
                continue
            cwd = os.getcwd()
            os.chdir(tmp)          # DeepEval writes a .deepeval/ folder into the working directory
            try:
                out[tool] = run_external(tool, server, recorder, ours["inputs"], ours["judge_model"],
                                         ours["llm_cfg"].concurrency)
            except Exception as exc:  # noqa: BLE001 - a tool that breaks is a recorded result
                out[tool] = {"tool": tool, "version": _version(tool), "status": "failed",
                             "error": f"{type(exc).__name__}: {exc}"}
            finally:
                os.chdir(cwd)
        unknown = [c.kind for c in recorder.calls if c.kind == "unknown"]
    for section in out.values():
        section["network_blocked"] = list(guard.blocked)
        section["unrecognised_prompts"] = len(unknown)
        section["environment"] = {"python": platform.python_version(), "interpreter": sys.executable,
                                  "openai_sdk": _version("openai"), "server_latency_ms": latency_ms,
                                  "subset": subset, "cases_limit": cases,
                                  "command": "python bench/bench_model.py " + " ".join(sys.argv[1:])}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=None, help="first N cases only (default: all)")
    parser.add_argument("--subset", default=None, help="golden subset tag, e.g. pr (default: all cases)")
    parser.add_argument("--only", choices=("all",) + TOOLS, default="all")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="server delay per request (default 50)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"results JSON, merged (default {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    if args.cases is not None and args.cases < 1:
        parser.error("--cases must be at least 1")
    if not 0 <= args.latency_ms <= 5000:
        parser.error("--latency-ms must be between 0 and 5000")
    results = bench(args.only, args.cases, args.subset, args.latency_ms)
    merged = merge_results(Path(args.out), results)
    print(table(merged))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

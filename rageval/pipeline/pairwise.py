"""Pairwise judging of two runs: for each case both runs answered, which answer is better.

Each case is asked twice (:func:`rageval.metrics.judge.judge_pair`): once with the baseline's
answer shown as A, once with the candidate's as A. A preference counts only when both orders give
the same one; otherwise the case is ``disagree`` (the judge followed the position, not the
answers). The judge gets what the per-case judge gets — question, expected answer and the expected
sections' text from the config's corpus — and is the configured ``judge.model``, which must be
neither run's generator (unless ``judge.allow_same_model``): a model prefers its own answers.

Compared: the cases both RunResults hold with the same question, expected answer and expected
sections, and that both answered (no error, an answer). The others are listed with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rageval.cost import Cost
from rageval.errors import ConfigError, ModelError, ResultError
from rageval.golden.corpus import Corpus, load_corpus
from rageval.metrics.judge import judge_pair
from rageval.models import same_model
from rageval.pipeline.llm import LLMClient
from rageval.records import CaseResult
from rageval.results import RunResult
from rageval.settings import Config

#: a case's outcome: which answer both orders preferred, ``tie``, ``disagree`` (the orders gave
#: different verdicts) or ``error`` (a call failed, its reply was unreadable twice, or the judge refused)
OUTCOMES = ("baseline", "candidate", "tie", "disagree", "error")
SIDE = {"a": "baseline", "b": "candidate", "tie": "tie", None: None}
NO_JUDGE = ("{config}: judge.model is not set, so there is no judge to compare the two runs. Set judge.model "
            "(a different model from the ones that wrote the answers).")
SAME_MODEL = ("{config}: judge.model '{judge}' is the model that wrote the {role}'s answers ({label}: "
              "generation.model '{generator}'). A model judging its own answers favours them; use a different "
              "judge.model, or set judge.allow_same_model: true.")
NOTHING_COMMON = ("{baseline} and {candidate} have no case in common that both answered ({skipped} cases not "
                  "comparable), so there is nothing to judge. Compare two runs of the same golden set.")
ALL_FAILED = "the pairwise judge failed on every one of the {n} cases; the first: {error}"


@dataclass(frozen=True)
class PairVerdict:
    """One case: the outcome, the judge's pick in each order (``first``: the baseline shown as A;
    ``second``: the candidate shown as A), and the error, if any."""

    id: str
    outcome: str
    first: str | None = None
    second: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "outcome": self.outcome, "first": self.first, "second": self.second,
                "error": self.error}


@dataclass(frozen=True)
class PairReport:
    """The pairwise judgement of two runs: per case, totals, the cases not compared, the cost."""

    judge_model: str
    baseline: str                                   # how the runs are named (their files)
    candidate: str
    cases: tuple[PairVerdict, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)     # case id -> why it was not compared
    cost: Cost = field(default_factory=Cost)

    @property
    def totals(self) -> dict[str, int]:
        return {outcome: sum(1 for c in self.cases if c.outcome == outcome) for outcome in OUTCOMES}

    def to_dict(self) -> dict[str, Any]:
        return {"judge_model": self.judge_model, "baseline": self.baseline, "candidate": self.candidate,
                "totals": self.totals, "cases": [c.to_dict() for c in self.cases], "skipped": dict(self.skipped),
                "cost": self.cost.to_dict()}


def _generator(result: RunResult) -> str | None:
    """The model that wrote a run's answers, as its config records it: the builtin app's
    ``generation.model`` with provider openai (None: the extractive generator, or the user's own
    app, whose model rageval does not know)."""
    config = result.config if isinstance(result.config, Mapping) else {}
    app, gen = config.get("app"), config.get("generation")
    if not isinstance(app, Mapping) or app.get("type", "builtin") != "builtin" \
            or not isinstance(gen, Mapping) or gen.get("provider") != "openai":
        return None
    model = gen.get("model")
    return model if isinstance(model, str) and model.strip() else None


def check_judge(cfg: Config, runs: Mapping[str, tuple[RunResult, str]]) -> str:
    """The judge model; ConfigError when none is set or it wrote one run's answers."""
    judge = cfg.judge.model
    if not judge:
        raise ConfigError(NO_JUDGE.format(config=cfg.path))
    for role, (result, label) in runs.items():
        generator = _generator(result)
        if generator and same_model(generator, judge) and not cfg.judge.allow_same_model:
            raise ConfigError(SAME_MODEL.format(config=cfg.path, judge=judge, role=role, label=label,
                                                generator=generator))
    return judge


def _why_not(base: CaseResult | None, cand: CaseResult | None) -> str | None:
    if base is None or cand is None:
        return f"not in the {'baseline' if base is None else 'candidate'}"
    if (base.question, base.expected_answer, tuple(base.expected_sections)) != \
            (cand.question, cand.expected_answer, tuple(cand.expected_sections)):
        return "the case differs between the runs (question, expected answer or expected sections)"
    for role, case in (("baseline", base), ("candidate", cand)):
        if case.error is not None or case.answer is None:
            return f"no answer in the {role}" + (" (the app errored)" if case.error is not None else "")
    return None


def common_cases(baseline: RunResult, candidate: RunResult) -> tuple[list[tuple[CaseResult, CaseResult]], dict[str, str]]:
    """(baseline case, candidate case) pairs to judge, in the candidate's order, and why the others are not."""
    pairs, skipped = [], {}
    ids = [*candidate.case_map, *(i for i in baseline.case_map if i not in candidate.case_map)]
    for case_id in ids:
        base, cand = baseline.case_map.get(case_id), candidate.case_map.get(case_id)
        why = _why_not(base, cand)
        if why is None:
            pairs.append((base, cand))
        else:
            skipped[case_id] = why
    return pairs, skipped


def _judge_one(client: Any, model: str, corpus: Corpus, base: CaseResult, cand: CaseResult) -> PairVerdict:
    found = judge_pair(client, model, cand.question, cand.expected_answer, corpus.text_of(cand.expected_sections),
                       base.answer or "", cand.answer or "", case_id=cand.id)
    first, second = SIDE[found["first"]], SIDE[found["second"]]
    if found["error"]:
        return PairVerdict(cand.id, "error", first, second, found["error"])
    return PairVerdict(cand.id, SIDE[found["winner"]] if found["agreed"] else "disagree", first, second)


def judge_runs(cfg: Config, baseline: tuple[RunResult, str], candidate: tuple[RunResult, str], *,
               env: Mapping[str, str], client: Any = None, corpus: Corpus | None = None) -> PairReport:
    """Judge every comparable case of two runs in both orders (see the module docstring).
    ``baseline`` / ``candidate``: (RunResult, how to name it). ``env``: what the model client may
    read (its API key). Raises ConfigError (no judge, or the judge wrote one run's answers),
    ResultError (no comparable case) and ModelError (every case failed)."""
    model = check_judge(cfg, {"baseline": baseline, "candidate": candidate})
    pairs, skipped = common_cases(baseline[0], candidate[0])
    if not pairs:
        raise ResultError(NOTHING_COMMON.format(baseline=baseline[1], candidate=candidate[1], skipped=len(skipped)))
    corpus = corpus if corpus is not None else load_corpus(cfg.corpus, cfg.root)
    client = client if client is not None else LLMClient(cfg.llm, env=env)
    before = client.ledger()
    with ThreadPoolExecutor(max_workers=max(1, min(cfg.llm.concurrency, len(pairs)))) as pool:
        verdicts = tuple(pool.map(lambda pair: _judge_one(client, model, corpus, *pair), pairs))
    errors = [v.error for v in verdicts if v.outcome == "error"]
    if len(errors) == len(verdicts):
        raise ModelError(ALL_FAILED.format(n=len(verdicts), error=errors[0]))
    return PairReport(model, baseline[1], candidate[1], verdicts, skipped,
                      Cost.of(client.ledger().since(before), len(verdicts)))

"""Model-backed checks wired into the runner, and the judge's admission to the gate.

* :class:`CaseJudge` is what the runner asks for a case's model-backed checks; the default one
  reports the judge skipped. :class:`ModelJudge` is the runner's judge when ``judge.model`` is
  set: per case it runs the judge verdict and, with ``judge.faithfulness``, the claim check, over
  the context the generator actually saw — by default in the judge's one call
  (``judge.faithfulness_calls: judge``), or in two calls of its own (``separate``). Rules come
  first: a case that already fails a deterministic rule (numbers, must_include, must_not_include,
  refusal) is not sent to the judge or to faithfulness — both read "not judged: failed rules" —
  unless ``judge.always`` is true. ``fresh`` (the gate's re-runs) makes every call bypass the
  response cache. When the endpoint says it served the judge call with the generator's model
  (``rageval.models.same_model``; an alias resolved to it), the run is refused (``ConfigError``
  naming the served model) unless ``judge.allow_same_model``.
* :func:`load_labels` reads people's pass/fail labels (for ``rageval judge-agreement``).
* :func:`judge_gate_allowed` refuses to gate on the judge when ``judge.min_agreement`` is set and
  the measured agreement (``judge.agreement_file``) is missing or below it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from rageval.errors import ConfigError, DatasetError
from rageval.golden.set import Case
from rageval.metrics.faithfulness import check_faithfulness, judge_with_claims
from rageval.metrics.judge import judge_case
from rageval.metrics.labels import parse_labels
from rageval.models import same_model
from rageval.parse import finite, load_json, read_bytes
from rageval.pipeline.apps import Trace
from rageval.pipeline.llm import LLMClient
from rageval.records import CheckResult
from rageval.settings import JudgeConfig

NO_MODEL = "no model configured (judge.model)"
NOT_JUDGED = "not judged: failed rules ({rules}); judge.always: true judges these too"
NO_AGREEMENT_FILE = ("judge.min_agreement is {floor:g} but judge.agreement_file is not set, so the judge's agreement "
                     "with people is unknown. Label a sample, run `rageval judge-agreement --out agreement.json` and "
                     "set judge.agreement_file: agreement.json.")
AGREEMENT_MISSING = ("judge.agreement_file {path} does not exist, so the judge's agreement with people is unknown. "
                     "Run `rageval judge-agreement --out {path}` first.")
AGREEMENT_UNREADABLE = ("judge.agreement_file {path} is not an agreement report ({problem}). Re-create it with "
                        "`rageval judge-agreement --out {path}`.")
AGREEMENT_LOW = ("the judge agrees with people on {agreement:.0%} of {n} labelled cases{kappa}, below "
                 "judge.min_agreement {floor:.0%}: judge_pass is not used to gate. Improve the judge (prompt, "
                 "model) and re-measure, or lower judge.min_agreement.")
SERVED_GENERATOR = ("judge.model '{judge}': the endpoint served '{served}', which is the generator's model "
                    "(generation.model '{generator}'). A model grading its own answers favours them; point judge.model "
                    "at another model, or set judge.allow_same_model: true.")
AGREEMENT_OK = "the judge agrees with people on {agreement:.0%} of {n} labelled cases{kappa} (floor {floor:.0%})"


class CaseJudge:
    """Model-backed checks of one case (judge, faithfulness). The default reports them skipped.
    ``failed_rules``: the deterministic checks the case already fails."""

    def check(self, case: Case, trace: Trace, expected_text: str,
              failed_rules: Sequence[str] = (), *, fresh: bool = False) -> dict[str, CheckResult]:
        return {"judge": CheckResult.skipped(NO_MODEL)}


class ModelJudge(CaseJudge):
    """The judge (and optionally faithfulness) for every answered case."""

    def __init__(self, client: LLMClient, cfg: JudgeConfig, generator: str | None = None) -> None:
        if cfg.model and client is None:
            raise ValueError("ModelJudge needs a model client when judge.model is set")
        self.client = client
        self.cfg = cfg
        self.generator = None if cfg.allow_same_model else generator

    def check(self, case: Case, trace: Trace, expected_text: str,
              failed_rules: Sequence[str] = (), *, fresh: bool = False) -> dict[str, CheckResult]:
        model, cfg = self.cfg.model, self.cfg
        names = ("judge", "faithfulness") if cfg.faithfulness else ("judge",)
        if not model or (failed_rules and not cfg.always):
            reason = NOT_JUDGED.format(rules=", ".join(failed_rules)) if model else NO_MODEL
            return {name: CheckResult.skipped(reason) for name in names}
        answer = trace.answer or ""
        context = [r.text for r in trace.context]
        if cfg.faithfulness and cfg.faithfulness_calls == "judge":
            judge, faithfulness = judge_with_claims(self.client, model, case.question, case.expected_answer,
                                                    expected_text, answer, context, case_id=case.id, fresh=fresh)
            return self._not_the_generator({"judge": judge, "faithfulness": faithfulness})
        out = {"judge": judge_case(self.client, model, case.question, case.expected_answer, expected_text, answer,
                                   case_id=case.id, fresh=fresh)}
        if cfg.faithfulness:
            out["faithfulness"] = check_faithfulness(self.client, model, case.question, answer, context,
                                                     expected_text, case_id=case.id, fresh=fresh)
        return self._not_the_generator(out)

    def _not_the_generator(self, checks: dict[str, CheckResult]) -> dict[str, CheckResult]:
        """``checks``, unless a judge call was served by the generator's model (then ConfigError)."""
        for check in checks.values():
            served = check.details.get("model")
            if self.generator and isinstance(served, str) and same_model(served, self.generator):
                raise ConfigError(SERVED_GENERATOR.format(judge=self.cfg.model, served=served,
                                                          generator=self.generator))
        return checks


def load_labels(path: str | os.PathLike[str]) -> dict[str, bool]:
    """People's verdicts: case id -> True (pass) / False (fail).

    ``.jsonl``: one ``{"id": "q01", "label": "pass"}`` per line; ``.yaml`` / ``.yml`` / ``.json``:
    a mapping ``{q01: pass, q02: fail}``. DatasetError names the file and line of a bad entry.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: labels file not found. Write one line per case, "
                           "{\"id\": \"q01\", \"label\": \"pass\"}, or a YAML mapping `q01: pass`.")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read the labels file ({exc}).") from None
    if path.suffix.lower() not in (".jsonl", ".yaml", ".yml", ".json"):
        raise DatasetError(f"{path}: unknown labels format '{path.suffix}'. Use .jsonl, .yaml, .yml or .json.")
    return parse_labels(text, str(path), jsonl=path.suffix.lower() == ".jsonl")


def judge_gate_allowed(cfg: JudgeConfig) -> tuple[bool, str]:
    """Whether judge_pass may gate. Allowed when ``judge.min_agreement`` is not set; otherwise the
    agreement report at ``judge.agreement_file`` (JSON with a numeric ``agreement`` in [0, 1], and
    optionally ``n`` and ``kappa``) must exist and reach the floor. Returns (allowed, why)."""
    floor = cfg.min_agreement
    if floor is None:
        return True, "judge.min_agreement is not set"
    if cfg.agreement_file is None:
        return False, NO_AGREEMENT_FILE.format(floor=floor)
    path = Path(cfg.agreement_file)
    if not path.is_file():
        return False, AGREEMENT_MISSING.format(path=path)
    try:
        data = load_json(read_bytes(path, error=DatasetError), str(path), error=DatasetError)
    except DatasetError as exc:
        return False, AGREEMENT_UNREADABLE.format(path=path, problem=f"not JSON: {exc}")
    value = data.get("agreement") if isinstance(data, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value) or not 0 <= value <= 1:
        return False, AGREEMENT_UNREADABLE.format(path=path, problem="no number 'agreement' between 0 and 1")
    n = data.get("n", "?")
    kappa = data.get("kappa")
    kappa_part = f", kappa {kappa:.2f}" if isinstance(kappa, (int, float)) and not isinstance(kappa, bool) else ""
    if value < floor:
        return False, AGREEMENT_LOW.format(agreement=value, n=n, kappa=kappa_part, floor=floor)
    return True, AGREEMENT_OK.format(agreement=value, n=n, kappa=kappa_part, floor=floor)

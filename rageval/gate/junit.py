"""The verdict as a JUnit XML report (``rageval gate --junit FILE``), for GitLab's merge-request
test widget, Jenkins and the test-report actions.

Three suites, every testcase named so a reader can find it again:

* ``golden cases`` — one testcase per golden case of the candidate run, classname the golden set's
  name: a failing case is a ``<failure>`` whose type lists its failing checks and whose text shows
  the checks' reasons, the question, expected and given answers; a case whose app call errored is
  an ``<error>``; a *known failure* (failing on main too, not blocking: the verdict's
  ``known_failures``) is ``<skipped>``. Cases tagged ``holdout`` are never described (nor named),
  as in the PR comment: one ``holdout cases`` testcase counts them.
* ``gated metrics`` — one testcase per metric with a floor or a max drop, then per gated
  (slice, metric): a ``<failure>`` when the row blocks, ``<skipped>`` when it has no value (n/a) or
  too few cases; a breach reported but not blocking passes, its reason in ``<system-out>``.
* ``gate`` — one ``verdict`` testcase, a ``<failure>`` listing the blocking reasons when the gate
  blocks: whatever blocked (policy drift, missing cases, errors…), the report is never all green
  for a blocked change.

Valid against the JUnit schema Jenkins' xUnit plugin publishes (``junit-10.xsd``), which GitLab's
parser and the test-report actions read too. Text from answers and golden files is made printable
(``rageval.gate.markdown.printable``) and rid of what XML 1.0 cannot hold, then escaped by the
serializer; each piece is cut to the PR comment's bounds.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rageval.gate.format import fmt, fmt_delta
from rageval.gate.markdown import ANSWER_MAX_CHARS, FIELD_MAX_CHARS, INLINE_MAX_CHARS, cut, printable
from rageval.gate.report import known_blocking
from rageval.gate.tables import THRESHOLD_RULES
from rageval.gate.verdict import MetricRow, Reason, SliceRow, Threshold, Verdict
from rageval.golden.set import is_holdout
from rageval.records import CaseResult
from rageval.results import RunResult

#: characters XML 1.0 cannot carry at all (printable() already made the C0/C1 controls visible)
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
MESSAGE_MAX_CHARS = 300                 # a failure's message attribute: one line


def text(value: object, limit: int | None = INLINE_MAX_CHARS) -> str:
    """Untrusted text fit for an XML attribute or element: cut, control and bidi characters made
    visible, lone surrogates and U+FFFE/U+FFFF written as ``U+D800``."""
    s = printable(cut(str(value), limit), newlines=True)
    return _NOT_XML.sub(lambda m: f"U+{ord(m.group()):04X}", s)


@dataclass
class _Suite:
    name: str
    element: ET.Element
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    time: float = 0.0

    def case(self, classname: str, name: str, seconds: float = 0.0) -> ET.Element:
        self.tests += 1
        self.time += seconds
        return ET.SubElement(self.element, "testcase", classname=text(classname, 200), name=text(name, 200),
                             time=_seconds(seconds))

    def outcome(self, testcase: ET.Element, kind: str, message: str, body: str = "", type_: str = "") -> None:
        """Mark ``testcase`` failure | error | skipped."""
        self.failures += kind == "failure"
        self.errors += kind == "error"
        self.skipped += kind == "skipped"
        attrs = {"message": text(message, MESSAGE_MAX_CHARS)}
        if type_:
            attrs["type"] = text(type_, 200)
        ET.SubElement(testcase, kind, attrs).text = text(body, None) if body else None


def _seconds(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def _new_suite(root: ET.Element, name: str, timestamp: str | None) -> _Suite:
    element = ET.SubElement(root, "testsuite", name=name)
    if timestamp:
        element.set("timestamp", text(timestamp, 64))
    return _Suite(name, element)


def _close(suite: _Suite) -> None:
    for key in ("tests", "failures", "errors", "skipped"):
        suite.element.set(key, str(getattr(suite, key)))
    suite.element.set("time", _seconds(suite.time))


# --- golden cases ----------------------------------------------------------------------------

def _failing(case: CaseResult) -> list[str]:
    return [name for name, check in case.checks.items() if check.status in ("fail", "error")]


def _case_body(case: CaseResult, verdict: Verdict, base: CaseResult | None) -> str:
    lines = [f"error: {case.error}"] if case.error is not None else []
    lines += list(case.failures) or [f"{n}: {case.checks[n].reason or case.checks[n].status}" for n in _failing(case)]
    lines = [text(line) for line in lines]           # each cut: a reason may quote a whole answer
    if case.id in verdict.pass_to_fail:
        lines.append("passed on the baseline (pass → fail)")
    if case.id in verdict.flaky:
        lines.append("flaky: its outcome changed in a re-run")
    before = base.first_relevant_rank if base is not None else None
    if base is not None and before != case.first_relevant_rank:
        lines.append(f"first relevant rank: {before or 'none'} → {case.first_relevant_rank or 'none'}")
    lines.append(f"question: {text(case.question, FIELD_MAX_CHARS)}")
    if case.expected_answer:
        lines.append(f"expected: {text(case.expected_answer, FIELD_MAX_CHARS)}")
    lines.append(f"answer: {'(none)' if case.answer is None else text(case.answer, ANSWER_MAX_CHARS)}")
    return "\n".join(lines) + "\n"


def _golden_case(suite: _Suite, classname: str, case: CaseResult, verdict: Verdict, known: Collection[str],
                 base: CaseResult | None) -> None:
    testcase = suite.case(classname, case.id, (case.latency_ms or 0.0) / 1000)
    if case.error is not None or case.passed is None:
        suite.outcome(testcase, "error", f"error: {case.error or 'no verdict'}",
                      _case_body(case, verdict, base), "error")
    elif not case.passed:
        failing = _failing(case)
        message = "; ".join(case.failures) or ", ".join(failing)
        if case.id in known:
            suite.outcome(testcase, "skipped", f"known failure (fails on the baseline too, not blocking): {message}",
                          _case_body(case, verdict, base))
        else:
            suite.outcome(testcase, "failure", message, _case_body(case, verdict, base), ",".join(failing))


def _holdout_case(suite: _Suite, classname: str, cases: Sequence[CaseResult], known: Collection[str]) -> None:
    """Holdout cases counted, never described: one testcase for all of them."""
    testcase = suite.case(classname, "holdout cases", sum((c.latency_ms or 0.0) for c in cases) / 1000)
    bad = [c for c in cases if not c.passed]
    if not bad:
        return
    what = f"{len(bad)} of {len(cases)} holdout cases did not pass (details hidden)"
    if all(c.id in known for c in bad):
        suite.outcome(testcase, "skipped", f"known failures: {what}")
    else:
        suite.outcome(testcase, "failure", what, type_="holdout")


def _cases_suite(root: ET.Element, verdict: Verdict, candidate: RunResult, baseline: RunResult | None,
                 known: Collection[str]) -> _Suite:
    suite = _new_suite(root, "golden cases", candidate.created_at)
    classname = candidate.golden.name
    base_cases = baseline.case_map if baseline is not None else {}
    hidden = []
    for case in candidate.cases:
        base = base_cases.get(case.id)
        if is_holdout(case, base):
            hidden.append(case)
        else:
            _golden_case(suite, classname, case, verdict, known, base)
    if hidden:
        _holdout_case(suite, classname, hidden, known)
    return suite


# --- gated metrics ---------------------------------------------------------------------------

def _threshold_text(threshold: Threshold | None) -> str:
    if threshold is None:
        return ""
    parts = ([f"floor {fmt(threshold.floor)}"] if threshold.floor is not None else []) + (
        [f"max drop {fmt(threshold.max_drop)}"] if threshold.max_drop is not None else [])
    return ", ".join(parts)


def _row_line(row: MetricRow | SliceRow) -> str:
    return (f"{fmt(row.baseline)} → {fmt(row.candidate, row.baseline)} (Δ {fmt_delta(row.delta)}); "
            f"{_threshold_text(row.threshold)}")


def _metric_case(suite: _Suite, name: str, row: MetricRow | SliceRow, reasons: Sequence[Reason]) -> None:
    testcase = suite.case("rageval.metrics", name)
    said = "\n".join(text(r.message) for r in reasons)
    if row.status == "fail":
        blocking = next((r for r in reasons if r.blocking), None)
        suite.outcome(testcase, "failure", blocking.message if blocking else f"{name}: {_row_line(row)}",
                      f"{name}: {_row_line(row)}\n{said}\n", blocking.rule if blocking else "threshold")
    elif row.status in ("n/a", "insufficient_data"):
        why = "too few cases in the slice" if row.status == "insufficient_data" else "no value in this run (n/a)"
        suite.outcome(testcase, "skipped", f"{name}: {why}")
    else:
        ET.SubElement(testcase, "system-out").text = text(f"{name}: {_row_line(row)}\n{said}".strip() + "\n", None)


def _metrics_suite(root: ET.Element, verdict: Verdict, timestamp: str | None) -> _Suite:
    suite = _new_suite(root, "gated metrics", timestamp)

    def about(slice_key: str | None, metric: str) -> list[Reason]:
        return [r for r in verdict.reasons if r.metric == metric and r.slice == slice_key and r.case is None
                and r.rule in THRESHOLD_RULES]
    for row in verdict.metrics:
        if row.gated:
            _metric_case(suite, row.metric, row, about(None, row.metric))
    for srow in verdict.by_slice:
        if srow.gated:
            _metric_case(suite, f"{srow.slice}: {srow.metric}", srow, about(srow.slice, srow.metric))
    return suite


# --- the verdict -----------------------------------------------------------------------------

def _gate_suite(root: ET.Element, verdict: Verdict, title: str, timestamp: str | None) -> _Suite:
    suite = _new_suite(root, "gate", timestamp)
    testcase = suite.case("rageval.gate", "verdict")
    lines = [text(f"{'BLOCK' if r.blocking else 'note '} {r.message}") for r in verdict.reasons]
    state = "" if verdict.state == verdict.verdict else f" (state {verdict.state})"
    body = f"{title}: {'blocked' if verdict.blocked else 'passed'}{state}\n" + "".join(f"{line}\n" for line in lines)
    if verdict.blocked:
        main = verdict.main_reason
        suite.outcome(testcase, "failure", f"{title}: blocked — {main.message if main else 'see the reasons'}",
                      body, ",".join(dict.fromkeys(r.rule for r in verdict.blocking_reasons)))
    else:
        ET.SubElement(testcase, "system-out").text = text(body, None)
    return suite


def render_junit(verdict: Verdict, candidate: RunResult, baseline: RunResult | None = None, *,
                 title: str = "rag-eval-gate") -> str:
    """The JUnit XML of a gate: ``verdict`` with the runs it compared (``candidate`` as decided,
    so a golden case it lacked is there, failing). The verdict's known failures (failing on the
    baseline too) are skipped, not failed, unless they block (``gate.known_failures: block``). The
    output depends on its inputs only (the timestamp is the candidate's ``created_at``)."""
    known = frozenset(() if known_blocking(verdict) else verdict.known_failures)
    root = ET.Element("testsuites", name=text(title, 200))
    suites = [_cases_suite(root, verdict, candidate, baseline, known),
              _metrics_suite(root, verdict, candidate.created_at),
              _gate_suite(root, verdict, title, candidate.created_at)]
    for suite in suites:
        _close(suite)
    for key in ("tests", "failures", "errors"):
        root.set(key, str(sum(getattr(s, key) for s in suites)))
    root.set("time", _seconds(sum(s.time for s in suites)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"   # write it as UTF-8

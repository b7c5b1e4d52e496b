"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` package, which
.ci/run installs) driven over the DevTools protocol (tests/browser.py). The page of the demo's
blocked gate loads from file:// with no console error and no request, its charts have one mark per
item, the filters narrow the cases table, a case opens from the keyboard and from a chart, and it
reads in the dark scheme and in print. Where no Chromium is installed these tests skip, loudly."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import builders
import pytest
from browser import Browser, find_chromium
from test_html_report import GATE, case, chunk, many
from test_trend import baseline as trend_baseline
from test_trend import chain

from rageval.cli import main
from rageval.gate.decide import verdict_on
from rageval.gate.page import render_html
from rageval.gate.verdict import Verdict
from rageval.results import load_result

CHROMIUM = find_chromium()
if CHROMIUM is None:
    MESSAGE = ("#### SKIPPED: the HTML report's browser tests did NOT run: no Chromium found "
               "(apt-get install chromium, or set RAGEVAL_CHROMIUM) ####")
    warnings.warn(MESSAGE, stacklevel=1)
    pytestmark = pytest.mark.skip(reason=MESSAGE)

READY = "document.documentElement.getAttribute('data-ready')"
VISIBLE_ROWS = "Array.from(document.querySelectorAll('#case-table tbody tr[data-i]')).filter(r => !r.hidden).length"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, copy_demo):
    """The demo's blocked gate, as the README runs it, with --html: (page, verdict, baseline, candidate)."""
    folder = tmp_path_factory.mktemp("demo")
    project = copy_demo(folder / "banhang")
    assert main(["baseline", "--config", str(project / "rageval.yml"), "--subset", "pr", "--out",
                 str(folder / "baseline.json")]) == 0
    assert main(["gate", "--config", str(project / "rageval-800.yml"), "--subset", "pr", "--baseline",
                 str(folder / "baseline.json"), "--out", str(folder / "verdict.json"), "--candidate-out",
                 str(folder / "candidate.json"), "--html", str(folder / "gate.html")]) == 1
    verdict = Verdict.from_json((folder / "verdict.json").read_bytes(), "verdict.json")
    return folder / "gate.html", verdict, load_result(folder / "baseline.json"), load_result(folder / "candidate.json")


@pytest.fixture(scope="module")
def browser():
    with Browser(CHROMIUM) as b:
        yield b


@pytest.fixture
def page(browser, demo):
    opened = browser.open(demo[0])
    assert opened.wait_for(READY) == "1"
    return opened


def test_the_demo_gate_page_loads_from_file_without_errors_or_requests(page, demo):
    assert page.errors == []
    assert page.requests == [demo[0].as_uri()]            # the page itself, nothing else
    assert page.evaluate("document.title") == "RAG eval gate: blocked"
    assert page.evaluate(VISIBLE_ROWS) == len(demo[3].cases) == 44


def test_the_charts_have_one_mark_per_item(page, demo):
    _, verdict, base, cand = demo
    pairs = [c for c in cand.cases if c.expected_sections and c.id in base.case_map]
    assert page.evaluate("document.querySelectorAll('.grid .dots circle').length") == len(pairs)
    p2f = [c for c in pairs if c.id in verdict.pass_to_fail]
    assert page.evaluate("document.querySelectorAll('.grid .dots circle.p2f').length") == len(p2f) == 2
    gated_with_ci = [r for r in verdict.metrics if r.gated and r.metric in verdict.stats.bootstrap]
    assert page.evaluate("document.querySelectorAll('svg.interval rect.ci').length") == len(gated_with_ci) == 3
    assert page.evaluate("document.querySelectorAll('svg.interval circle.pr').length") == 3
    effects = [v for m in verdict.attribution.metrics for e in m.effects for v in (e.alone, e.left_when_reverted)
               if v is not None]
    assert page.evaluate("document.querySelectorAll('svg.attr rect.bar').length") == len(effects) == 12
    cells = {(c.first_relevant_rank, base.case_map[c.id].first_relevant_rank) for c in pairs}
    assert page.evaluate("document.querySelectorAll('.grid a.cell').length") == len(cells)


def test_the_filters_narrow_the_table(page, demo):
    verdict, cand = demo[1], demo[3]
    page.evaluate("document.getElementById('f-q').focus()")
    page.type("q01")
    assert page.evaluate(VISIBLE_ROWS) == sum(1 for c in cand.cases if "q01" in c.id) == 1
    page.evaluate("const q = document.getElementById('f-q'); q.value = ''; q.dispatchEvent(new Event('input'))")
    page.evaluate("const s = document.getElementById('f-status'); s.value = 'pass_to_fail'; "
                  "s.dispatchEvent(new Event('change'))")
    assert page.evaluate(VISIBLE_ROWS) == len(verdict.pass_to_fail) == 3
    assert page.evaluate("document.getElementById('f-count').textContent") == "showing 3 of 44 cases"
    page.evaluate("const c = document.getElementById('f-check'); c.value = 'must_not_include'; "
                  "c.dispatchEvent(new Event('change'))")
    narrowed = [i for i in verdict.pass_to_fail if cand.case_map[i].status("must_not_include") == "fail"]
    assert 0 < page.evaluate(VISIBLE_ROWS) == len(narrowed) < 3
    page.evaluate("for (const id of ['f-status', 'f-check']) { const s = document.getElementById(id); s.value = ''; "
                  "s.dispatchEvent(new Event('change')) }")
    page.evaluate("document.getElementById('f-q').value = 'tra HANG'; "   # no diacritics, any case
                  "document.getElementById('f-q').dispatchEvent(new Event('input'))")
    assert 0 < page.evaluate(VISIBLE_ROWS) < 44


def test_a_case_opens_and_closes_with_the_keyboard_alone(page, demo):
    first = demo[3].cases[0]
    for _ in range(200):                                      # Tab from the top of the page to the first case
        page.key("Tab", 9)
        if page.evaluate("document.activeElement.closest('#case-table') !== null"):
            break
    assert page.evaluate("document.activeElement.textContent") == first.id
    page.key("Enter", 13, text="\r")
    page.wait_for("!!document.querySelector('.case-detail')")
    assert page.evaluate("document.activeElement.tagName + ' ' + document.activeElement.textContent") == f"H3 {first.id}"
    detail = page.evaluate("document.querySelector('.case-detail').innerText")
    assert first.question in detail and "Retrieved chunks" in detail and "Checks" in detail
    assert page.evaluate("document.querySelectorAll('.case-detail .side').length") == 2
    page.key("Escape", 27)
    assert page.evaluate("document.querySelector('.case-detail') === null")
    assert page.evaluate("document.activeElement.textContent") == first.id
    assert page.errors == []


def test_a_pass_to_fail_case_shows_both_answers_and_the_numbers_that_differ(page, demo):
    verdict, base, cand = demo[1], demo[2], demo[3]
    case_id = "q01"
    assert case_id in verdict.pass_to_fail
    page.evaluate(f"location.hash = 'case={case_id}'")
    page.wait_for("!!document.querySelector('.case-detail')")
    sides = page.evaluate("Array.from(document.querySelectorAll('.case-detail .side .answer')).map(a => a.textContent)")
    assert sides == [base.case_map[case_id].answer, cand.case_map[case_id].answer]
    marks = page.evaluate("Array.from(document.querySelectorAll('.case-detail .side')).map("
                          "s => Array.from(s.querySelectorAll('mark')).map(m => m.textContent))")
    assert marks == [["7 ngày"], ["30 ngày"]]
    expected = page.evaluate("document.querySelectorAll('.case-detail li.rel .chip.exp').length")
    assert expected >= 2                                      # DT-1 marked in the chunks of both runs
    reasons = page.evaluate("document.querySelector('.case-detail').innerText")
    for check in cand.case_map[case_id].checks.values():
        assert check.reason in reasons


def test_choosing_a_chart_mark_opens_or_lists_cases(page, demo):
    verdict = demo[1]
    page.evaluate("document.querySelector('.grid circle.p2f').dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    opened = page.wait_for("document.querySelector('.case-detail h3') && document.querySelector('.case-detail h3').textContent")
    assert opened in verdict.pass_to_fail
    page.key("Escape", 27)
    moved = page.evaluate("Array.from(document.querySelectorAll('.grid a.cell.moved')).map(c => "
                          "[c.getAttribute('data-before'), c.getAttribute('data-after'), +c.textContent])")
    before, after, count = moved[0]
    page.evaluate("document.querySelector('.grid a.cell.moved').focus()")
    page.key("Enter", 13, text="\r")
    assert page.evaluate(VISIBLE_ROWS) == count
    assert page.evaluate("document.getElementById('f-rank').textContent") == f"rank {before} → {after} ✕"


def test_the_dark_scheme_and_print(browser, demo):
    dark = browser.open(demo[0], dark=True)
    assert dark.wait_for(READY) == "1"
    rgb = dark.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert rgb == "rgb(13, 17, 23)"
    dark.send("Emulation.setEmulatedMedia", {"media": "print"})
    assert dark.evaluate("getComputedStyle(document.querySelector('.filters')).display") == "none"
    assert dark.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(255, 255, 255)"
    assert dark.pdf().startswith(b"%PDF")
    assert dark.errors == []


def test_a_compressed_page_reads_its_data_and_opens_a_case(browser, tmp_path):
    before = builders.run(many(600))
    after = builders.run([c.replace(answer=c.answer.replace("7 ngày", "30 ngày")) for c in many(600)])
    html = render_html(after, baseline=before, verdict=verdict_on(before, after, GATE))
    assert 'data-encoding="gzip-base64"' in html
    path = tmp_path / "big.html"
    path.write_text(html, encoding="utf-8")
    page = browser.open(path.as_uri() + "#case=q0450")          # past the first page of rows
    assert page.wait_for(READY) == "1"
    assert page.wait_for("document.querySelector('.case-detail h3').textContent") == "q0450"
    assert page.evaluate("Array.from(document.querySelectorAll('.case-detail mark')).map(m => m.textContent)") == \
        ["7 ngày", "30 ngày"]
    # 200 rows at a time (and the open one): a long table stays quick; "Show more" adds 200
    assert page.evaluate(VISIBLE_ROWS) == 201
    assert page.evaluate("document.getElementById('f-count').textContent") == \
        "showing 201 of 600 matching cases (600 in all)"
    page.key("Escape", 27)
    page.evaluate("document.getElementById('f-more').click()")
    assert page.evaluate(VISIBLE_ROWS) == 400
    page.evaluate("document.getElementById('f-q').value = 'q04'; document.getElementById('f-q').dispatchEvent(new Event('input'))")
    assert page.evaluate(VISIBLE_ROWS) == 100 and page.evaluate("document.getElementById('f-more').hidden")
    assert page.errors == []


def test_the_trend_chart_draws_every_baseline_and_marks_the_golden_version_change(browser, tmp_path):
    newest = chain(trend_baseline(0.9, sha="a" * 40, version=3), trend_baseline(0.8, sha="b" * 40, version=4),
                   trend_baseline(0.85, sha="c" * 40, version=4))
    pr = builders.run([case("q01", 1, "ok", [chunk("c1", "DT-1")])], sha="d" * 40, version=4,
                      config={"gate": {"floors": {"hit@3": 0.9}, "max_drop": {"mrr@5": 0.03}}})
    verdict = verdict_on(newest, pr, GATE)
    path = tmp_path / "trend.html"
    path.write_text(render_html(pr, baseline=newest, verdict=verdict), encoding="utf-8")
    page = browser.open(path)
    assert page.wait_for(READY) == "1" and page.errors == []
    charts = page.evaluate("Array.from(document.querySelectorAll('svg.trend')).map(s => "
                           "[s.querySelectorAll('circle.pt').length, s.querySelectorAll('circle.pr').length, "
                           "s.querySelectorAll('line.change').length, s.querySelectorAll('polyline.line').length, "
                           "Array.from(s.querySelectorAll('.change-label')).map(t => t.textContent)])")
    # per gated metric: 3 main baselines + the PR; v3 → v4 between the first two; main: one line (v4)
    assert charts == [[4, 1, 1, 1, ["v4"]], [4, 1, 1, 1, ["v4"]]]


def test_the_data_block_of_the_page_is_valid_json(demo):
    html = demo[0].read_text(encoding="utf-8")
    assert json.loads(html.split('data-encoding="json">', 1)[1].split("</script>", 1)[0])["mode"] == "gate"
    assert Path(demo[0]).stat().st_mode & 0o777 == 0o644

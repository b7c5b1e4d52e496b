"""The markdown report: golden files for three scenarios, the size limit, escaping, holdout.

Regenerate the golden files after an intended change of the text with
``RAGEVAL_UPDATE_GOLDEN=1 python -m pytest tests/test_report.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import builders
import pytest

from rageval.cost import Cost
from rageval.gate.decide import verdict_on
from rageval.gate.markdown import escape_md, fence, printable
from rageval.gate.report import GITHUB_COMMENT_LIMIT, render_markdown
from rageval.gate.terminal import render_run_table, render_summary_line
from rageval.records import CaseResult, CheckResult
from rageval.results import RunResult
from rageval.settings import GateConfig, ReportConfig

DATA = Path(__file__).parents[1] / "data"
UPDATE = os.environ.get("RAGEVAL_UPDATE_GOLDEN") == "1"

GOLDEN = {  # the seeds' golden set: question, expected answer
    "q01": ("Mua áo mặc không vừa thì được trả trong mấy ngày?",
            "Trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn."),
    "q02": ("laptop moi nhan bi soc man hinh thi doi sao",
            "Lỗi nhà sản xuất được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng tại hãng."),
    "q03": ("Trả hàng rồi bao lâu thì nhận lại tiền?", "Trong 5 ngày làm việc sau khi kho nhận hàng trả."),
    "q04": ("Đổi ý không lấy nữa thì có mất phí ship không?", "Có. Khách đổi ý chịu phí vận chuyển 30.000 đồng."),
    "q05": ("Điện thoại có được trả trong 30 ngày như quần áo không?",
            "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày. Mức 30 ngày chỉ áp dụng cho hàng thời trang "
            "của thành viên Plus."),
}
ANSWERS_800 = {  # the seeds' hand-written chunk-800 answers
    "q01": "Bạn có 30 ngày để đổi trả áo, miễn là hàng còn tem và nhãn.",
    "q03": "Tiền sẽ về tài khoản của bạn trong 5 ngày sau khi kho nhận hàng.",
    "q04": "Có. Nếu đổi ý, bạn chịu phí vận chuyển 30.000 đồng.",
    "q05": "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng tại hãng. "
           "Mức 30 ngày chỉ dành cho hàng thời trang của thành viên Plus.",
}
ANSWER_200_Q01 = "Bạn được đổi hoặc trả trong 7 ngày kể từ ngày nhận hàng, nhớ giữ tem và hóa đơn."
NUMBERS_FAIL = {"q01": (["7 ngày"], ["30 ngày"]), "q03": (["5 ngày làm việc"], ["5 ngày"])}


def case(cid: str, rank: int | None, answer: str | None, **kw: Any) -> CaseResult:
    return builders.case(cid, rank, answer=answer, context_tokens=120, latency_ms=800,
                         usage={"prompt_tokens": 500, "completion_tokens": 40}, **kw)


def run(cases: list[CaseResult], *, version: int = 3, config: dict | None = None, sha: str = "a1b2c3d4e5",
        sigma: dict | None = None) -> RunResult:
    n = len(cases)
    cost = Cost(calls={"generation": n, "judge": n, "faithfulness": 0, "embedding": 2}, calls_total=2 * n + 2,
                calls_per_case=(2 * n + 2) / n, prompt_tokens=500 * n, completion_tokens=40 * n, cache_hits=1,
                usd=0.0123)
    return builders.run(cases, version=version, config=config, sha=sha, sigma=sigma or None, cost=cost,
                        timings={"total_s": 4.25, "index_s": 0.5, "eval_s": 3.75})


def chunk200(**kw: Any) -> RunResult:
    answers = {"q01": ANSWER_200_Q01}
    ranks = dict(zip(GOLDEN, (1, 1, 1, 2, 1)))
    return run([case(i, ranks[i], answers.get(i, GOLDEN[i][1]), question=GOLDEN[i][0], expected=GOLDEN[i][1])
                for i in GOLDEN], config={"chunking": {"size": 200}, "embedding": {"provider": "openai",
                                          "model": "text-embedding-3-small"}, "generation": {"provider": "openai"}},
               **kw)


def chunk800(**kw: Any) -> RunResult:
    ranks = dict(zip(GOLDEN, (3, 1, 3, 2, 1)))
    return run([case(i, ranks[i], ANSWERS_800.get(i, GOLDEN[i][1]), question=GOLDEN[i][0], expected=GOLDEN[i][1],
                     numbers=NUMBERS_FAIL.get(i)) for i in GOLDEN],
               config={"chunking": {"size": 800}, "embedding": {"provider": "openai", "model": "multilingual-v2"},
                       "generation": {"provider": "openai"}}, sha="f00dbabe99", **kw)


SEED_GATE = GateConfig(floors={"hit@3": 0.95, "mrr@5": 0.85}, zero_tolerance=("numbers",))


def matches_golden_file(scenario: str, text: str) -> None:
    path = DATA / scenario / "comment.md"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if not path.exists():
        pytest.fail(f"{path} is missing; create it with RAGEVAL_UPDATE_GOLDEN=1 python -m pytest tests/test_report.py")
    assert text == path.read_text(encoding="utf-8"), (
        f"the report differs from {path}; if the change is intended, regenerate with RAGEVAL_UPDATE_GOLDEN=1")


# --- golden files ----------------------------------------------------------------------------

def test_blocked_report_matches_golden_file():
    before, after = chunk200(), chunk800()
    verdict = verdict_on(before, after, SEED_GATE)
    text = render_markdown(verdict, before, after, ReportConfig())
    # the verdict line names one reason and counts the others, as the terminal does (issue 20 §5.1)
    assert text.splitlines()[0] == "### ❌ RAG eval gate: blocked — mrr@5 0.63 < 0.85 (floor); +2 more reasons"
    assert "| mrr@5 | 0.90 | 0.63 | −0.27 | ≥ 0.85 | ❌ |" in text
    assert "| hit@3 | 1.00 | 1.00 | 0.00 | ≥ 0.95 | ✅ |" in text
    assert "| chunking.size | 200 | 800 |" in text
    # both answers as quotes that wrap, the numbers one has and the other lacks in bold (issue 20 §5.8)
    assert "**First relevant rank:** 1 → 3" in text
    assert "> Bạn có **30** ngày để đổi trả áo, miễn là hàng còn tem và nhãn." in text
    assert f"> {ANSWER_200_Q01.replace('7 ngày', '**7** ngày')}" in text
    matches_golden_file("report_blocked", text)


def test_passed_report_with_flaky_case_matches_golden_file():
    before = chunk800(sigma={"mrr@5": 0.01, "pass_rate": 0.02})
    fixed = chunk200(sigma={"mrr@5": 0.01, "pass_rate": 0.02})
    q05 = case("q05", 1, GOLDEN["q05"][1], question=GOLDEN["q05"][0], expected=GOLDEN["q05"][1], passed=False)
    fixed = run([q05 if c.id == "q05" else c for c in fixed.cases], config=dict(fixed.config),
                sigma={"mrr@5": 0.01, "pass_rate": 0.02})
    calls: list[Any] = []

    def rerun(ids: list[str] | None) -> RunResult:
        calls.append(ids)
        return run([case("q05", 1, GOLDEN["q05"][1], question=GOLDEN["q05"][0])])

    cfg = GateConfig(floors={"hit@3": 0.95, "mrr@5": 0.85}, max_drop={"mrr@5": 0.03, "pass_rate": 0.05},
                     zero_tolerance=("numbers",))
    verdict = verdict_on(before, fixed, cfg, rerun)
    assert calls == [["q05"]] and verdict.flaky == ("q05",) and verdict.verdict == "pass"
    text = render_markdown(verdict, before, fixed, ReportConfig())
    assert text.splitlines()[0] == "### ✅ RAG eval gate: passed — all gates passed"
    assert "<details><summary>Fail → pass (2)</summary>" in text and "<details><summary>Flaky (1)" in text
    matches_golden_file("report_passed", text)


def test_not_comparable_report_matches_golden_file():
    old = chunk200(version=2)       # golden v2 asked q02 and q04 in other words
    before = old.replace(cases=tuple(c.replace(question=c.question + " (v2)") if c.id in ("q02", "q04") else c
                                     for c in old.cases))
    after = chunk200()
    verdict = verdict_on(before, after, GateConfig(floors={"hit@3": 0.95, "mrr@5": 0.85}, max_drop={"mrr@5": 0.0},
                                                   not_comparable="pass"))
    text = render_markdown(verdict, before, after, ReportConfig())
    # one short headline (issue 20 §5.6); the reason in full under Why, once
    assert text.splitlines()[0] == ("### ⚠️ RAG eval gate: passed (not comparable) — main's baseline cannot be "
                                    "compared with this PR")
    assert text.count("only 3 of the PR's 5 cases are unchanged since the baseline") == 1
    assert "v3 (sha256 `9f86d081884c`), baseline v2 — not comparable: floors and zero-tolerance only" in text
    matches_golden_file("report_not_comparable", text)


# --- size ------------------------------------------------------------------------------------

def test_500_failing_cases_fit_a_github_comment_and_keep_header_and_tables():
    long = "Bạn có 30 ngày để đổi trả. " * 40
    before = run([case(f"c{i:03d}", 1, long, question=f"Câu hỏi số {i} " * 10, slice_={"type": f"t{i % 7}"})
                  for i in range(500)])
    after = run([case(f"c{i:03d}", 4, long + "!", question=f"Câu hỏi số {i} " * 10, numbers=(["7 ngày"], ["30 ngày"]),
                      slice_={"type": f"t{i % 7}"}) for i in range(500)], config={"chunking": {"size": 800}})
    verdict = verdict_on(before, after, GateConfig(floors={"mrr@5": 0.85, "pass_rate": 0.9}, zero_tolerance=("numbers",)))
    text = render_markdown(verdict, before, after, ReportConfig(max_cases=25))
    assert len(text) < GITHUB_COMMENT_LIMIT
    assert text.startswith("### ❌ RAG eval gate: blocked — mrr@5 0.25 < 0.85 (floor); +501 more reasons\n")
    for table in ("| Gated metric | Threshold | Baseline | PR | Δ | Status |",
                  "| Metric | Baseline | PR | Δ | Threshold | Status |", "<summary>By slice", "| type=t6 |",
                  "<summary>Config changes", "| chunking.size | 200 | 800 |", "**Cost and time:**"):
        assert table in text
    assert re.search(r"…and \d+ more", text)
    assert "#### Pass → fail (500)" in text


def test_small_max_chars_cuts_case_lists_first():
    before, after = chunk200(), chunk800()
    verdict = verdict_on(before, after, SEED_GATE)
    full = render_markdown(verdict, before, after, ReportConfig())
    cut = render_markdown(verdict, before, after, ReportConfig(), max_chars=len(full) - 1)
    assert len(cut) < len(full) and "| mrr@5 | 0.90 | 0.63 |" in cut and "…and " in cut
    assert cut.splitlines()[0] == full.splitlines()[0]


# --- escaping and holdout --------------------------------------------------------------------

def outside_fences(text: str) -> tuple[str, list[str]]:
    """(text outside fenced code blocks, contents of the blocks) — CommonMark backtick fences: a
    block closes only on a line of at least as many backticks as opened it."""
    outside, blocks, current, opener = [], [], [], None
    for line in text.split("\n"):
        m = re.match(r"^(`{3,})", line)
        if opener is None and m:
            opener, current = len(m.group(1)), []
        elif opener is not None and re.fullmatch(r"`{%d,}\s*" % opener, line):
            blocks.append("\n".join(current))
            opener = None
        elif opener is not None:
            current.append(line)
        else:
            outside.append(line)
    assert opener is None, "an unclosed fenced block"
    return "\n".join(outside), blocks


NASTY = "Xem </details> ngay @channel\n```\n<script>alert(1)</script>\n````` | `x`"


def test_model_text_cannot_break_out_of_the_report():
    question = "Hỏi <script>x</script> @channel | a\nb `c`"
    before = run([case("q1", 1, "ok", question=question), case("q2", 1, "ok")])
    bad = case("q1", 2, NASTY, question=question,
               checks={"judge": CheckResult.fail("says </details> and @here")})
    after = run([bad, case("q2", 1, "ok")])
    verdict = verdict_on(before, after, GateConfig())
    text = render_markdown(verdict, before, after, ReportConfig(), title="Gate <b>@team</b>")
    rest, blocks = outside_fences(text)
    # the answer as a quote that wraps (issue 20 §5.8), escaped like every other untrusted text
    assert blocks == [] and ("> Xem &lt;/details&gt; ngay @\u200dchannel<br>&#96;&#96;&#96;<br>&lt;script&gt;alert(**1**)"
                             "&lt;/script&gt;<br>&#96;&#96;&#96;&#96;&#96; &#124; &#96;x&#96;") in rest
    assert "<script" not in rest and "@channel" not in rest and "@here" not in rest and "@team" not in rest
    opened = rest.count("<details>")                            # the case's and the collapsed sections'
    assert opened == rest.count("</details>") and opened == sum(1 for line in rest.splitlines() if line == "</details>")
    assert "@\u200dchannel" in rest and "&lt;script&gt;" in rest
    summary = next(line for line in rest.splitlines() if line.startswith("<details>"))
    assert "a<br>b" in summary and "&#124;" in summary and "&#96;c&#96;" in summary
    assert text.splitlines()[0].startswith("### ✅ Gate &lt;b&gt;@\u200dteam&lt;/b&gt;: passed")


def test_holdout_cases_show_counts_never_text():
    secret_q, secret_a = "SECRET QUESTION holdout", "SECRET ANSWER 7 ngày"
    before = run([case("h1", 1, secret_a, question=secret_q, tags=("holdout",)), case("q2", 1, "ok")])
    after = run([case("h1", 3, secret_a + "!", question=secret_q, tags=("holdout",), numbers=(["7 ngày"], ["30 ngày"])),
                 case("q2", 1, "ok")])
    verdict = verdict_on(before, after, GateConfig(zero_tolerance=("numbers",)))
    assert verdict.verdict == "fail" and verdict.pass_to_fail == ("h1",)
    text = render_markdown(verdict, before, after, ReportConfig())
    assert "SECRET" not in text and "h1" not in text and "30 ngày" not in text
    assert "1 holdout case went pass → fail (text hidden)." in text
    assert "numbers: 1 holdout case fails the rule (details hidden)" in text


# --- summary line and filters ----------------------------------------------------------------

def long_reason_words(verdict) -> set[str]:
    return {w for r in verdict.reasons for w in r.message.split()} | {"blocked", "—", "(not", "comparable)"}


def test_summary_line():
    before, after = chunk200(), chunk800()
    verdict = verdict_on(before, after, SEED_GATE)
    assert render_summary_line(verdict) == "RAG eval gate: blocked — mrr@5 0.63 < 0.85 (floor); +2 more reasons"
    assert render_summary_line(verdict_on(before, before, SEED_GATE)) == "RAG eval gate: passed — all gates passed"
    alone = verdict_on(None, after, GateConfig(zero_tolerance=("numbers",)))
    long = render_summary_line(alone, title="x" * 200)
    assert len(long) <= 140 and long.endswith("…") and "\n" not in long
    assert long[:-1].split()[-1] in long_reason_words(alone)        # cut at a word, never inside one


@pytest.mark.parametrize(("text", "expected"), [
    ("mrr@5 0.63 < 0.85", "mrr@5 0.63 < 0.85"),
    ("</details><b>", "&lt;/details&gt;&lt;b&gt;"),
    ("a | b", "a &#124; b"),
    ("line1\r\nline2", "line1<br>line2"),
    ("ping @octocat, mail a@b.c", "ping @\u200doctocat, mail a@b.c"),
    ("é@octocat ß@x 7@y _@z", "é@\u200doctocat ß@\u200dx 7@y _@z"),      # GitHub: only ASCII word characters join
    ("see #1, acme/other#2, GH-3 and gh-4", "see #\u200d1, acme/other#\u200d2, GH-\u200d3 and gh-\u200d4"),
    ("https://github.com/acme/other/issues/2 www.x.vn", "https:\u200d//github.com/acme/other/issues/2 www\u200d.x.vn"),
    ("bell\x07 esc\x1b[31m nul\x00 del\x7f csi\x9b", "bell&#92;x07 esc&#92;x1b&#91;31m nul&#92;x00 del&#92;x7f csi&#92;x9b"),
    ("a\u202eb\u2066c\u2069d\u200fe", "aU+202EbU+2066cU+2069dU+200Fe"),
    ("x" * 1_005, "x" * 1_000 + "… (5 more characters)"),
    ("`code` \\", "&#96;code&#96; &#92;"),
    ("AT&T &amp; [x](y)", "AT&amp;T &amp;amp; &#91;x&#93;(y)"),
    (None, ""),
])
def test_escape_md(text, expected):
    assert escape_md(text) == expected


def test_fence_is_longer_than_any_backtick_run():
    assert fence("plain") == "```text\nplain\n```"
    assert fence("a ```` b") == "`````text\na ```` b\n`````"
    assert fence("x" * 20, limit=5) == "```text\nxxxxx… (15 more characters)\n```"


@pytest.mark.parametrize(("text", "expected"), [
    ("plain tiếng Việt\ttab", "plain tiếng Việt\ttab"),
    ("\x1b[2J\x1b[31mred", "\\x1b[2J\\x1b[31mred"),
    ("nul\x00 bel\x07 bs\x08 vt\x0b cr\r lf\n", "nul\\x00 bel\\x07 bs\\x08 vt\\x0b cr\\r lf\\n"),
    ("del\x7f c1\x80 csi\x9b nbsp\xa0", "del\\x7f c1\\x80 csi\\x9b nbsp\xa0"),
    ("\u202aLRE\u202bRLE\u202cPDF\u202dLRO\u202eRLO", "U+202ALREU+202BRLEU+202CPDFU+202DLROU+202ERLO"),
    ("\u2066LRI\u2067RLI\u2068FSI\u2069PDI\u200eLRM\u200fRLM\u061cALM", "U+2066LRIU+2067RLIU+2068FSIU+2069PDIU+200ELRMU+200FRLMU+061CALM"),
    ("line\u2028sep\u2029para", "lineU+2028sepU+2029para"),
])
def test_printable_makes_control_and_bidi_characters_visible(text, expected):
    assert printable(text) == expected


def test_printable_can_keep_line_breaks():
    assert printable("a\nb\x1b", newlines=True) == "a\nb\\x1b"


HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x00\x7f\x9b\u202eevil\u2066\u200f"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_control_and_bidi_characters_never_reach_the_comment():
    texts = {"question": "question " + HOSTILE, "expected": "expected " + HOSTILE}
    before = run([case("q1" + HOSTILE, 1, "ok", **texts), case("q2", 1, "ok")])
    bad = case("q1" + HOSTILE, 2, "answer " + HOSTILE, checks={"judge": CheckResult.fail("judge " + HOSTILE)}, **texts)
    after = run([bad, case("q2", 2, "ok", error="app error " + HOSTILE)])
    verdict = verdict_on(before, after, GateConfig(floors={"pass_rate": 0.9}))
    assert verdict.pass_to_fail == ("q1" + HOSTILE,)
    text = render_markdown(verdict, before, after, ReportConfig(), title="Gate " + HOSTILE)
    assert not RAW_CONTROL.findall(text)
    rest, blocks = outside_fences(text)
    assert "> answer &#92;x1b&#93;0;pwned&#92;x07&#92;x1b&#91;2J" in rest and blocks == []
    assert "question &#92;x1b&#93;0;pwned&#92;x07&#92;x1b&#91;2J&#92;x00&#92;x7f&#92;x9bU+202EevilU+2066U+200F" in rest
    assert "**Failing checks:** judge: judge &#92;x1b&#93;0;pwned" in rest


def test_terminal_table_neutralises_control_characters_and_cuts_errors():
    result = run([case("q" + HOSTILE, 1, "ok", error="app error " + HOSTILE + "x" * 5_000), case("q2", 1, "ok")])
    table = render_run_table(result)
    assert not RAW_CONTROL.findall(table.replace("\n", ""))
    error_line = next(line for line in table.splitlines() if line.startswith("  ERROR"))
    assert error_line.startswith("  ERROR q\\x1b]0;pwned\\x07\\x1b[2J\\x00\\x7f\\x9bU+202EevilU+2066U+200F: app error ")
    assert error_line.endswith("… (4,034 more characters)")       # 1,000 of 10 + 24 + 5,000 characters shown


def p2f_cases(n: int, long_id: str, long_text: str) -> tuple[RunResult, RunResult]:
    """``n`` cases that pass in the baseline and fail in the PR; case ``long_id`` has ``long_text``
    as its question, expected answer and PR answer."""
    def texts(cid: str, i: int) -> dict[str, str]:
        return ({"question": long_text, "expected": long_text} if cid == long_id
                else {"question": f"Câu hỏi {i}?", "expected": f"Đáp án {i}"})
    ids = [f"c{i:02d}" for i in range(n)]
    before = run([case(cid, 1, f"Đúng {i}", **texts(cid, i)) for i, cid in enumerate(ids)])
    after = run([case(cid, 3, long_text if cid == long_id else f"Sai {i}", passed=False, **texts(cid, i))
                 for i, cid in enumerate(ids)])
    return before, after


def test_one_long_case_does_not_hide_the_others():
    """The issue's case: one 200 KB text among 30 pass→fail cases used to leave no case at all."""
    long_text = "Một câu trả lời rất dài. " * 8_000            # 200,000 characters
    before, after = p2f_cases(30, "c00", long_text)
    verdict = verdict_on(before, after, GateConfig(floors={"pass_rate": 0.9}))
    assert len(verdict.pass_to_fail) == 30
    text = render_markdown(verdict, before, after, ReportConfig(max_cases=30))
    assert len(text) < GITHUB_COMMENT_LIMIT
    shown = re.findall(r"<details><summary><b>(c\d\d)</b>", text)
    assert shown == [f"c{i:02d}" for i in range(30)]
    assert text.count("… (198,500 more characters)") == 3       # Question, Expected, After: 1,500 shown of each
    assert "… (199,700 more characters)" in text                 # the question in the case's summary line (300 shown)


def test_a_huge_title_cannot_cut_off_the_verdict():
    before, after = chunk200(), chunk800()
    verdict = verdict_on(before, after, SEED_GATE)
    text = render_markdown(verdict, before, after, ReportConfig(title="T" * 100_000))
    assert text.splitlines()[0] == ("### ❌ " + "T" * 200 + "… (99,800 more characters): blocked — "
                                    "mrr@5 0.63 < 0.85 (floor); +2 more reasons")
    assert len(text) < GITHUB_COMMENT_LIMIT and "| mrr@5 | 0.90 | 0.63 |" in text
    line = render_summary_line(verdict, title="T" * 100_000)
    assert line == "T" * 59 + "…: blocked — mrr@5 0.63 < 0.85 (floor); +2 more reasons"
    hostile = render_summary_line(verdict, title="Gate\u202e\x1b[2J")
    assert hostile.startswith("GateU+202E\\x1b[2J: blocked")


# --- rendered as GitHub renders it (cmark-gfm) -----------------------------------------------

class _Html(HTMLParser):
    """Tags in order, and the text of the first screen: everything before the first <details>
    that is not a pass→fail case (those sit under their own heading)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.first_screen: list[str] = []
        self.collapsed = False
        self.in_cases = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        if tag == "details" and not self.in_cases:
            self.collapsed = True

    def handle_endtag(self, tag: str) -> None:
        self.tags.append("/" + tag)

    def handle_data(self, data: str) -> None:
        if data.startswith("Pass → fail"):
            self.in_cases = True
        if not self.collapsed and not self.in_cases:
            self.first_screen.append(data)


def rendered(markdown: str) -> _Html:
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options
    parser = _Html()
    parser.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))
    return parser


@pytest.mark.parametrize("scenario", ["report_blocked", "report_passed", "report_not_comparable"])
def test_the_first_screen_shows_the_verdict_the_gated_table_and_the_reasons(scenario):
    html = rendered((DATA / scenario / "comment.md").read_text(encoding="utf-8"))
    first = "".join(html.first_screen)
    assert first.lstrip().startswith(("❌ RAG eval gate:", "✅ RAG eval gate:", "⚠️ RAG eval gate:"))
    assert "Gated metric" in first and html.tags.index("table") < html.tags.index("details")
    assert html.tags.count("details") == html.tags.count("/details") == html.tags.count("summary")
    if scenario != "report_passed":
        assert "Why" in first
    # everything else is collapsed: the full metric table, by slice, config, noise and cost
    assert "All metrics" not in first and "Cost and time" not in first


def test_the_demo_incidents_comment_renders_with_its_attribution_on_the_first_screen(tmp_path, run_cli):
    demo = Path(__file__).parents[2] / "examples" / "banhang"
    base = tmp_path / "baseline.json"
    assert run_cli("baseline", "--config", demo / "rageval.yml", "--subset", "pr", "--repeats", "1",
                   "--out", base)[0] == 0
    run_cli("gate", "--config", demo / "rageval-800.yml", "--subset", "pr", "--baseline", base,
            "--report-md", tmp_path / "report.md")
    first = "".join(rendered((tmp_path / "report.md").read_text(encoding="utf-8")).first_screen)
    assert "mrr@5 dropped 0.91 → 0.87" in first and "chunking.size 200→800 −0.06 alone, reverting it leaves 0.00" in first
    assert "| chunking.size |" not in first            # the config table is collapsed

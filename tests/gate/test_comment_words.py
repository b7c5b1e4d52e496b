"""What the comment and the terminal say around the reasons (issue 20 §1, §5, §6): an in-place file
edit in the config changes, the verdict line's "+N more", a zero-tolerance row in the gated table, the
next step, "out of scope" instead of ranks, the terminal wrapped with its ↳ lines indented."""

from __future__ import annotations

from dataclasses import replace

from builders import case, run

from rageval.gate.decide import config_diff, verdict_on
from rageval.gate.markdown import quoted
from rageval.gate.report import Links, render_markdown
from rageval.gate.terminal import render_summary_line, render_terminal
from rageval.golden.history import file_at
from rageval.results import RunResult
from rageval.settings import GateConfig, ReportConfig

PROMPT = {"generation": {"prompt": "prompt.j2"}}


def test_a_file_edited_in_place_is_a_config_change_only_when_its_content_changed():
    same = config_diff(PROMPT, PROMPT, {"generation.prompt": {"prompt.j2": "a" * 64}},
                       {"generation.prompt": {"prompt.j2": "a" * 64}})
    edited = config_diff(PROMPT, PROMPT, {"generation.prompt": {"prompt.j2": "a" * 64}},
                         {"generation.prompt": {"prompt.j2": "b" * 64}})
    assert same == []
    assert [(d.key, d.before, d.after, d.note) for d in edited] == [
        ("generation.prompt", "prompt.j2", "prompt.j2", "prompt.j2 content changed")]
    # a baseline written before files were recorded: no row from hashes (git is asked instead, in flow)
    assert config_diff(PROMPT, PROMPT, None, {"generation.prompt": {"prompt.j2": "b" * 64}}) == []


def test_the_files_a_config_points_to_round_trip_and_older_runresults_load_without_them():
    with_files = run([case("q1")]).replace(files={"generation.prompt": {"prompt.j2": "c" * 64}})
    data = with_files.to_dict()
    assert data["files"] == {"generation.prompt": {"prompt.j2": "c" * 64}}
    assert RunResult.from_dict(data).files == {"generation.prompt": {"prompt.j2": "c" * 64}}
    del data["files"]
    assert RunResult.from_dict(data).files is None and "files" not in run([case("q1")]).to_dict()


def test_a_recorded_commit_is_given_to_git_only_as_40_hex_digits(tmp_path):
    target = tmp_path / "pwned"
    for sha in (f"--output={target}", "HEAD", "a" * 39, "A" * 40, "a" * 40 + " --"):
        assert "is not a 40-hex commit id" in file_at(tmp_path / "prompt.j2", sha)
    assert not target.exists()


def blocked_with_zero_tolerance():
    before = run([case(f"q{i}") for i in range(4)], config={"gate": {"zero_tolerance": ["numbers"]}})
    after = run([case("q0", 5), case("q1", numbers=(["7 ngày"], ["30 ngày"])), case("q2", numbers=([], ["5 ngày"])),
                 case("q3")], config={"gate": {"zero_tolerance": ["numbers"]}})
    return before, after, verdict_on(before, after, GateConfig(floors={"mrr@5": 0.9}, zero_tolerance=("numbers",)))


def test_the_verdict_line_counts_the_other_reasons_and_zero_tolerance_has_a_gated_row():
    before, after, verdict = blocked_with_zero_tolerance()
    text = render_markdown(verdict, before, after, ReportConfig())
    assert text.splitlines()[0].endswith("; +2 more reasons")
    assert "| numbers (zero tolerance) | 0 new failures | — | 2 new failures | — | ❌ |" in text
    assert text.count("❌ numbers") == 2          # two ❌ reasons beside the ❌ row


def test_a_blocked_pr_without_a_baseline_gets_the_next_step_the_job_log_gives():
    _, after, _ = blocked_with_zero_tolerance()
    verdict = verdict_on(None, after, GateConfig(zero_tolerance=("numbers",)))
    text = render_markdown(verdict, None, after, ReportConfig())
    assert "**Next step:** Produce main's baseline: run rageval baseline on main" in text
    assert "(`rageval gate --baseline`" in " ".join(render_terminal(verdict).split())   # what was not given


def test_an_out_of_scope_case_says_out_of_scope_not_ranks():
    before = run([replace(case("q1", None), out_of_scope=True)])
    oos = replace(case("q1", None, passed=False), out_of_scope=True)
    after = run([oos])
    verdict = verdict_on(before, after, GateConfig(max_drop={"pass_rate": 0.0}))
    text = render_markdown(verdict, before, after, ReportConfig())
    assert verdict.pass_to_fail == ("q1",) and "not retrieved → not retrieved" not in text
    assert "· out of scope</summary>" in text and "**First relevant rank:** out of scope" in text


def test_the_terminal_wraps_at_80_columns_with_the_arrow_lines_indented():
    _, _, verdict = blocked_with_zero_tolerance()
    long = replace(verdict, reasons=tuple(replace(r, message=r.message + " word" * 60) for r in verdict.reasons))
    lines = render_terminal(long, written=("verdict written to /a/very/long/path/" + "x" * 90 + ".json",)).splitlines()
    assert all(len(line) <= 80 for line in lines[:-1])
    assert lines[-1].startswith("  verdict written to /a/very/long/path/")     # a path stays whole
    first = next(i for i, line in enumerate(lines) if line.startswith("  BLOCK"))
    body = [line for line in lines[first:-1] if not line.startswith("  BLOCK")]
    assert body and all(line.startswith(" " * 8) for line in body)


def test_a_long_summary_line_is_cut_at_a_word():
    _, after, _ = blocked_with_zero_tolerance()
    verdict = verdict_on(None, after, GateConfig(zero_tolerance=("numbers",)))
    line = render_summary_line(verdict, title="T" * 59)
    assert len(line) <= 140 and line.endswith("…")
    words = set(" ".join(r.message for r in verdict.reasons).split()) | {"blocked", "—"}
    assert line[:-1].rstrip(" ,;:—").split()[-1].rstrip(",;") in words | {w.rstrip(",;") for w in words}


def test_the_comment_links_the_job_log_the_results_artifact_and_both_commits():
    before, after = run([case("q1")], sha="a" * 40), run([case("q1", 5)], sha="b" * 40)
    verdict = verdict_on(before, after, GateConfig(floors={"mrr@5": 0.9}))
    links = Links("https://github.com/o/r/actions/runs/7", "https://github.com/o/r/actions/runs/7#artifacts",
                  "https://github.com/o/r/commit/")
    text = render_markdown(verdict, before, after, ReportConfig(), links=links)
    assert ("baseline [`aaaaaaa`](https://github.com/o/r/commit/" + "a" * 40 + ") · PR [`bbbbbbb`]"
            "(https://github.com/o/r/commit/" + "b" * 40 + ") · [job log](https://github.com/o/r/actions/runs/7) · "
            "[results artifact](https://github.com/o/r/actions/runs/7#artifacts)") in text
    # a recorded commit that is not 40 hex digits is shown, never linked
    odd = run([case("q1")], sha="a1b2c3d)](https://evil.example")
    assert "evil.example)" not in render_markdown(verdict_on(odd, after, GateConfig()), odd, after, ReportConfig(),
                                                 links=links)


def test_answers_are_quotes_that_wrap_with_the_differing_numbers_in_bold():
    assert quoted("Trong 30 ngày, mục DT-1, trước 12:00", "Trong 7 ngày, trước 12:00") == (
        "> Trong **30** ngày, mục DT-1, trước 12:00")                 # an id's digit and a shared time stay plain
    # markup an answer carries stays text: emphasis, a heading or list marker, HTML, a mention
    assert quoted("# Title *x* _y_ <b>@team</b>", "") == "> &#35; Title &#42;x&#42; &#95;y&#95; &lt;b&gt;@\u200dteam&lt;/b&gt;"
    assert quoted("1. first", None) == "> 1&#46; first"
    # a long answer is cut, and the cut's own count is not a number of the answer
    assert quoted("x " * 1_000 + "9", "", limit=10) == "> x x x x x… (1,991 more characters)"

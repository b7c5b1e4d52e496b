"""`rageval golden add`: a format-preserving append of one case to the golden set."""

import difflib
import json
import os
import shutil
import stat
from datetime import date

import pytest
import yaml
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.errors import DatasetError
from rageval.golden.corpus import load_corpus
from rageval.golden.edit import (
    add_case,
    bump_version,
    changelog_line,
    next_case_id,
    shorten,
    write_added,
)
from rageval.golden.set import Case, load_golden
from rageval.golden.yaml_text import yaml_double_quoted

BANHANG = ROOT / "examples" / "banhang" / "golden.yaml"
TODAY = date(2026, 12, 1)


def write(tmp_path, text, name="golden.yaml"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


# ------------------------------------------------------------------------------------------------
# The realistic example: examples/banhang/golden.yaml (123 cases, many comments, scalar changelog).
# ------------------------------------------------------------------------------------------------

@pytest.fixture
def banhang(tmp_path):
    path = tmp_path / "golden.yaml"
    shutil.copyfile(BANHANG, path)
    return path


INCIDENT_Q = "Áo khoác mua 5 ngày rồi, giờ đổi sang size khác có được không?"


def test_banhang_add_keeps_every_line_and_bumps_version(banhang):
    original = banhang.read_text(encoding="utf-8")
    result = add_case(banhang, question=INCIDENT_Q, expected_sections=["DT-1"],
                      expected_answer="Được, trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn.",
                      source="incident-2026-11-29", tags=["pr"], slice={"type": "lookup", "numeric": True},
                      must_include=["7 ngày"], must_not_include=["30 ngày"], today=TODAY)
    assert (result.case_id, result.old_version, result.new_version) == ("q124", 4, 5)
    assert result.changelog_line == ("v4 -> v5: + q124 (incident-2026-11-29): "
                                     "Áo khoác mua 5 ngày rồi, giờ đổi sang size khác có được…")
    assert banhang.read_text(encoding="utf-8") == original  # add_case writes nothing

    old_lines, new_lines = original.splitlines(), result.text.splitlines()
    removed = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed.extend(old_lines[i1:i2])
    assert removed == ["version: 4", old_lines[13]]
    assert old_lines[13].startswith('changelog: "v3 -> v4: corpus grows to 32 sections')
    comments = [ln for ln in old_lines if ln.lstrip().startswith("#")]
    assert [ln for ln in new_lines if ln.lstrip().startswith("#")] == [
        *comments, "  # added by rageval golden add from incident-2026-11-29 on 2026-12-01"]
    # the scalar changelog became a block list: old text verbatim, then the new line
    assert new_lines[12:16] == [
        "version: 5",
        "changelog:",
        "  - " + old_lines[13][len("changelog: "):],
        '  - "v4 -> v5: + q124 (incident-2026-11-29): Áo khoác mua 5 ngày rồi, giờ đổi sang size khác có được…"',
    ]
    assert new_lines[-12:] == [
        '    must_not_include: ["Bạn là trợ lý", "Quy tắc trả lời"]',
        "",
        "  # added by rageval golden add from incident-2026-11-29 on 2026-12-01",
        "  - id: q124",
        '    question: "Áo khoác mua 5 ngày rồi, giờ đổi sang size khác có được không?"',
        "    expected_sections: [DT-1]",
        '    expected_answer: "Được, trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn."',
        "    source: incident-2026-11-29",
        "    slice: {type: lookup, numeric: true}",
        "    tags: [pr]",
        '    must_include: ["7 ngày"]',
        '    must_not_include: ["30 ngày"]',
    ]
    assert result.text.endswith('["30 ngày"]\n')

    write_added(banhang, result)
    before, after = load_golden(BANHANG), load_golden(banhang)
    assert (after.name, after.version, len(after.cases)) == ("banhang-returns", 5, 124)
    assert after.cases[:-1] == before.cases
    assert after.cases[-1] == Case(
        id="q124", question=INCIDENT_Q, expected_sections=("DT-1",),
        expected_answer="Được, trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn.",
        source="incident-2026-11-29", slice={"type": "lookup", "numeric": True}, tags=("pr",),
        must_include=("7 ngày",), must_not_include=("30 ngày",), out_of_scope=False)
    assert after.changelog.startswith("v4 -> v5: + q124 ")
    assert after.subset("pr").cases[-1].id == "q124"
    raw = yaml.safe_load(banhang.read_text(encoding="utf-8"))
    assert raw["changelog"][0] == yaml.safe_load(BANHANG.read_text(encoding="utf-8"))["changelog"]


def test_banhang_checks_sections_against_corpus_and_refuses_duplicates(banhang):
    known = load_corpus("docs/*.md", ROOT / "examples" / "banhang").ids()
    before = banhang.read_bytes()
    with pytest.raises(DatasetError, match=r"expected section 'DT-11' is not in the corpus \(did you mean 'DT-1"):
        add_case(banhang, question="Đổi hàng ở đâu?", expected_sections=["DT-11"], known_sections=known)
    # q01 is "Mua áo mặc không vừa thì được trả trong mấy ngày?" — typed without diacritics, other case/spacing
    with pytest.raises(DatasetError, match=r"case 'q01' already asks this question"):
        add_case(banhang, question="  MUA AO mac khong vua thi  duoc tra trong may ngay? ",
                 expected_sections=["DT-1"], known_sections=known)
    assert banhang.read_bytes() == before
    ok = add_case(banhang, question="Đổi hàng ở đâu?", expected_sections=["DT-1", "TV-5"], known_sections=known,
                  source="chat-2026-11", today=TODAY)
    assert ok.case_id == "q124" and ok.case.expected_sections == ("DT-1", "TV-5")


# ------------------------------------------------------------------------------------------------
# Small handwritten files, compared byte for byte with hand-written expected output.
# ------------------------------------------------------------------------------------------------

BLOCK_LIST = """\
# shop golden set
dataset: shop
version: 2   # bump on every change
changelog:
  - "v1: first cases"
  - "v1 -> v2: + q02"
cases:
  # lookups
  - id: q01
    question: "Trả hàng trong mấy ngày?"
    expected_sections: [DT-1]
    tags: [pr]

  - id: q02
    question: "phi ship bao nhieu"
    expected_sections: [VC-2]
    tags: []   # not in pr

# end of cases: keep this footer
"""

BLOCK_LIST_EXPECTED = """\
# shop golden set
dataset: shop
version: 3   # bump on every change
changelog:
  - "v1: first cases"
  - "v1 -> v2: + q02"
  - "v2 -> v3: + q03 (incident-2026-11-29): Khách hỏi \\"hoàn tiền\\" mất bao lâu?"
cases:
  # lookups
  - id: q01
    question: "Trả hàng trong mấy ngày?"
    expected_sections: [DT-1]
    tags: [pr]

  - id: q02
    question: "phi ship bao nhieu"
    expected_sections: [VC-2]
    tags: []   # not in pr

  # added by rageval golden add from incident-2026-11-29 on 2026-12-01
  - id: q03
    question: "Khách hỏi \\"hoàn tiền\\" mất bao lâu?"
    expected_sections: [DT-4]
    expected_answer: "Trong 5 ngày làm việc."
    source: incident-2026-11-29
    tags: [pr]

# end of cases: keep this footer
"""


def test_block_list_changelog_byte_for_byte(tmp_path):
    path = write(tmp_path, BLOCK_LIST)
    result = add_case(path, question='Khách hỏi "hoàn tiền" mất bao lâu?', expected_sections=["DT-4"],
                      expected_answer="Trong 5 ngày làm việc.", source="incident-2026-11-29", tags=["pr"],
                      today=TODAY)
    assert result.text == BLOCK_LIST_EXPECTED
    assert (result.old_version, result.new_version) == (2, 3)
    write_added(path, result)
    assert path.read_bytes() == BLOCK_LIST_EXPECTED.encode("utf-8")
    golden = load_golden(path)
    assert golden.changelog == 'v2 -> v3: + q03 (incident-2026-11-29): Khách hỏi "hoàn tiền" mất bao lâu?'
    assert golden.cases[-1].question == 'Khách hỏi "hoàn tiền" mất bao lâu?'


FLOW_LIST = """\
dataset: shop
version: '1.4'
changelog: ['1.3: start', '1.4: + q2']  # oldest first
cases:
  - id: q1
    question: "a?"
    expected_answer: "A."
  - id: q2
    question: "b?"
    expected_answer: "B."
"""

FLOW_LIST_EXPECTED = """\
dataset: shop
version: '1.5'
changelog: ['1.3: start', '1.4: + q2', 'v1.4 -> v1.5: + q3 (chat-2026-11): it''s c?']  # oldest first
cases:
  - id: q1
    question: "a?"
    expected_answer: "A."
  - id: q2
    question: "b?"
    expected_answer: "B."
  # added by rageval golden add from chat-2026-11 on 2026-12-01
  - id: q3
    question: "it's c?"
    expected_sections: []
    expected_answer: "C."
    source: chat-2026-11
    tags: []
"""


def test_flow_list_changelog_single_quotes_dotted_version(tmp_path):
    path = write(tmp_path, FLOW_LIST)
    result = add_case(path, question="it's c?", expected_answer="C.", source="chat-2026-11", today=TODAY)
    assert result.text == FLOW_LIST_EXPECTED
    assert (result.case_id, result.old_version, result.new_version) == ("q3", "1.4", "1.5")


FOUR_SPACE_NO_CHANGELOG = """\
dataset: faq
version: "7"
cases:
    -   id: faq-returns
        question: "returns?"
        expected_sections: [A-1]
    -   id: faq-shipping
        question: "shipping?"
        expected_sections: [A-2]"""

FOUR_SPACE_EXPECTED = """\
dataset: faq
version: "8"
changelog: ["v7 -> v8: + case-3: warranty?"]
cases:
    -   id: faq-returns
        question: "returns?"
        expected_sections: [A-1]
    -   id: faq-shipping
        question: "shipping?"
        expected_sections: [A-2]
    # added by rageval golden add on 2026-12-01
    -   id: case-3
        question: "warranty?"
        expected_sections: [A-3, "B 1"]
        slice: {type: lookup, score: 0.5, "two words": "x y"}
        tags: [pr, "2026"]
        out_of_scope: true"""


def test_four_space_indent_missing_changelog_string_version_no_trailing_newline(tmp_path):
    path = write(tmp_path, FOUR_SPACE_NO_CHANGELOG)
    result = add_case(path, question="warranty?", expected_sections=["A-3", "B 1"], tags=["pr", "2026"],
                      slice={"type": "lookup", "score": 0.5, "two words": "x y"}, out_of_scope=True, today=TODAY)
    assert result.text == FOUR_SPACE_EXPECTED
    assert (result.case_id, result.old_version, result.new_version) == ("case-3", "7", "8")
    case = load_golden(write(tmp_path, result.text, "check.yaml")).cases[-1]
    assert case.tags == ("pr", "2026") and case.slice == {"type": "lookup", "score": 0.5, "two words": "x y"}


INDENTLESS_SCALAR_CHANGELOG = """\
dataset: shop
version: 9
changelog: v8 to v9, reworded q1
cases:
- id: x01
  question: "q one"
  expected_answer: "one"
"""

INDENTLESS_EXPECTED = """\
dataset: shop
version: 10
changelog:
- "v8 to v9, reworded q1"
- "v9 -> v10: + x02 (incident-2024-02-29): q two"
cases:
- id: x01
  question: "q one"
  expected_answer: "one"
# added by rageval golden add from incident-2024-02-29 on 2026-12-01
- id: x02
  question: "q two"
  expected_sections: []
  expected_answer: "two"
  source: incident-2024-02-29
  tags: []
"""


def test_indentless_cases_and_plain_scalar_changelog(tmp_path):
    path = write(tmp_path, INDENTLESS_SCALAR_CHANGELOG)
    result = add_case(path, question="q two", expected_answer="two", source="incident-2024-02-29", today=TODAY)
    assert result.text == INDENTLESS_EXPECTED


CRLF = ("dataset: shop\r\nversion: 1\r\nchangelog: |\r\n  first line\r\n  second line\r\n"
        "cases:\r\n  - id: q1\r\n    question: \"a?\"\r\n    expected_answer: \"A.\"\r\n")


def test_crlf_and_block_scalar_changelog(tmp_path):
    path = write(tmp_path, CRLF)
    result = add_case(path, question="b?", expected_answer="B.", today=TODAY)
    assert result.text == ("dataset: shop\r\nversion: 2\r\nchangelog:\r\n"
                           '  - "first line\\nsecond line\\n"\r\n  - "v1 -> v2: + q2: b?"\r\n'
                           "cases:\r\n  - id: q1\r\n    question: \"a?\"\r\n    expected_answer: \"A.\"\r\n"
                           "  # added by rageval golden add on 2026-12-01\r\n"
                           "  - id: q2\r\n    question: \"b?\"\r\n    expected_sections: []\r\n    expected_answer: \"B.\"\r\n    tags: []\r\n")


@pytest.mark.parametrize("changelog, expected", [
    ("changelog:\n", 'changelog:\n  - "v3 -> v4: + q2: b?"\n'),
    ("changelog: ''\n", 'changelog:\n  - "v3 -> v4: + q2: b?"\n'),
    ("changelog: []\n", 'changelog: ["v3 -> v4: + q2: b?"]\n'),
    ('changelog: "v2 -> v3"  # why\n', 'changelog:  # why\n  - "v2 -> v3"\n  - "v3 -> v4: + q2: b?"\n'),
])
def test_empty_and_commented_changelog_forms(tmp_path, changelog, expected):
    head = "dataset: s\nversion: 3\n"
    body = 'cases:\n  - id: q1\n    question: "a?"\n    expected_answer: "A."\n'
    path = write(tmp_path, head + changelog + body)
    result = add_case(path, question="b?", expected_answer="B.", today=TODAY)
    assert result.text.startswith("dataset: s\nversion: 4\n" + expected + body)
    assert load_golden(write(tmp_path, result.text, "check.yaml")).changelog == "v3 -> v4: + q2: b?"


def test_awkward_text_round_trips(tmp_path):
    path = write(tmp_path, 'dataset: s\nversion: 1\ncases:\n  - id: q1\n    question: "a?"\n    expected_answer: "A."\n')
    question = 'tab\there, back\\slash, "quotes", # not a comment, line\u2028sep, nel\x85, ctrl\x07 ?'
    result = add_case(path, question=question, expected_answer="x: y - z", must_include=["#1", "a: b"],
                      source="form #12", today=TODAY)
    case = load_golden(write(tmp_path, result.text, "check.yaml")).cases[-1]
    assert (case.question, case.expected_answer, case.must_include, case.source) == (
        question, "x: y - z", ("#1", "a: b"), "form #12")


# ------------------------------------------------------------------------------------------------
# JSON golden sets: rewritten, key order kept.
# ------------------------------------------------------------------------------------------------

def test_json_golden_set(tmp_path):
    data = {"dataset": "shop", "description": "json one", "version": "3",
            "cases": [{"id": "q01", "question": "Đổi trả mấy ngày?", "expected_sections": ["DT-1"]}]}
    path = write(tmp_path, json.dumps(data, ensure_ascii=False), "golden.json")
    result = add_case(path, question="Hoàn tiền bao lâu?", expected_sections=["DT-4"],
                      source="incident-2026-11-29", tags=["pr"], today=TODAY)
    assert result.text == (
        '{\n  "dataset": "shop",\n  "description": "json one",\n  "version": "4",\n'
        '  "changelog": [\n    "v3 -> v4: + q02 (incident-2026-11-29): Hoàn tiền bao lâu?"\n  ],\n'
        '  "cases": [\n    {\n      "id": "q01",\n      "question": "Đổi trả mấy ngày?",\n'
        '      "expected_sections": [\n        "DT-1"\n      ]\n    },\n'
        '    {\n      "id": "q02",\n      "question": "Hoàn tiền bao lâu?",\n'
        '      "expected_sections": [\n        "DT-4"\n      ],\n      "source": "incident-2026-11-29",\n'
        '      "tags": [\n        "pr"\n      ]\n    }\n  ]\n}')
    write_added(path, result)
    golden = load_golden(path)
    assert (golden.version, [c.id for c in golden.cases]) == ("4", ["q01", "q02"])
    second = add_case(path, question="Ship mấy ngày?", expected_sections=["VC-1"], today=TODAY)
    assert json.loads(second.text)["changelog"] == ["v3 -> v4: + q02 (incident-2026-11-29): Hoàn tiền bao lâu?",
                                                    "v4 -> v5: + q03: Ship mấy ngày?"]


# ------------------------------------------------------------------------------------------------
# Refusals: each names the problem, and the file is left byte for byte as it was.
# ------------------------------------------------------------------------------------------------

SMALL = 'dataset: s\nversion: 1\ncases:\n  - id: q1\n    question: "Đổi trả mấy ngày?"\n    expected_sections: [DT-1]\n'


@pytest.mark.parametrize("text, kwargs, message", [
    (SMALL, {"question": "  "}, r"needs a question"),
    (SMALL, {"question": "x?"}, r"needs --expected-sections and/or --expected-answer, or --out-of-scope"),
    (SMALL, {"question": "x?", "expected_answer": "y", "source": "incident-2026-02-30"},
     r"source 'incident-2026-02-30' is not a valid incident reference.*YYYY-MM-DD"),
    (SMALL, {"question": "x?", "expected_answer": "y", "source": "incident-2026-1-5"},
     r"source 'incident-2026-1-5' is not a valid incident reference"),
    (SMALL, {"question": "x?", "expected_answer": "y", "source": "incident-yesterday"}, r"not a valid incident"),
    (SMALL, {"question": "x?", "expected_answer": "y", "source": " chat "}, r"must be one line of text"),
    (SMALL, {"question": "x?", "expected_sections": ["DT-9"], "known_sections": ["DT-1", "VC-1"]},
     r"expected section 'DT-9' is not in the corpus \(did you mean 'DT-1'\?\)"),
    (SMALL, {"question": "doi TRA may   ngay?", "expected_sections": ["DT-1"]},
     r"case 'q1' already asks this question \('Đổi trả mấy ngày\?'\)"),
    (SMALL, {"question": "x?", "expected_answer": "y", "slice": {"type": ["a"]}}, r"slice 'type' must be a simple"),
    (SMALL, {"question": "x?", "expected_sections": [""]}, r"expected sections must be non-empty strings"),
    (SMALL.replace("version: 1", "version: beta-2"), {"question": "x?", "expected_answer": "y"},
     r"version 'beta-2' cannot be bumped automatically.*Bump it by hand"),
    ('dataset: s\nversion: 1\ncases: [{id: q1, question: "a?", expected_answer: "A"}]\n',
     {"question": "x?", "expected_answer": "y"}, r"line 3: `cases` is written in flow style.*block style"),
    ('{dataset: s, version: 1, cases: [{id: q1, question: "a?", expected_answer: "A"}]}\n',
     {"question": "x?", "expected_answer": "y"}, r"one flow mapping"),
    ('- id: q1\n  question: "a?"\n  expected_answer: "A"\n', {"question": "x?", "expected_answer": "y"},
     r"seeds' flat list of cases.*Convert it to the canonical format"),
    (SMALL.replace("version: 1\n", "version: 1\nchangelog: {v1: x}\n"), {"question": "x?", "expected_answer": "y"},
     r"line 3: `changelog` must be a string or a list of strings"),
])
def test_refusals_leave_file_untouched(tmp_path, text, kwargs, message):
    path = write(tmp_path, text)
    with pytest.raises(DatasetError, match=message) as info:
        add_case(path, today=TODAY, **kwargs)
    assert str(path) in str(info.value)
    assert path.read_bytes() == text.encode("utf-8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["golden.yaml"]


def test_seed_json_flat_list_is_refused(tmp_path):
    text = json.dumps([{"id": "q1", "cau_hoi": "a?", "muc_ky_vong": ["DT-1"]}])
    path = write(tmp_path, text, "golden.json")
    with pytest.raises(DatasetError, match=r"golden.json: this golden set is the seeds' flat list"):
        add_case(path, question="b?", expected_sections=["DT-2"])
    assert path.read_text() == text


def test_broken_original_is_reported_by_the_loader(tmp_path):
    path = write(tmp_path, "dataset: s\nversion: 1\ncases: []\n")
    with pytest.raises(DatasetError, match=r"'cases' must be a non-empty list"):
        add_case(path, question="b?", expected_answer="B")


def test_write_added_is_atomic_keeps_mode_and_refuses_stale_result(tmp_path):
    path = write(tmp_path, SMALL)
    os.chmod(path, 0o640)
    result = add_case(path, question="x?", expected_answer="y", today=TODAY)
    write_added(path, result)
    assert path.read_text(encoding="utf-8") == result.text
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["golden.yaml"]
    # a result prepared from the old text must not overwrite the newer file
    with pytest.raises(DatasetError, match=r"the file changed after the new case was prepared"):
        write_added(path, result)
    assert path.read_text(encoding="utf-8") == result.text


def test_two_adds_in_a_row_keep_bumping(tmp_path):
    path = write(tmp_path, SMALL)
    write_added(path, add_case(path, question="x?", expected_answer="y", today=TODAY))
    second = add_case(path, question="z?", expected_answer="w", source="incident-2026-12-01", today=TODAY)
    write_added(path, second)
    golden = load_golden(path)
    assert [c.id for c in golden.cases] == ["q1", "q2", "q3"] and golden.version == 3
    assert yaml.safe_load(path.read_text(encoding="utf-8"))["changelog"] == [
        "v1 -> v2: + q2: x?", "v2 -> v3: + q3 (incident-2026-12-01): z?"]


# ------------------------------------------------------------------------------------------------
# The pure pieces.
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ids, expected", [
    (["q01", "q02", "q123", "q67"], "q124"),
    (["q01", "q09"], "q10"),
    (["q1", "q9"], "q10"),
    (["q001", "q002"], "q003"),
    (["faq-returns", "faq-shipping"], "case-3"),
    (["a1", "b2"], "case-3"),
    (["case-3", "intro"], "case-4"),
    (["x", "case-3", "y"], "case-4"),
    (["x", "y", "case-3"], "case-4"),
])
def test_next_case_id(ids, expected):
    assert next_case_id(ids) == expected


@pytest.mark.parametrize("old, new", [(4, 5), ("7", "8"), ("007", "008"), ("1.4", "1.5"), ("1.9", "1.10"),
                                      ("2.09", "2.10"), ("2026.11.3", "2026.11.4")])
def test_bump_version(old, new):
    assert bump_version(old) == new


@pytest.mark.parametrize("bad", ["v4", "beta", "1.4-rc1", ""])
def test_bump_version_refuses(bad):
    with pytest.raises(DatasetError, match=r"Bump it by hand"):
        bump_version(bad, "g.yaml")


def test_shorten_and_changelog_line():
    long_q = "Tôi mua áo khoác hôm 20/11, mặc thử thấy chật, giờ đổi sang size lớn hơn thì có mất phí ship không ạ?"
    assert shorten(long_q) == "Tôi mua áo khoác hôm 20/11, mặc thử thấy chật, giờ đổi sang…"
    assert len(shorten(long_q)) <= 60
    assert shorten("  short\n question ") == "short question"
    assert changelog_line(4, 5, "q124", "incident-2026-11-29", "a?") == "v4 -> v5: + q124 (incident-2026-11-29): a?"
    assert changelog_line("1.4", "1.5", "q9", "", "a?") == "v1.4 -> v1.5: + q9: a?"


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_yaml_double_quoted_round_trips(value):
    assert yaml.safe_load("k: " + yaml_double_quoted(value))["k"] == value


def test_self_check_refuses_an_edit_that_would_change_an_existing_case(tmp_path):
    # a keep-chomping block scalar (|+) owns its trailing blank lines: appending after its last text
    # line would change q1's answer, and the check that re-loads the result says so
    text = 'dataset: s\nversion: 1\ncases:\n  - id: q1\n    question: "a?"\n    expected_answer: |+\n      one\n\n\n'
    path = write(tmp_path, text)
    with pytest.raises(DatasetError, match=r"golden.yaml: the edited golden set would not be what was asked "
                                           r"\(an existing case would change\); nothing was written"):
        add_case(path, question="b?", expected_answer="B", today=TODAY)
    assert path.read_bytes() == text.encode("utf-8")


def test_json_changelog_forms(tmp_path):
    base = {"dataset": "s", "version": 1, "cases": [{"id": "q1", "question": "a?", "expected_answer": "A"}]}
    path = write(tmp_path, json.dumps({**base, "changelog": "v0 -> v1: start"}) + "\n", "golden.json")
    result = add_case(path, question="b?", expected_answer="B")
    assert result.text.endswith("}\n")
    assert json.loads(result.text)["changelog"] == ["v0 -> v1: start", "v1 -> v2: + q2: b?"]
    assert json.loads(result.text)["version"] == 2
    path = write(tmp_path, json.dumps({**base, "changelog": {"v1": "start"}}), "golden.json")
    with pytest.raises(DatasetError, match=r"golden.json: `changelog` must be a string or a list of strings"):
        add_case(path, question="b?", expected_answer="B")

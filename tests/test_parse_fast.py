"""The fast YAML read (rageval.yaml_fast) against the strict one (rageval.parse) and PyYAML's own.

``load_yaml`` builds a plain document straight from the parser's events and reads anything else the
strict way. Whatever the text, it must give what the strict read gives: the same data, or the same
error message with the same line. For the documents the fast read builds, the data must also be
what PyYAML's pure-Python SafeLoader makes of them (a reference outside rageval's code).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval.errors import DatasetError
from rageval.golden.set import parse_golden
from rageval.parse import MAX_DEPTH, _Strict, _StrictLoader, load_yaml, load_yaml_node
from rageval.yaml_fast import Unsure, plain_data


class PureStrictLoader(_Strict, yaml.SafeLoader):   # the pure-Python parser, as without libyaml
    pass


def outcome(read, text):
    """("data", repr) or ("error", message): repr keeps key order and tells 1 from 1.0 and True."""
    try:
        return "data", repr(read(text))
    except DatasetError as exc:
        return "error", str(exc)


def strict(text):
    return load_yaml_node(text, "f.yaml", error=DatasetError)[0]


def fast_or_strict(text):
    return load_yaml(text, "f.yaml", error=DatasetError)


def fast(text, loader=_StrictLoader):
    """The fast read alone: its data, or Unsure."""
    reader = loader(text)
    try:
        return plain_data(reader, MAX_DEPTH)
    finally:
        reader.dispose()


def nested(depth):
    return "a: " + "[" * depth + "]" * depth + "\n"


BUILT = {   # documents the fast read builds itself
    "empty": "", "comment only": "# nothing\n", "explicit document": "---\na: 1\n...\n",
    "mapping": "dataset: t\nversion: 3\ncases:\n  - id: q01\n    tags: [pr, holdout]\n",
    "flow": "{a: [1, 2, {b: c}], d: {}, e: []}\n", "top list": "- 1\n- [a, b]\n- {c: d}\n",
    "quoted": "a: \"x\\ty\\u00e9\"\nb: 'it''s'\nc: '1'\nd: \"true\"\n",
    "block scalars": "a: |\n  line 1\n  line 2\nb: >-\n  folded\n  text\nc: |+\n  kept\n\n",
    "nulls": "a: ~\nb: null\nc:\nd: Null\n", "bools": "a: yes\nb: No\nc: on\nd: OFF\ne: true\nf: False\n",
    "ints": "a: 0x1F\nb: 0o17\nc: 017\nd: 1_000\ne: -5\nf: +3\ng: 1:30\nh: 0b101\n" + "i: " + "9" * 400 + "\n",
    "floats": "a: .inf\nb: -.Inf\nc: .nan\nd: 1e3\ne: 6.8523015e+5\nf: 1_0.5\ng: 190:20:30.15\n",
    "timestamps": "a: 2002-12-14\nb: 2001-12-14t21:59:43.10-05:00\nc: 2001-12-14 21:59:43.10\n",
    "scalar keys": "2: a\ntrue: b\n~: c\n1.5: d\n2002-12-14: e\n",
    "explicit key": "? a\n? b\n: c\n", "anchor without alias": "a: &x 1\nb: &y [1, 2]\n",
    "unicode": "câu hỏi: \"Trả hàng trong mấy ngày?\"\n'đổi trả': 7 ngày\n", "crlf": "a: 1\r\nb: [2]\r\n",
    "tab in a quoted value": "a: \"x\ty\"\n", "BOM": "\ufeffa: 1\n", "a scalar": "just text\n",
    "depth at the limit": nested(MAX_DEPTH - 1), "yaml directive": "%YAML 1.1\n---\na: 1\n",
    "long string": "a: " + "x" * 100_000 + "\n", "empty key": "'': 1\n",
}
DECLINED = {   # documents the fast read leaves to the strict read (refused there, or built there)
    "duplicate key": "a: 1\na: 2\n", "duplicate at depth 3": "a:\n  b:\n    c: 1\n    c: 2\n",
    "duplicate 1 and 1.0": "1: a\n1.0: b\n", "duplicate 1 and true": "1: a\ntrue: b\n",
    "duplicate null": "~: a\nnull: b\n", "duplicate in flow": "x: [{a: 1, a: 2}]\n",
    "merge key": "a: 1\n<<: {b: 2}\n", "merge with alias": "base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n",
    "merge as a value": "a: <<\n", "value key": "a: =\n", "alias": "a: &x 1\nb: *x\n",
    "alias bomb": "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\n", "recursive alias": "a: &a [*a]\n",
    "tag str": "a: !!str 1\n", "tag int": "a: !!int \"3\"\n", "tag binary": "a: !!binary aGk=\n",
    "tag set": "a: !!set {x, y}\n", "tag omap": "a: !!omap [{x: 1}]\n",
    "tag python": "a: !!python/object:os.system x\n",
    "local tag": "a: !foo x\n", "non-specific tag": "a: ! 12\n", "tagged mapping": "a: !!map {b: 1}\n",
    "TAG directive": "%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n",
    "complex key": "? [a, b]\n: 1\n", "mapping key": "? {a: 1}\n: 2\n", "second document": "a: 1\n---\nb: 2\n",
    "depth over the limit": nested(MAX_DEPTH + 1), "very deep": nested(100_000),
    "tab indent": "a:\n\tb: 1\n", "bad syntax": "a: [1, 2\nb: 3\n", "bad indent": "a: 1\n b: 2\n  - c\n",
    "non-printable": "a: \x07\n", "C1 control": "a: x\x85y\x9b\n", "bad timestamp": "a: 2001-13-45\n",
    "timestamp out of range": "a: 2001-02-30 00:00:00\n", "unclosed quote": "a: \"x\n",
}


@pytest.mark.parametrize("text", list(BUILT.values()), ids=list(BUILT))
def test_a_plain_document_is_built_as_pyyaml_builds_it(text):
    expected = yaml.load(text.removeprefix("\ufeff"), Loader=yaml.SafeLoader)   # PyYAML's own, pure Python
    assert repr(fast(text.removeprefix("\ufeff"))) == repr(expected)
    assert repr(fast(text.removeprefix("\ufeff"), PureStrictLoader)) == repr(expected)
    assert outcome(fast_or_strict, text) == outcome(strict, text) == ("data", repr(expected))


@pytest.mark.parametrize("text", list(DECLINED.values()), ids=list(DECLINED))
def test_what_the_fast_read_declines_reads_as_the_strict_read_does(text):
    with pytest.raises(Unsure):
        fast(text)
    assert outcome(fast_or_strict, text) == outcome(strict, text)


def test_a_refused_document_keeps_its_message_and_line():
    assert outcome(fast_or_strict, "a: 1\nb:\n  c: 1\n  c: 2\n") == (
        "error", "f.yaml: line 4: key 'c' appears twice (lines 3 and 4); a reader would silently keep the last. "
                 "Keep one.")
    kind, message = outcome(fast_or_strict, "x: 1\ny: &a [1]\nz: *a\n")
    assert kind == "error" and message.startswith("f.yaml: line 3: YAML alias '*a'")


def test_a_bad_golden_case_names_its_line_after_the_fast_read():
    text = ("dataset: t\nversion: 1\ncases:\n  - id: q01\n    question: Q?\n    expected_sections: [A]\n"
            "  - id: q02\n    question: Q?\n    expected_sections: [A]\n    tag: [pr]\n")
    with pytest.raises(DatasetError, match=r"^g\.yaml: line 7: case 'q02': unknown key 'tag' \(did you mean 'tags'"):
        parse_golden(text.encode(), Path("g.yaml"))


# --- generated documents -------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=12), st.sampled_from(["yes", "~", "1:30", "0x1F", "2002-12-14", "<<", "=", ""]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values, st.sampled_from([False, True, None]))
def test_dumped_data_reads_the_same_both_ways(value, flow):
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    assert outcome(fast_or_strict, text) == outcome(strict, text)
    assert repr(yaml.load(text, Loader=yaml.SafeLoader)) == outcome(strict, text)[1]


PIECES = ["a", "b", "1", "1.0", "true", "~", "<<", "=", "? a", "'a'", "\"b\"", "&x 1", "*x", "!!str 2", "! 3",
          "[1, a]", "{a: 1}", "{a: 1, a: 2}", "[", "]", "|", "x\ty", "\t", "\x07", "---", "...", "2001-13-45",
          "- ", "-", ": ", ":", ",", "#c", "%YAML 1.1", "é"]
lines = st.tuples(st.sampled_from(["", "  ", "    ", "- ", "  - "]), st.lists(st.sampled_from(PIECES), max_size=5))


@settings(max_examples=600, deadline=None)
@given(st.lists(lines, max_size=8))
def test_any_text_reads_the_same_both_ways(parts):
    text = "".join(indent + " ".join(pieces) + "\n" for indent, pieces in parts)
    assert outcome(fast_or_strict, text) == outcome(strict, text)

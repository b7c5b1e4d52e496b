"""rageval.files.write_json streams its text (issue 25 §3: a 20,000-case RunResult is a 50 MB file,
which the write used to hold twice more, as text and as UTF-8, on top of the result): the file is
the same bytes json.dumps gives, a value json cannot write still leaves the old file alone, and the
memory the write takes stays at a block, not the file."""

from __future__ import annotations

import json
import math
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.files import PIECE_CHARS, json_pieces, write_json

scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) \
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
keys = st.text(max_size=6) | st.integers(-5, 5) | st.booleans() | st.none() | st.floats(allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=70) | st.tuples(inner, inner)
                      | st.dictionaries(keys, inner, max_size=70), max_leaves=400)


def reference(value, compact: bool) -> str:
    """The text json.dumps gives, as rageval wrote it before the write streamed."""
    if compact:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
    return json.dumps(value, ensure_ascii=False, indent=1, allow_nan=False) + "\n"


@settings(max_examples=300, deadline=None)
@given(value=values, compact=st.booleans())
def test_the_pieces_make_exactly_the_text_json_dumps_gives(value, compact):
    assert "".join(json_pieces(value, compact=compact)) == reference(value, compact)


@pytest.mark.parametrize("compact", [True, False])
def test_a_result_sized_file_is_byte_for_byte_what_json_dumps_writes(tmp_path, compact):
    cases = [{"id": f"q{i:05d}", "question": "Đổi trả trong bao nhiêu ngày? ✅", "metrics": {"hit@1": 1.0, "mrr@5": 0.5},
              "retrieved": [[f"DT-{j}", 0.5 / (j + 1)] for j in range(5)], "tags": ["a", "b"]} for i in range(3000)]
    data = {"schema_version": 2, "cases": cases, "golden": {"cases": {c["id"]: c["question"] for c in cases}}}
    path = tmp_path / "run.json"
    write_json(path, data, compact=compact)
    assert path.read_bytes() == reference(data, compact).encode("utf-8")


def test_a_value_json_cannot_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("old\n", encoding="utf-8")
    cases = [{"id": i, "score": 1.0} for i in range(200_000)] + [{"id": "last", "score": math.nan}]
    with pytest.raises(ValueError):
        write_json(path, {"cases": cases}, compact=True)
    assert path.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_writing_holds_a_block_of_the_text_not_the_whole_file(tmp_path):
    row = {"question": "Khách hàng được đổi trả trong bao nhiêu ngày kể từ ngày nhận hàng?", "score": 0.25}
    data = {"cases": [dict(row, id=f"q{i}") for i in range(100_000)]}       # ~11 MB of text
    size = len(reference(data, True))
    assert size > 10 * PIECE_CHARS
    tracemalloc.start()
    try:
        write_json(tmp_path / "run.json", data, compact=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # a block or two, not the file's text (2 bytes a character here) and its UTF-8 on top of the tree
    assert peak < size / 4, (peak, size)
    assert (tmp_path / "run.json").stat().st_size == len(reference(data, True).encode("utf-8"))

"""Writing a RunResult makes each case's record as it is written (issue 25 §3: 20,000 cases held
their records, ~80 MB, all at once on top of the run): the file is byte for byte the JSON of
``to_dict`` (the packed schema 2: chunk table, golden fields left to the snapshot, a reused chunk id
kept inline), it reads back to the same run, and the write holds a few records, not all."""

from __future__ import annotations

import tracemalloc

from builders import case, run
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.files import to_json, write_json
from rageval.github.action import redacted_tree
from rageval.parse import map_strings
from rageval.records import Retrieved
from rageval.results import load_result

texts = st.sampled_from(["Đổi trả trong 7 ngày.", "Phí 30.000 đồng.", "", "Same-day delivery ✅"])
items = st.builds(Retrieved, chunk_id=st.sampled_from(["c1", "c2", "c3"]),
                  sections=st.sampled_from([("DT-1",), ("DT-1", "DT-2"), ()]), text=texts,
                  score=st.none() | st.floats(0, 1), tokens=st.none() | st.integers(1, 9))


@st.composite
def runs(draw):
    cases = []
    for i in range(draw(st.integers(0, 6))):
        retrieved = draw(st.none() | st.lists(items, max_size=4).map(tuple))
        cases.append(case(f"q{i}", question=draw(st.sampled_from(["Bao lâu?", "?"])),
                          expected=draw(st.sampled_from(["7 ngày", ""]))).replace(retrieved=retrieved))
    snapshot = {c.id: {"question": "Bao lâu?", "expected_answer": "7 ngày", "expected_sections": ["DT-1"],
                       "slice": {"type": "lookup"}, "tags": ["pr"]}
                for c in cases if draw(st.booleans())}
    return run(cases, golden_cases=snapshot or None)


@settings(max_examples=200, deadline=None)
@given(result=runs())
def test_the_file_is_the_json_of_to_dict_and_reads_back_to_the_same_run(tmp_path_factory, result):
    path = tmp_path_factory.mktemp("w") / "run.json"
    write_json(path, result)
    assert path.read_bytes() == to_json(result.to_dict(), compact=True).encode("utf-8")
    back = load_result(path)
    assert [c.to_dict() for c in back.cases] == [c.to_dict() for c in result.cases]


def test_writing_a_run_holds_a_few_records_not_all_of_them(tmp_path):
    chunks = [Retrieved(f"c{j}", ("DT-1",), f"Đổi trả trong {j} ngày kể từ ngày nhận hàng.", 0.5, 12)
              for j in range(50)]
    cases = [case(f"q{i:05d}", question="Khách được đổi trả trong bao nhiêu ngày?", expected="7 ngày")
             .replace(retrieved=tuple(chunks[(i + k) % 50] for k in range(5))) for i in range(5_000)]
    result = run(cases)
    tracemalloc.start()
    try:
        result.to_dict()
        _, whole = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        write_json(tmp_path / "run.json", result)
        _, written = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert written < whole / 4, (written, whole)
    assert load_result(tmp_path / "run.json").case_map["q04999"].retrieved[4].chunk_id == "c3"


def test_the_action_writes_the_run_redacted_record_by_record(tmp_path):
    secret = "sk-live-0123456789"
    cases = [case(f"q{i}", question=f"Mã {secret}?", answer=f"Khóa là {secret}.")
             .replace(retrieved=(Retrieved("c1", ("DT-1",), f"Văn bản {secret}", 0.5, 3),)) for i in range(3)]
    result = run(cases)

    def redact(text: str) -> str:
        return text.replace(secret, "***")
    write_json(tmp_path / "run.json", redacted_tree(result, redact), compact=True)
    written = (tmp_path / "run.json").read_bytes()
    assert written == to_json(map_strings(result.to_dict(), redact), compact=True).encode("utf-8")
    assert secret.encode() not in written and written.count(b"***") >= 7

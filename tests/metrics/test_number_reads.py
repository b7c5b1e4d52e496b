"""What the number rule reads more than once in a run: the golden set's expected answers and source
sections. The rule reads them per case, and the run's golden-set and corpus snapshots read them
again after every case has been answered; a large run's one-off answers must not push them out of
memory in between (at 20,000 cases they did, and every one was read twice)."""

from __future__ import annotations

import pytest

from rageval.metrics import numbers
from rageval.metrics.numbers import check_numbers, extract_quantities


@pytest.fixture
def reads(monkeypatch):
    """The texts the scanner reads, in order, with the memo caches empty before and after."""
    seen: list[str] = []
    scan = numbers._scan
    caches = (numbers._stated, numbers._sourced, numbers._answered)

    def counted(text, added=(), mentions=True):
        seen.append(text)
        return scan(text, added, mentions)
    for cache in caches:
        cache.cache_clear()
    monkeypatch.setattr(numbers, "_scan", counted)
    yield seen
    for cache in caches:
        cache.cache_clear()


def test_golden_texts_are_read_once_however_many_answers_come_between(reads):
    golden = [(f"Đổi trả trong {i} ngày, phí {i}.000 đồng.", f"Mục {i}: đổi trả trong {i} ngày, phí {i}.000 đồng.")
              for i in range(1, 201)]
    for expected, source in golden:
        for j in range(50):                     # 10,000 distinct answers, more than the answers' cache holds
            answer = f"Trong {expected.split()[3]} ngày, lần {j}."
            check_numbers(answer, expected, source)
    assert len(reads) == 10_000 + 2 * 200
    del reads[:]
    # the snapshots read the same texts again: all from memory
    snapshot = {source: sorted(str(q) for q in extract_quantities(source, mentions=False)) for _, source in golden}
    expected_numbers = {expected: sorted(str(q) for q in extract_quantities(expected)) for expected, _ in golden}
    assert reads == []
    assert snapshot[golden[6][1]] == ["7 ngày", "7.000 đồng"]
    assert expected_numbers[golden[29][0]] == ["30 ngày", "30.000 đồng"]


def test_an_answer_that_repeats_is_read_once(reads):
    for _ in range(3):
        result = check_numbers("Trong 7 ngày.", "Đổi trả trong 7 ngày.", "Đổi trả trong 7 ngày kể từ khi nhận.")
        assert result.status == "pass"
    assert sorted(reads) == sorted(["Trong 7 ngày.", "Đổi trả trong 7 ngày.", "Đổi trả trong 7 ngày kể từ khi nhận."])


def test_a_source_read_without_its_mentions_states_the_same_quantities():
    """The corpus snapshot and the number rule read a source section without cutting its mentions out
    (they only compare it): the same quantities, each shown in its canonical form."""
    text = "Hoàn tiền trong 3-5 ngày làm việc; phí $7.95 hoặc 30 days, tối đa 1,5 triệu đồng."
    written = extract_quantities(text)
    compared = extract_quantities(text, mentions=False)
    assert [q.shown for q in written] == ["3 ngày làm việc", "5 ngày làm việc", "$7.95", "30 days", "1,5 triệu đồng"]
    assert compared == written
    assert [q.shown for q in compared] == [str(q) for q in written] == [
        "3 ngày làm việc", "5 ngày làm việc", "7,95 USD", "30 ngày", "1.500.000 đồng"]

"""The number rule: the incident's verdicts, each normalisation, and the units setting."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics.numbers import (
    UNITS,
    Quantity,
    check_numbers,
    extract_quantities,
    resolve_units,
)
from rageval.metrics.registry import REGISTRY, CaseInput

# Policy sections DT-1..DT-6 of the seed's fictional BanHang return policy (facts, retyped).
POLICY = {
    "DT-1": "Khách được đổi hoặc trả hàng trong 7 ngày kể từ ngày nhận hàng. "
            "Hàng phải còn tem, nhãn và hóa đơn.",
    "DT-2": "Điện thoại, laptop, máy tính bảng lỗi do nhà sản xuất được đổi máy mới trong 7 ngày. "
            "Sau đó máy được bảo hành 12 tháng tại hãng.",
    "DT-3": "Thành viên BanHang Plus được đổi trả hàng thời trang trong 30 ngày.",
    "DT-4": "Tiền hoàn về phương thức thanh toán ban đầu trong 5 ngày làm việc sau khi kho nhận hàng trả.",
    "DT-5": "Đổi trả do lỗi của BanHang được miễn phí vận chuyển. "
            "Khách đổi ý chịu phí vận chuyển 30.000 đồng.",
    "DT-6": "Thực phẩm, đồ lót và thẻ quà tặng không được đổi trả.",
}
# case id -> (expected sections, expected answer)
GOLDEN = {
    "q01": (["DT-1"], "Trong 7 ngày kể từ ngày nhận hàng, hàng còn tem, nhãn và hóa đơn."),
    "q03": (["DT-4"], "Trong 5 ngày làm việc sau khi kho nhận hàng trả."),
    "q04": (["DT-5"], "Có. Khách đổi ý chịu phí vận chuyển 30.000 đồng."),
    "q05": (["DT-2", "DT-3"], "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày. "
                              "Mức 30 ngày chỉ áp dụng cho hàng thời trang của thành viên Plus."),
}
# (case, configuration, answer, status, missing, outside source) — the seed's printed verdicts.
SEED_VERDICTS = [
    ("q01", "chunk-200", "Bạn được đổi hoặc trả trong 7 ngày kể từ ngày nhận hàng, nhớ giữ tem và hóa đơn.",
     "pass", [], []),
    ("q01", "chunk-800", "Bạn có 30 ngày để đổi trả áo, miễn là hàng còn tem và nhãn.",
     "fail", ["7 ngày"], ["30 ngày"]),
    ("q03", "chunk-800", "Tiền sẽ về tài khoản của bạn trong 5 ngày sau khi kho nhận hàng.",
     "fail", ["5 ngày làm việc"], ["5 ngày"]),
    ("q04", "chunk-800", "Có. Nếu đổi ý, bạn chịu phí vận chuyển 30.000 đồng.", "pass", [], []),
    ("q05", "chunk-800", "Không. Điện thoại lỗi được đổi máy mới trong 7 ngày, sau đó bảo hành 12 tháng "
                         "tại hãng. Mức 30 ngày chỉ dành cho hàng thời trang của thành viên Plus.",
     "pass", [], []),
]


def _source(case: str) -> str:
    return " ".join(POLICY[s] for s in GOLDEN[case][0])


@pytest.mark.parametrize("case,config,answer,status,missing,outside", SEED_VERDICTS,
                         ids=[f"{c}-{cfg}" for c, cfg, *_ in SEED_VERDICTS])
def test_seed_verdicts(case, config, answer, status, missing, outside):
    result = check_numbers(answer, GOLDEN[case][1], _source(case))
    assert result.status == status
    assert result.details["missing"] == missing
    assert result.details["outside_source"] == outside


def test_incident_answer_reason_and_details():
    result = check_numbers("Bạn có 30 ngày để đổi trả áo, miễn là hàng còn tem và nhãn.",
                           GOLDEN["q01"][1], _source("q01"))
    assert result.passed is False
    assert result.reason == "missing 7 ngày; outside source 30 ngày"
    assert result.details == {"expected": ["7 ngày"], "found": ["30 ngày"],
                              "missing": ["7 ngày"], "outside_source": ["30 ngày"]}
    assert result.score == 0.0
    assert result.to_dict()["outside_source"] == ["30 ngày"]


def test_passing_answer_lists_quantities_sorted_by_unit_then_value():
    answer = SEED_VERDICTS[-1][2]
    result = check_numbers(answer, GOLDEN["q05"][1], _source("q05"))
    assert result.passed is True
    assert result.details["found"] == ["7 ngày", "30 ngày", "12 tháng"]
    assert result.details["expected"] == ["7 ngày", "30 ngày"]
    assert result.reason == "numbers match: 7 ngày, 30 ngày, 12 tháng"
    assert result.score == 1.0


def test_partial_score_counts_right_quantities():
    # expected {7 ngày, 30 ngày}; answer {7 ngày, 10 ngày}: 7 found, 30 missing, 10 outside source
    result = check_numbers("Đổi máy mới trong 7 ngày, thành viên Plus có 10 ngày.",
                           GOLDEN["q05"][1], _source("q05"))
    assert result.passed is False
    assert result.score == pytest.approx(2 / 4)
    assert result.reason == "missing 30 ngày; outside source 10 ngày"


def test_no_answer_is_skipped():
    result = check_numbers(None, GOLDEN["q01"][1], _source("q01"))
    assert result.status == "skipped"
    assert result.reason == "no answer: retrieval-only case"


def test_no_numbers_on_either_side_is_skipped():
    result = check_numbers("Không, thẻ quà tặng không được đổi trả.",
                           "Không. Thẻ quà tặng không được đổi trả.", POLICY["DT-6"])
    assert result.status == "skipped"
    assert result.reason == "no numbers"


def test_invented_number_without_expected_numbers_fails():
    result = check_numbers("Thẻ quà tặng được đổi trong 3 ngày.",
                           "Không. Thẻ quà tặng không được đổi trả.", POLICY["DT-6"])
    assert result.passed is False
    assert result.details["missing"] == []
    assert result.details["outside_source"] == ["3 ngày"]


# Two sections where the first ends in a bare number and the next starts with a unit word: read as
# one text, "5" and "Ngày" would make "5 ngày", a quantity neither section states.
SPLIT = ("Mã vùng của kho Bình Dương là 5", "Ngày giao hàng được báo qua email.")


def test_sections_are_read_one_by_one():
    answer = "Hàng được giao trong 5 ngày."
    joined = check_numbers(answer, "Ngày giao được báo qua email.", "\n\n".join(SPLIT))
    assert joined.passed is True                        # what a single text gives: the two pieces meet
    apart = check_numbers(answer, "Ngày giao được báo qua email.", SPLIT)
    assert apart.passed is False and apart.details["outside_source"] == ["5 ngày"]
    # a quantity one of the sections states is still in the source
    assert check_numbers("Phí là 30.000 đồng.", "", (POLICY["DT-1"], POLICY["DT-5"])).passed is True
    # a run's number check reads a case's sections as the CaseInput lists them
    x = CaseInput(id="g1", question="?", expected_answer="Ngày giao được báo qua email.", expected_sections=(),
                  answer=answer, retrieved=None, source="\n\n".join(SPLIT), sources=SPLIT)
    assert REGISTRY.checks["numbers"].run(x).details["outside_source"] == ["5 ngày"]


def test_answer_with_numbers_in_words_passes():
    result = check_numbers("Bạn có bảy ngày kể từ khi nhận hàng.", GOLDEN["q01"][1], _source("q01"))
    assert result.passed is True


def test_answer_with_a_week_and_policy_in_days():
    result = check_numbers("You can return it within one week of delivery.",
                           GOLDEN["q01"][1], _source("q01"))
    assert result.passed is True


# --- normalisation, one row per rule ----------------------------------------------------------

EQUIVALENT = [
    # Vietnamese number words
    ("bảy ngày", "7 ngày"),
    ("ba mươi ngày", "30 ngày"),
    ("mười hai tháng", "12 tháng"),
    ("hai mươi mốt ngày", "21 ngày"),
    ("hai mươi tư giờ", "24 giờ"),
    ("mười lăm phút", "15 phút"),
    ("hai mươi lăm ngày", "25 ngày"),
    ("một trăm linh năm ngày", "105 ngày"),
    ("ba trăm nghìn đồng", "300.000 đồng"),
    # English number words and units
    ("seven days", "7 ngày"),
    ("Seven Days", "7 ngày"),
    ("twelve months", "12 tháng"),
    ("twenty-one days", "21 ngày"),
    ("thirty days", "30 ngày"),
    ("one hundred and twenty days", "120 ngày"),
    ("a 7-day window", "7 ngày"),
    ("an hour", "1 giờ"),
    # weeks are days
    ("một tuần", "7 ngày"),
    ("2 tuần", "14 ngày"),
    ("one week", "7 ngày"),
    ("a week", "7 ngày"),
    ("3 weeks", "21 ngày"),
    # currency spellings
    ("30k", "30.000 đồng"),
    ("30K", "30.000 đồng"),
    ("30 nghìn đồng", "30.000 đồng"),
    ("30 ngàn", "30.000 đồng"),
    ("30.000 đồng", "30.000 đồng"),
    ("30,000 VND", "30.000 đồng"),
    ("30000đ", "30.000 đồng"),
    ("30.000 vnđ", "30.000 đồng"),
    ("30.000₫", "30.000 đồng"),
    ("ba mươi nghìn đồng", "30.000 đồng"),
    ("2 triệu", "2.000.000 đồng"),
    ("$5", "5 USD"),
    ("5 USD", "5 USD"),
    ("5 đô la", "5 USD"),
    ("five dollars", "5 USD"),
    ("$1.5 million", "1500000 USD"),
    # percent
    ("15%", "15%"),
    ("15 phần trăm", "15%"),
    ("fifteen percent", "15%"),
    # decimal comma / point
    ("1,5 triệu đồng", "1.500.000 đồng"),
    ("1.5 million VND", "1.500.000 đồng"),
    ("2,5%", "2,5%"),
    ("1.234,5 đồng", "1.234,5 đồng"),
    ("1,000,000 VND", "1.000.000 đồng"),
    # typed without diacritics
    ("7 ngay", "7 ngày"),
    ("5 ngay lam viec", "5 ngày làm việc"),
    ("30.000 dong", "30.000 đồng"),
    ("bay ngay", "7 ngày"),
    ("mot tuan", "7 ngày"),
    ("ba muoi ngay", "30 ngày"),
    ("muoi hai thang", "12 tháng"),
    ("muoi lam ngay", "15 ngày"),
    ("2 nam", "2 năm"),
    ("15 phan tram", "15%"),
    # business days
    ("5 business days", "5 ngày làm việc"),
    ("5 working days", "5 ngày làm việc"),
    ("năm ngày làm việc", "5 ngày làm việc"),
    # "năm": five before a unit, year after a number
    ("năm ngày", "5 ngày"),
    ("1 năm", "1 năm"),
    ("năm năm", "5 năm"),
    ("mười năm", "10 năm"),
    ("hai mươi năm", "20 năm"),
    ("năm mươi ngày", "50 ngày"),
]


@pytest.mark.parametrize("text,canonical", EQUIVALENT)
def test_spellings_normalise_to_one_quantity(text, canonical):
    quantities = extract_quantities(text)
    assert len(quantities) == 1, quantities
    assert extract_quantities(canonical) == quantities


@pytest.mark.parametrize("text,expected", [
    ("7 ngày", Quantity(7, "ngày")),
    ("seven days", Quantity(7, "ngày")),
    ("30,000 VND", Quantity(30000, "đồng")),
    ("1,5 triệu đồng", Quantity(1500000, "đồng")),
    ("2,5%", Quantity(Decimal("2.5"), "%")),
    ("1,5 giờ", Quantity(Decimal("1.5"), "giờ")),
    ("5 ngày làm việc", Quantity(5, "ngày làm việc")),
])
def test_extracted_values(text, expected):
    assert extract_quantities(text) == [expected]


@pytest.mark.parametrize("text,expected", [
    ("5 ngày", ["5 ngày"]),
    ("5 ngày làm việc", ["5 ngày làm việc"]),
    ("5 days", ["5 ngày"]),
    ("5 business days", ["5 ngày làm việc"]),
    ("Tiền về trong 5 ngày làm việc, hàng đổi trong 5 ngày.", ["5 ngày làm việc", "5 ngày"]),
])
def test_business_days_are_not_days(text, expected):
    assert [str(q) for q in extract_quantities(text)] == expected


@pytest.mark.parametrize("text", [
    "năm 2026",
    "Chính sách áp dụng từ ngày 28 tháng 9 năm 2026.",
    "Giao vào thứ 7 ngày 3/10.",
    "Hẹn thứ năm ngày 1/10.",
    "Thứ hai ngày 28, nhóm rollback.",
    "năm nay",
    "Áp dụng cho phiên bản 1.2.3 ngày mai.",
    "Hoàn tiền sau ngày nhận hàng.",
    "sau ngay nhan hang",        # bare "sau" is "after", not six
    "bay ngày",                  # no diacritics on the number, diacritics on the unit: not "bảy"
    "một số ngày",
    "Mục DT-1 nói về đổi trả.",
    "a ngày",
])
def test_no_quantity(text):
    assert extract_quantities(text) == []


@pytest.mark.parametrize("text,expected", [
    ("3-5 ngày", ["3 ngày", "5 ngày"]),
    ("từ 3 đến 5 ngày làm việc", ["3 ngày làm việc", "5 ngày làm việc"]),
    ("7 hoặc 30 ngày", ["7 ngày", "30 ngày"]),
    ("20-30k", ["20.000 đồng", "30.000 đồng"]),
    ("2 to 3 weeks", ["14 ngày", "21 ngày"]),
])
def test_ranges_carry_the_unit_to_both_ends(text, expected):
    assert [str(q) for q in extract_quantities(text)] == expected


@pytest.mark.parametrize("quantity,text", [
    (Quantity(7, "ngày"), "7 ngày"),
    (Quantity(5, "ngày làm việc"), "5 ngày làm việc"),
    (Quantity(12, "tháng"), "12 tháng"),
    (Quantity(30000, "đồng"), "30.000 đồng"),
    (Quantity(1500000, "đồng"), "1.500.000 đồng"),
    (Quantity(15, "%"), "15%"),
    (Quantity(Decimal("2.50"), "%"), "2,5%"),
    (Quantity(5, "USD"), "5 USD"),
    (Quantity(Decimal("7.0"), "ngày"), "7 ngày"),
])
def test_human_form(quantity, text):
    assert str(quantity) == text


def test_integral_decimal_equals_int():
    assert Quantity(Decimal("7.00"), "ngày") == Quantity(7, "ngày")
    assert len({Quantity(Decimal("7"), "ngày"), Quantity(7, "ngày")}) == 1


def test_quantity_rejects_unknown_unit():
    with pytest.raises(ValueError, match="unknown unit 'tuần'"):
        Quantity(1, "tuần")


def test_order_of_appearance_with_repeats():
    text = "Đổi trong 7 ngày; Plus được 30 ngày; lỗi máy đổi trong 7 ngày."
    assert [str(q) for q in extract_quantities(text)] == ["7 ngày", "30 ngày", "7 ngày"]


# --- property tests ---------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(n=st.integers(min_value=1, max_value=10**7), unit=st.sampled_from(UNITS))
def test_human_form_reads_back(n, unit):
    quantity = Quantity(n, unit)
    assert extract_quantities(str(quantity)) == [quantity]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(min_value=1, max_value=10**7))
def test_currency_formats_agree(n):
    dotted = f"{n:,}".replace(",", ".") + " đồng"
    commas = f"{n:,} VND"
    plain = f"{n}đ"
    assert extract_quantities(dotted) == extract_quantities(commas) == extract_quantities(plain) \
        == [Quantity(n, "đồng")]


@settings(max_examples=200, deadline=None)
@given(whole=st.integers(min_value=0, max_value=10**6), frac=st.integers(min_value=1, max_value=999),
       unit=st.sampled_from(UNITS))
def test_decimal_human_form_reads_back(whole, frac, unit):
    quantity = Quantity(Decimal(f"{whole}.{frac:03d}"), unit)
    assert extract_quantities(str(quantity)) == [quantity]


# --- units setting ----------------------------------------------------------------------------

def test_units_limit_what_is_checked():
    text = "Phí 30.000 đồng, hoàn trong 5 ngày làm việc, bảo hành 12 tháng."
    assert [str(q) for q in extract_quantities(text, units=["đồng"])] == ["30.000 đồng"]
    assert [str(q) for q in extract_quantities(text, units=["days", "months"])] == ["12 tháng"]


def test_units_limit_never_reads_business_days_as_days():
    # "ngày làm việc" is still recognised (and dropped), never shortened to "5 ngày"
    assert extract_quantities("5 ngày làm việc", units=["ngày"]) == []


def test_units_limit_applies_to_check_numbers():
    answer = "Bạn chịu phí 30.000 đồng, trong 3 ngày."
    expected = "Khách đổi ý chịu phí vận chuyển 30.000 đồng."
    assert check_numbers(answer, expected, POLICY["DT-5"]).passed is False
    assert check_numbers(answer, expected, POLICY["DT-5"], units=["đồng"]).passed is True


@pytest.mark.parametrize("names,canonical", [
    (["ngày", "đồng"], {"ngày", "đồng"}),
    (["Ngày Làm Việc"], {"ngày làm việc"}),
    (["ngay lam viec", "dong", "thang"], {"ngày làm việc", "đồng", "tháng"}),
    (["business days", "VND", "usd", "percent"], {"ngày làm việc", "đồng", "USD", "%"}),
])
def test_unit_names_accepted(names, canonical):
    assert resolve_units(names) == canonical


@pytest.mark.parametrize("names,message", [
    (["ngày", "dayz"], r"unknown unit 'dayz' in checks\.units \(did you mean 'days'\?\); "
                       r"valid unit names are: ngày làm việc, ngày, tháng, năm, giờ, phút, %, đồng, USD"),
    (["euro"], r"unknown unit 'euro'.*valid unit names are: ngày làm việc, ngày"),
    (["tuần"], r"'tuần' in checks\.units is not a unit of its own: weeks are counted as days"),
    (["weeks"], r"weeks are counted as days \(1 tuần = 7 ngày\); list 'ngày' instead"),
    ([], r"checks\.units is empty"),
    ("ngày", r"checks\.units must be a list of unit names"),
    ([7], r"checks\.units entries must be strings"),
])
def test_bad_unit_names(names, message):
    with pytest.raises(ValueError, match=message):
        extract_quantities("7 ngày", units=names)


def test_bad_unit_names_rejected_by_check_numbers_even_without_answer():
    with pytest.raises(ValueError, match="valid unit names are"):
        check_numbers(None, "7 ngày", "7 ngày", units=["fortnight"])


# --- digits that are not decimal digits (review: "0.02²" raised decimal.InvalidOperation) -------

@pytest.mark.parametrize("text,expected", [
    ("0.02²", []),                                # a superscript is a mark, not a digit of the number
    ("diện tích 5 m³", []),
    ("① Trả trong 7 ngày", ["7 ngày"]),           # a circled list number is not a quantity
    ("trong 7 ngày¹ kể từ ngày nhận", ["7 ngày"]),  # a footnote mark ends the unit, it does not hide it
    ("$²", []),
    ("٣ ngày", ["3 ngày"]),                        # Arabic-Indic digits are decimal digits
])
def test_digits_that_are_not_decimal_digits(text, expected):
    assert [str(q) for q in extract_quantities(text)] == expected


def test_check_numbers_on_an_answer_with_superscripts_and_circled_digits():
    result = check_numbers("① Đổi trong 7 ngày² ③", "Trong 7 ngày.", "Khách được đổi trong 7 ngày.")
    assert result.passed and result.details["found"] == ["7 ngày"]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789.,$ -²³¹⁰⁴①⑳❶٣３ngàyđồk%")), max_size=24))
def test_any_mix_of_digit_like_characters_reads_without_error(text):
    for q in extract_quantities(text):
        assert q.unit in UNITS

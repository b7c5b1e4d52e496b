"""Units beyond days and money (issue 21 §6): the shipped ones — lần / times, km, m, kg, GB / MB,
besides %, giờ / hours — in both languages, and units ``checks.units`` adds with their words."""

from __future__ import annotations

import json

import pytest

from rageval.config import load_config
from rageval.errors import ConfigError
from rageval.metrics.numbers import Unit, check_numbers, extract_quantities, resolve_units


@pytest.mark.parametrize("text, expected", [
    ("Mỗi sản phẩm được đổi tối đa 2 lần.", ["2 lần"]),
    ("giao lại tối đa ba lần", ["3 lần"]),
    ("exchanged at most 2 times", ["2 lần"]),
    ("chỉ đổi địa chỉ một lần", ["1 lần"]),
    ("miễn phí trong bán kính 20 km", ["20 km"]),
    ("within 20 kilometers", ["20 km"]),
    ("cách kho 15 cây số", ["15 km"]),
    ("dây dài 5 mét", ["5 m"]),
    ("a 5 m cable", ["5 m"]),
    ("diện tích 5 m²", []),                                   # an area is no length
    ("kiện hàng tối đa 30 kg", ["30 kg"]),
    ("up to 30 kilograms", ["30 kg"]),
    ("nặng hai ký", ["2 kg"]),
    ("gói 64 GB", ["64 GB"]),
    ("ảnh dưới 500 MB", ["500 MB"]),
    ("a 2 gigabytes plan", ["2 GB"]),
    ("giảm 15%", ["15%"]),
    ("trong 24 giờ", ["24 giờ"]),
    ("within 24 hours", ["24 giờ"]),
])
def test_the_shipped_units_in_both_languages(text, expected):
    assert [str(q) for q in extract_quantities(text)] == expected


@pytest.mark.parametrize("expected, answer", [("tối đa 2 lần", "tối đa 3 lần"), ("20 km", "30 km"),
                                              ("30 kg", "50 kg"), ("64 GB", "128 GB")])
def test_the_number_rule_catches_a_changed_count_or_distance(expected, answer):
    result = check_numbers(answer, expected, expected)
    assert result.status == "fail" and result.details["missing"] and result.details["outside_source"]
    assert check_numbers(expected, expected, expected).status == "pass"


SUAT = Unit("suất", ("suất", "suat", "serving", "servings"))


def test_checks_units_adds_a_unit_with_its_words_in_both_languages():
    assert [str(q) for q in extract_quantities("mỗi khách 2 suất, English: 3 servings, 7 ngày", [SUAT])] == [
        "2 suất", "3 suất", "7 ngày"]                             # added units join every built-in one
    assert [str(q) for q in extract_quantities("2 suất và 7 ngày, 3 lần", ["ngày", SUAT])] == ["2 suất", "7 ngày"]
    result = check_numbers("mỗi khách 3 suất", "mỗi khách 2 suất", "Mỗi khách được 2 suất ăn.", [SUAT])
    assert result.status == "fail" and result.reason == "missing 2 suất; outside source 3 suất"
    assert resolve_units([{"name": "suất", "words": ["suất"]}]) >= {"suất", "ngày", "lần"}


@pytest.mark.parametrize("units, message", [
    ([Unit("km", ("km",))], r"'km' is a built-in unit; list it by name"),
    ([Unit("suất", ())], r"unit 'suất' needs `words`"),
    ([Unit("tuần lễ", ("tuần",))], r"the word 'tuần' of unit 'tuần lễ' already spells a unit"),
    ([Unit("", ("x",))], r"an added unit needs a name"),
])
def test_an_added_unit_that_is_no_new_unit_is_refused(units, message):
    with pytest.raises(ValueError, match=message):
        resolve_units(units)


def write(tmp_path, text):
    path = tmp_path / "rageval.yml"
    path.write_text("golden: g.yaml\ncorpus: docs/*.md\n" + text, encoding="utf-8")
    return path


def test_checks_units_in_the_config_adds_units_and_round_trips(tmp_path):
    cfg = load_config(write(tmp_path, "checks:\n  units:\n    - ngày\n    - {name: suất, words: [suất, servings]}\n"))
    assert cfg.checks.units == ("ngày", Unit("suất", ("suất", "servings")))
    assert cfg.to_dict()["checks"]["units"] == ["ngày", {"name": "suất", "words": ["suất", "servings"]}]
    again = load_config(write(tmp_path, "checks:\n  units: " + json.dumps(cfg.to_dict()["checks"]["units"]) + "\n"))
    assert again.checks.units == cfg.checks.units


@pytest.mark.parametrize("text, message", [
    ("checks: {units: [{name: suất}]}\n", r"checks.units\[0\].words"),
    ("checks: {units: [{name: suất, words: [suất], factor: 2}]}\n", r"unknown key 'checks.units\[0\].factor'"),
    ("checks: {units: [{name: km, words: [km]}]}\n", r"'km' is a built-in unit"),
    ("checks: {units: [7]}\n", r"a list of unit names and \{name: …, words: \[…\]\} entries"),
])
def test_a_bad_added_unit_in_the_config_names_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text))

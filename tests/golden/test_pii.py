"""Personal data `golden candidates` scrubs without a names list (issue 21 §7): a table of log
lines in Vietnamese and English, each with what a person labelling the candidates may see. Policy
quantities ("7 ngày", "30.000đ") and ordinary words must survive."""

from __future__ import annotations

import re

import pytest

from rageval.golden.candidates import Scrubber, scrub

TABLE = [
    # --- names: family name + given names, any case, with or without diacritics -------------------
    ("Em là Nguyễn Văn An, muốn đổi áo", "Em là <NAME>, muốn đổi áo"),
    ("tran thi bich ngoc hoi ve don hang", "<NAME> hoi ve don hang"),
    ("NGUYEN VAN AN dat hang hom qua", "<NAME> dat hang hom qua"),
    ("Tran Bich Ngoc đặt 2 áo", "<NAME> đặt 2 áo"),
    ("Lê Thị Hoa cần đổi size", "<NAME> cần đổi size"),
    # --- names after kinship / title cues and "my name is" -----------------------------------------
    ("Chị Hoa ơi đổi trả mấy ngày?", "Chị <NAME> ơi đổi trả mấy ngày?"),
    ("anh Tuấn đặt đơn hôm qua", "anh <NAME> đặt đơn hôm qua"),
    ("tên là an nguyen, muốn hỏi bảo hành", "tên là <NAME>, muốn hỏi bảo hành"),
    ("Hi, my name is John Smith and I want a refund", "Hi, my name is <NAME> and I want a refund"),
    ("John Smith ordered a jacket", "<NAME> ordered a jacket"),
    ("This is Sarah O'Connor, where is my parcel?", "This is <NAME>, where is my parcel?"),
    ("Mr Smith wants to return it", "Mr <NAME> wants to return it"),
    # --- addresses -------------------------------------------------------------------------------------
    ("giao tới 123 Nguyễn Huệ, Quận 1 được không", "giao tới <ADDRESS> được không"),
    ("dia chi so 45 ngo 12 Lang Ha", "dia chi <ADDRESS>"),
    ("nhà em ở số 7 đường Lê Lợi, phường Bến Nghé", "nhà em ở <ADDRESS>"),
    ("ship to 221B Baker Street, NW1 6XE please", "ship to <ADDRESS> please"),
    ("my postcode is SW1A 1AA", "my postcode is <ADDRESS>"),
    ("deliver to 10 Downing Street", "deliver to <ADDRESS>"),
    # --- dates of birth, next to a birth cue -------------------------------------------------------------
    ("ngày sinh 12/03/1990 có được giảm giá không", "ngày sinh <DOB> có được giảm giá không"),
    ("em sinh ngày 1990-03-12", "em sinh ngày <DOB>"),
    ("DOB: March 12, 1990", "DOB: <DOB>"),
    ("I was born on 12 March 1990", "I was born on <DOB>"),
    ("sinh năm 1990 thì có ưu đãi không", "sinh năm <DOB> thì có ưu đãi không"),
    # --- emails written to dodge a filter, IBANs, plates, order ids ---------------------------------
    ("mail em an.nguyen [at] gmail [dot] com", "mail em <EMAIL>"),
    ("email: an.nguyen(at)gmail(dot)com", "email: <EMAIL>"),
    ("write to an.nguyen at gmail dot com", "write to <EMAIL>"),
    ("refund to IBAN GB82 WEST 1234 5698 7654 32", "refund to IBAN <IBAN>"),
    ("xe biển số 51F-123.45 tới lấy hàng", "xe biển số <PLATE> tới lấy hàng"),
    ("xe máy 59-X1 123.45", "xe máy <PLATE>"),
    ("the van AB12 CDE will collect it", "the van <PLATE> will collect it"),
    ("order #A-99881 has not arrived", "order <ORDER> has not arrived"),
]

KEPT = [
    "Đổi trả trong 7 ngày hay 30 ngày?",
    "phí ship 30.000đ có hoàn không",
    "nhận hàng ngày 28/09/2026 lúc 16:00",
    "giao tới Quận 1 mất mấy ngày?",
    "đường Nguyễn Huệ có giao hỏa tốc không",
    "giao Hà Nội mấy ngày, còn Hồ Chí Minh?",
    "iPhone 15 Pro Max 256GB có trả góp không",
    "có Samsung không shop",
    "đó văn bản gì vậy",
    "Do you ship to Da Nang?",
    "đổi tối đa 2 lần, bán kính 20 km",
    "I ordered 3 times this month",
]


@pytest.mark.parametrize("text, expected", TABLE, ids=[t for t, _ in TABLE])
def test_personal_data_without_a_names_list(text, expected):
    assert scrub(text) == expected


@pytest.mark.parametrize("text", KEPT)
def test_policy_quantities_and_ordinary_words_survive(text):
    assert scrub(text) == text


def test_the_table_covers_every_placeholder_and_reports_the_kinds():
    kinds = {k for _, expected in TABLE for k in re.findall(r"<([A-Z]+)>", expected)}
    assert kinds == {"NAME", "ADDRESS", "DOB", "EMAIL", "IBAN", "PLATE", "ORDER"}
    result = Scrubber().scrub("Chị Hoa, 123 Nguyễn Huệ, Quận 1, sinh ngày 12/03/1990, sdt 0912345678")
    assert result.text == "Chị <NAME>, <ADDRESS>, sinh ngày <DOB>, sdt <PHONE>"
    assert result.kinds == ("PHONE", "NAME", "ADDRESS", "DOB")

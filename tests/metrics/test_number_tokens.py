"""The number rule's tokens are cut piece by piece (and each piece is remembered): they must be
those of its regular expression over the whole text, whatever the whitespace, marks and case."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from rageval.metrics.number_words import TOKEN, tokens

PIECES = ["7", "ngày¹", "30.000đ", "1,5", "triệu", "m²", "①", "a_b", "_", "Đổi", "TRẢ", "$5", "(7", "ngày)",
          "3-5", "Straße", "ǅ", "e\u0301", "…", "v1.2.3", "hai", "mươi", "x"]
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\x1f"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(SPACES)), max_size=12))
def test_tokens_are_those_of_the_whole_text(parts):
    text = "".join(p + s for p, s in parts)
    assert tokens(text) == TOKEN.findall(unicodedata.normalize("NFC", text).casefold())
    assert tokens(text) == tokens(text)          # the second time from memory


def test_tokens_by_hand():
    assert tokens("Phí 30.000đ\u00a0trong 7 ngày¹, m² a_b ĐỔI") == [
        "phí", "30.000", "đ", "trong", "7", "ngày", "¹", ",", "m", "²", "a", "b", "đổi"]
    assert re.fullmatch(r"\s", "\u00a0") and tokens("e\u0301") == ["é"]      # NFC: one letter

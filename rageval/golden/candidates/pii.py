"""Personal data that needs no list to find, for :mod:`.scrub`: names, addresses, dates of birth,
obfuscated emails, spaced IBANs and licence plates, in Vietnamese and English. Pure functions: each
rule takes a text and returns it with its finds replaced by a placeholder, and whether it found any.

* ``<EMAIL>`` — an email written to dodge filters: ``an.nguyen [at] gmail [dot] com``,
  ``an.nguyen(at)gmail(dot)com``, ``an.nguyen at gmail dot com``, ``a còng`` / ``chấm``.
* ``<IBAN>`` — two capital letters, two check digits and 3–8 groups of four (``GB82 WEST 1234 …``).
* ``<PLATE>`` — Vietnamese plates (``51F-123.45``, ``30E 12345``, ``59-X1 123.45``) and British ones
  (``AB12 CDE``).
* ``<DOB>`` — a date (``12/03/1990``, ``1990-03-12``, ``March 12, 1990``, ``12 tháng 3 năm 1990``)
  within a few words after a birth cue (``sinh ngày``, ``ngày sinh``, ``sinh năm``, ``DOB``, ``date of
  birth``, ``born``); other dates — a delivery date — are content and stay.
* ``<ADDRESS>`` — a house number with street words (``số 45 ngõ 12 Láng Hạ``, ``221B Baker Street``), a
  house number before a street named after a person (``123 Nguyễn Huệ``) or before an administrative
  unit (``…, Quận 1``, ``phường Bến Nghé``, ``District 3``), and British postcodes (``NW1 6XE``). A
  street or district alone ("giao tới Quận 1 mấy ngày") is not personal and stays.
* ``<NAME>`` — a Vietnamese family name followed by given names: capitalised (``Nguyễn Văn An``,
  ``Tran Bich Ngoc``), all capitals (``NGUYEN VAN AN``), or in any case with the middle name ``văn`` /
  ``thị`` (``tran thi bich ngoc``); a word written with diacritics must be the family name's own
  spelling (``đó văn bản`` is no name). A capitalised name after a kinship or title cue (``Chị Hoa``,
  ``anh Tuấn``, ``Mr Smith``: the cue stays) or after ``tên là`` / ``my name is``; a common English
  first name before a capitalised family name (``John Smith``, ``Sarah O'Connor``). Place names that
  start like a family name (``Hà Nội``, ``Lâm Đồng``) are kept.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from rageval.text import fold

_UPPER = "A-ZĐÂĂÊÔƠƯÁÀẢÃẠẤẦẨẪẬẮẰẲẴẶÉÈẺẼẸẾỀỂỄỆÍÌỈĨỊÓÒỎÕỌỐỒỔỖỘỚỜỞỠỢÚÙỦŨỤỨỪỬỮỰÝỲỶỸỴ"
_CAP = rf"[{_UPPER}][^\W\d_]*"                       # a capitalised word
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")

#: family name -> its spellings with diacritics (casefolded); a plain-ASCII word matches by its fold
SURNAMES: dict[str, tuple[str, ...]] = {
    "nguyen": ("nguyễn",), "tran": ("trần",), "le": ("lê",), "pham": ("phạm",), "hoang": ("hoàng",),
    "huynh": ("huỳnh",), "phan": ("phan",), "vu": ("vũ",), "vo": ("võ",), "dang": ("đặng",), "bui": ("bùi",),
    "do": ("đỗ", "đỗ"), "ho": ("hồ",), "ngo": ("ngô",), "duong": ("dương",), "ly": ("lý",), "dinh": ("đinh",),
    "truong": ("trương",), "lam": ("lâm",), "mai": ("mai",), "trinh": ("trịnh",), "doan": ("đoàn",),
    "cao": ("cao",), "luu": ("lưu",), "ta": ("tạ",), "ha": ("hà",), "to": ("tô",), "chu": ("chu",),
    "chau": ("châu",), "quach": ("quách",), "thai": ("thái",), "luong": ("lương",), "kieu": ("kiều",),
    "vuong": ("vương",), "trieu": ("triệu",), "dao": ("đào",), "ton": ("tôn",), "tang": ("tăng",),
}
MIDDLES: dict[str, tuple[str, ...]] = {"van": ("văn",), "thi": ("thị",)}
#: places that start like a family name (folded), kept
PLACES = frozenset({"ha noi", "ho chi minh", "ha giang", "ha tinh", "ha nam", "ha long", "ha dong", "cao bang",
                    "lam dong", "phan thiet", "phan rang", "mai chau", "ha tien", "ly son", "to lich"})
#: cues before a name (folded word sequences); the cue stays, the name after it goes
#: kinship and title cues -> their spellings with diacritics; ``ba``, ``co``, ``chu``, ``bac`` typed without
#: diacritics are also "three", "have", "word", "silver", so only their own spellings count
KIN_CUES: dict[str, tuple[str, ...]] = {
    "anh": ("anh",), "chi": ("chị",), "ong": ("ông",), "ba": ("bà",), "co": ("cô",), "chu": ("chú",),
    "bac": ("bác",), "em": ("em",), "mr": ("mr",), "mrs": ("mrs",), "ms": ("ms",), "miss": ("miss",), "dr": ("dr",)}
PLAIN_KIN = frozenset({"anh", "chi", "ong", "em", "mr", "mrs", "ms", "miss", "dr"})
NAME_CUES = (("ten", "la"), ("ten", "minh", "la"), ("ten", "toi", "la"), ("ten", "em", "la"),
             ("ten", "cua", "toi", "la"), ("ten", "cua", "em", "la"), ("my", "name", "is"), ("my", "name's"),
             ("i", "am", "called"))
#: words after which a name is a street's or a place's, not a person's (folded)
STREET_WORDS = frozenset({"duong", "pho", "ngo", "ngach", "hem", "kiet", "quan", "phuong", "huyen", "xa", "tinh", "tp",
                          "street", "road", "avenue"})
#: words that end a name written in lower case (folded)
STOP = frozenset("muon can dat mua hoi doi tra la o va co khong da dang se bi duoc nhan giao ship gui oi a nhe nha "
                 "cho voi cua toi minh sdt so don hang and i my from at in is was wants would want "
                 "ordered order please thanks".split())
FIRST_NAMES = frozenset("""james john robert michael william david richard joseph thomas charles christopher daniel matthew anthony mark
donald steven paul andrew joshua kenneth kevin brian george timothy ronald edward jason jeffrey ryan jacob
gary nicholas eric jonathan stephen larry justin scott brandon benjamin samuel gregory alexander patrick frank
raymond jack dennis jerry tyler aaron jose adam nathan henry peter zachary kyle noah alan ethan jeremy harry
oliver mary patricia jennifer linda elizabeth barbara susan jessica sarah karen lisa nancy betty margaret
sandra ashley kimberly emily donna michelle carol amanda melissa deborah stephanie rebecca sharon laura
cynthia kathleen amy angela shirley anna brenda pamela emma nicole helen samantha katherine christine debra
rachel carolyn janet maria catherine heather diane olivia julie joyce victoria kelly lauren christina joan
evelyn judith megan andrea cheryl hannah jacqueline martha gloria teresa ann sara madison frances kathryn
janice jean abigail alice judy sophia grace denise amber doris marilyn danielle beverly isabella theresa diana
natalie brittany charlotte marie kayla alexis lily chloe""".split())

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATE = (rf"(?:\d{{1,2}}[./-]\d{{1,2}}[./-](?:\d{{4}}|\d{{2}})|\d{{4}}-\d{{1,2}}-\d{{1,2}}"
         rf"|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
         rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS},?\s+\d{{4}}|\d{{1,2}}\s+tháng\s+\d{{1,2}},?\s+năm\s+\d{{4}}"
         rf"|(?:19|20)\d{{2}})")
_BIRTH = (r"(?:sinh\s+ngày|sinh\s+năm|ngày\s+sinh|năm\s+sinh|sinh\s+nhật|sinh|ns|dob|d\.o\.b\.?|date\s+of\s+birth|"
          r"birth\s*date|birthday|born(?:\s+on)?)")
DOB = re.compile(rf"(?i)(\b{_BIRTH}\b[:\s]*(?:là\s+|is\s+|ngày\s+|on\s+)?)({_DATE})(?!\d)")

_AT = r"(?:\s*[\[\(\{<]\s*(?:at|a còng|acong)\s*[\]\)\}>]\s*|\s+(?:at|a còng)\s+)"
_DOT = r"(?:\s*[\[\(\{<]\s*(?:dot|chấm|cham)\s*[\]\)\}>]\s*|\s+(?:dot|chấm)\s+)"
EMAIL = re.compile(rf"(?i)(?<![\w.+-])[a-z0-9][a-z0-9._%+-]*{_AT}[a-z0-9-]+(?:{_DOT}[a-z0-9-]+)*{_DOT}[a-z]{{2,24}}\b")
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}(?: ?[A-Z0-9]{1,3})?\b")
PLATE = re.compile(r"\b(?:\d{2}[A-Z]{1,2}\d?[- ]?\d{3}\.?\d{2}|\d{2}-?[A-Z]\d[- ]\d{3}\.?\d{2}"
                   r"|[A-Z]{2}\d{2} ?[A-Z]{3})\b")
_POSTCODE = r"\b[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}\b"
_ADMIN = (r"(?i:(?:phường|phuong|quận|quan|huyện|huyen|xã|thị\s+xã|thị\s+trấn|tỉnh|tinh|thành\s+phố|tp|ward|district)\b"
          r"|tp\.|p\.|q\.)\s*[\w.]+(?:\s+" + _CAP + r")*")
_STREET_VI = r"(?:số\s+nhà|đường|duong|phố|ngõ|ngo|ngách|ngach|hẻm|hem|kiệt|kiet)"
_STREET_EN = r"(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|Place|Pl|Court|Ct|Square|Sq)\b\.?"
_HOUSE = r"\b(?:(?:số|so|sn)\s*)?\d{1,4}[A-Za-z]?(?:/\d{1,4}[A-Za-z]?)*"
_TAIL = rf"(?:,?\s*(?:{_ADMIN}|{_POSTCODE}))*"
_SURNAME_WORD = "(?:" + "|".join(sorted({s for v in SURNAMES.values() for s in v} | set(SURNAMES), key=len,
                                       reverse=True)) + ")"
ADDRESS = re.compile(
    rf"(?i:{_HOUSE})\s+(?:"
    rf"(?i:{_STREET_VI})(?:\s+\d+[A-Za-z]?)?(?:\s+{_CAP}){{0,3}}(?:\s+[a-z]+){{0,2}}"
    rf"|(?:{_CAP}\s+){{1,3}}{_STREET_EN}"
    rf"|(?i:{_SURNAME_WORD})\s+{_CAP}(?:\s+{_CAP})?"
    rf"|(?:{_CAP}\s+){{0,2}}{_CAP}(?=,?\s*{_ADMIN})"
    rf"){_TAIL}|{_POSTCODE}")


def _sub(pattern: re.Pattern[str], placeholder: str,
         keep_group: int | None = None) -> Callable[[str], tuple[str, bool]]:
    def rule(text: str) -> tuple[str, bool]:
        if keep_group is None:
            out, n = pattern.subn(placeholder, text)
        else:
            out, n = pattern.subn(lambda m: m.group(keep_group) + placeholder, text)
        return out, bool(n)
    return rule


scrub_obfuscated_emails = _sub(EMAIL, "<EMAIL>")
scrub_ibans = _sub(IBAN, "<IBAN>")
scrub_plates = _sub(PLATE, "<PLATE>")
scrub_birth_dates = _sub(DOB, "<DOB>", keep_group=1)
scrub_addresses = _sub(ADDRESS, "<ADDRESS>")


# --- names -----------------------------------------------------------------------------------

def _words(text: str) -> list[tuple[int, int, str, str]]:
    """(start, end, word, folded word) of every word of ``text``."""
    return [(m.start(), m.end(), m.group(), fold(unicodedata.normalize("NFC", m.group())).replace("’", "'"))
            for m in _WORD.finditer(text)]


def _spelled(word: str, folded: str, table: dict[str, tuple[str, ...]]) -> bool:
    """Whether ``word`` is a spelling of an entry of ``table``: by its fold when written in plain
    ASCII, by the entry's own diacritics otherwise."""
    if folded not in table:
        return False
    return word.isascii() or unicodedata.normalize("NFC", word).casefold() in table[folded]


def _run(text: str, words: list[tuple[int, int, str, str]], i: int, limit: int,
         ok: Callable[[tuple[int, int, str, str]], bool]) -> list[int]:
    """Indices of up to ``limit`` words after word ``i``, separated by spaces only, each ``ok``."""
    out: list[int] = []
    j = i + 1
    while j < len(words) and len(out) < limit and not text[words[j - 1][1]:words[j][0]].strip() and ok(words[j]):
        out.append(j)
        j += 1
    return out


def _capital(w: tuple[int, int, str, str]) -> bool:
    return w[2][:1].isupper()


def _vietnamese_name(text: str, words: list[tuple[int, int, str, str]], i: int) -> int | None:
    """The index of the last word of a Vietnamese name starting at word ``i``, or None."""
    start, _, word, folded = words[i]
    if not _spelled(word, folded, SURNAMES):
        return None
    shouting = word.isupper() and len(word) > 1
    if _capital(words[i]):
        given = _run(text, words, i, 3, lambda w: w[2].isupper() if shouting else _capital(w))
        if given and " ".join([folded, *(words[j][3] for j in given)][:3]) not in PLACES and \
                " ".join([folded, *(words[j][3] for j in given)][:2]) not in PLACES:
            return given[-1]
    middle = _run(text, words, i, 1, lambda w: _spelled(w[2], w[3], MIDDLES))
    if middle:
        given = _run(text, words, middle[0], 2, lambda w: w[3] not in STOP)
        if given:
            return given[-1]
    return None


def _cued_name(text: str, words: list[tuple[int, int, str, str]], i: int) -> tuple[int, int] | None:
    """(first, last) word of a name after a cue ending at word ``i - 1``, or None."""
    for cue in NAME_CUES:
        n = len(cue)
        if i >= n and tuple(w[3] for w in words[i - n:i]) == cue:
            given = _run(text, words, i - 1, 4, lambda w: w[3] not in STOP)
            return (given[0], given[-1]) if given else None
    if not i or not _capital(words[i]) or text[words[i - 1][1]:words[i][0]].strip(" \t"):
        return None
    _, _, cue_word, cue = words[i - 1]
    if _spelled(cue_word, cue, KIN_CUES) and (not cue_word.isascii() or cue in PLAIN_KIN):
        given = [i, *_run(text, words, i, 2, _capital)]
        return given[0], given[-1]
    return None


def _english_name(text: str, words: list[tuple[int, int, str, str]], i: int) -> int | None:
    if words[i][3] not in FIRST_NAMES or not _capital(words[i]):
        return None
    family = _run(text, words, i, 2, _capital)
    return family[-1] if family else None


def scrub_names(text: str) -> tuple[str, bool]:
    """``text`` with the names of the module docstring replaced by ``<NAME>``."""
    words = _words(text)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        cued = _cued_name(text, words, i)
        if cued is not None:
            first, last = cued
        elif i and words[i - 1][3] in STREET_WORDS:
            last = None                         # "đường Nguyễn Huệ": a street named after a person
        else:
            last = _vietnamese_name(text, words, i)
            last = last if last is not None else _english_name(text, words, i)
            first = i
        if last is None:
            i += 1
            continue
        spans.append((words[first][0], words[last][1]))
        i = last + 1
    for start, end in reversed(spans):
        text = text[:start] + "<NAME>" + text[end:]
    return text, bool(spans)

"""How a RunResult is packed into JSON (schema_version 2) and unpacked back.

A run of 5,000 cases over a few thousand chunks repeats the same texts many times. Packing writes
each thing once:

* **the chunk table** (``chunks``): each retrieved chunk's text, sections and token count, keyed
  by chunk id (with the text's sha256); a case's retrieved item keeps only its ``chunk_id`` and
  ``score``. An item that disagrees with its id's entry (an app that reused a chunk id) keeps its
  own values inline.
* **the golden fields of a case** (``question``, ``expected_answer``, ``expected_sections``,
  ``slice``, ``tags``, ``out_of_scope``) are left out where the golden snapshot
  (``golden.cases``) holds the same values.

Unpacking puts everything back, so the records in memory (and what ``from_dict`` validates) are
the same for schema 1 and 2. A chunk table whose text does not match its sha256, or a case whose
fields are neither inline nor in the snapshot, is bad input naming the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rageval.files import Reader, Streamed

#: case fields the golden snapshot holds too, in the order a case record writes them
GOLDEN_FIELDS = ("question", "expected_answer", "expected_sections", "slice", "tags", "out_of_scope")
#: what a chunk table entry may carry besides its text
CHUNK_FIELDS = ("sections", "tokens")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _same(snapshot_value: Any, value: Any) -> bool:
    """Equal as JSON: lists and tuples alike, a missing snapshot field as its empty value."""
    return (snapshot_value if snapshot_value is not None else type(value)()) == value


def pack(cases: list[dict[str, Any]], snapshot: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """Pack ``cases`` (plain dicts, changed in place); return the chunk table."""
    table = chunk_table(item for case in cases for item in case.get("retrieved") or ())
    for case in cases:
        pack_case(case, table, snapshot)
    return table


def packed_cases(records: Sequence[Any], snapshot: Mapping[str, Mapping[str, Any]] | None
                 ) -> tuple[dict[str, Any], Streamed]:
    """(chunk table, the packed case records) of case results (``to_dict`` and ``retrieved``), the
    records made one at a time as they are written (``Streamed``): the file is the same as
    :func:`pack`'s, and a run's records are never all held at once (20,000 cases: ~80 MB)."""
    table = chunk_table(item.to_dict() for record in records for item in record.retrieved or ())
    return table, Streamed(len(records), lambda: (pack_case(r.to_dict(), table, snapshot) for r in records))


def chunk_table(items: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The chunk table of retrieved items (``Retrieved.to_dict``'s), in the run's order: each chunk
    id's first mention with a text gives its entry (its text is hashed once, not per mention)."""
    table: dict[str, dict[str, Any]] = {}
    for item in items:
        text = item.get("text")
        if text and item["chunk_id"] not in table:
            table[item["chunk_id"]] = {"sha256": _sha(text), "text": text, **{k: item.get(k) for k in CHUNK_FIELDS}}
    return table


def pack_case(case: dict[str, Any], table: Mapping[str, Mapping[str, Any]],
              snapshot: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    """``case`` (a plain dict, changed in place and returned) without the golden fields the
    snapshot holds, and without what ``table`` holds of each retrieved item: the text, and the
    sections and tokens when equal. An item whose text is not its chunk id's entry's (an app that
    reused a chunk id) keeps its own values."""
    golden = snapshot.get(case["id"]) if snapshot else None
    if golden is not None:
        for name in GOLDEN_FIELDS:
            if name in case and _same(golden.get(name), case[name]):
                del case[name]
    for item in case.get("retrieved") or ():
        text = item.get("text")
        entry = table.get(item["chunk_id"]) if text else None
        if entry is None or entry["text"] != text:
            continue
        del item["text"]
        for name in CHUNK_FIELDS:
            if item.get(name) == entry.get(name):
                item.pop(name, None)
    return case


def _table(data: Mapping[str, Any], r: Reader) -> dict[str, dict[str, Any]]:
    """Chunk id -> the fields its table entry puts back into an item (text, sections, tokens)."""
    table = {}
    for chunk_id, entry in r.obj(data.get("chunks") or {}, "chunks").items():
        where = f"chunks.{chunk_id}"
        entry = r.obj(entry, where)
        text = r.str_(r.req(entry, "text", where), f"{where}.text")
        if _sha(text) != r.str_(r.req(entry, "sha256", where), f"{where}.sha256"):  # type: ignore[arg-type]
            raise r.fail(f"{where}.sha256", "does not match the chunk's text (the file was edited or truncated)")
        table[str(chunk_id)] = {k: entry[k] for k in ("text", *CHUNK_FIELDS) if k in entry}
    return table


def _item(item: Any, table: Mapping[str, Mapping[str, Any]], i: int, j: int, r: Reader) -> Any:
    """Item ``j`` of case ``i``'s retrieved list with its chunk's fields put back."""
    if not isinstance(item, Mapping) or "text" in item:
        return item
    chunk_id = item.get("chunk_id")
    fields = table.get(chunk_id) if type(chunk_id) is str else None
    if fields is not None:
        return {**fields, **item}
    key = f"cases[{i}].retrieved[{j}]"
    if "chunk_id" in item:               # a list or an object would be no key of the table
        r.str_(chunk_id, f"{key}.chunk_id")
    raise r.fail(key, f"chunk {chunk_id!r} has no text here and none in the chunk table")


def unpack(data: Mapping[str, Any], r: Reader) -> list[Any]:
    """``data["cases"]`` with every field put back from the chunk table and the golden snapshot."""
    table = _table(data, r)
    golden = data.get("golden") if isinstance(data.get("golden"), Mapping) else {}
    snapshot = golden.get("cases") if isinstance(golden.get("cases"), Mapping) else {}
    cases = []
    for i, case in enumerate(r.lst(data["cases"], "cases")):
        if not isinstance(case, Mapping):
            cases.append(case)
            continue
        if "id" in case:                 # looked up before from_dict checks it: a list is no key
            r.str_(case["id"], f"cases[{i}].id")
        known = snapshot.get(case.get("id"))
        if isinstance(known, Mapping):
            case = {**{k: known[k] for k in GOLDEN_FIELDS if k in known and k not in case}, **case}
        if isinstance(case.get("retrieved"), list):
            case = {**case, "retrieved": [_item(x, table, i, j, r) for j, x in enumerate(case["retrieved"])]}
        cases.append(case)
    return cases

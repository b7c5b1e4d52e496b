"""People's pass/fail labels for measuring the judge (``rageval judge-agreement``): parsed from a
file's text, no I/O. JSONL (one ``{"id", "label"}`` per line) or a YAML/JSON mapping
``{case id: pass|fail}``; read by ``rageval.parse`` like every other input (a key twice, an alias,
nesting past 64 levels, NaN are refused), and every error names the file and line of the bad entry.
"""

from __future__ import annotations

from typing import Any

from rageval.errors import DatasetError
from rageval.parse import key_lines, load_json, load_yaml_node, shown

LABEL_VALUES = {"pass": True, "fail": False}
BAD_LABEL = ("{where}: label {got} for case {case!r} must be \"pass\" or \"fail\" "
             "(or true/false). Fix that entry in the labels file.")
MSG_NOT_MAPPING = ("{name}: expected a mapping of case id to pass/fail, e.g. `q01: pass`, got {got}. "
                   "Write the labels as a mapping `case-id: pass` or as JSONL.")
MSG_AGAIN = "{where}: case {case!r} is labelled again (first on line {first}). Keep one label per case."
MSG_SAME_ID = ("{where}: case {case!r} is labelled twice (keys {a} and {b} are one case id). Keep one label "
               "per case.")
MSG_LINE_NOT_OBJECT = ("{where}: not a JSON object. Each line must look like "
                       "{{\"id\": \"q01\", \"label\": \"pass\"}}.")
MSG_LINE_NO_ID = ("{where}: each line needs an \"id\" (the golden case id) and a \"label\", "
                  "e.g. {{\"id\": \"q01\", \"label\": \"pass\"}}.")
MSG_LINE_NO_LABEL = "{where}: case {case!r} has no \"label\"; add \"label\": \"pass\" or \"fail\"."
MSG_NO_LABELS = "{name}: no labels found. Add one line per case: {{\"id\": \"q01\", \"label\": \"pass\"}}."


def label_value(value: Any, case: str, where: str) -> bool:
    """"pass"/"fail" (any case) or a boolean → bool; DatasetError naming ``where`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in LABEL_VALUES:
        return LABEL_VALUES[value.strip().lower()]
    got = f'"{value}"' if isinstance(value, str) and len(value) <= 60 else shown(value)
    raise DatasetError(BAD_LABEL.format(where=where, got=got, case=case))


def parse_labels(text: str, name: str, *, jsonl: bool) -> dict[str, bool]:
    """Human labels from a file's text (``name`` is used in messages; no I/O here).

    JSONL: one ``{"id": …, "label": "pass"|"fail"}`` per line (blank lines ignored).
    Otherwise YAML or JSON: a mapping ``{case id: pass|fail}``. Errors name the file and line.
    """
    if jsonl:
        return _labels_jsonl(text, name)
    data, node = load_yaml_node(text, name, error=DatasetError)
    if not isinstance(data, dict) or not data:
        got = type(data).__name__ if data is not None else "an empty file"
        raise DatasetError(MSG_NOT_MAPPING.format(name=name, got=got))
    lines = key_lines(node)
    out: dict[str, bool] = {}
    keys: dict[str, Any] = {}
    for key, value in data.items():
        case = str(key)
        line = lines.get(case)
        where = f"{name}: line {line}" if line else name
        if case in keys:     # 1 and "1": two YAML keys, one case id
            raise DatasetError(MSG_SAME_ID.format(where=where, case=case, a=shown(keys[case]), b=shown(key)))
        keys[case] = key
        out[case] = label_value(value, case, where)
    return out


def _labels_jsonl(text: str, name: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}: line {lineno}"
        item = load_json(line, name, error=DatasetError, line=lineno)
        if not isinstance(item, dict):
            raise DatasetError(MSG_LINE_NOT_OBJECT.format(where=where))
        if not isinstance(item.get("id"), (str, int)) or isinstance(item.get("id"), bool):
            raise DatasetError(MSG_LINE_NO_ID.format(where=where))
        case = str(item["id"])
        if case in seen:
            raise DatasetError(MSG_AGAIN.format(where=where, case=case, first=seen[case]))
        if "label" not in item:
            raise DatasetError(MSG_LINE_NO_LABEL.format(where=where, case=case))
        seen[case] = lineno
        out[case] = label_value(item["label"], case, where)
    if not out:
        raise DatasetError(MSG_NO_LABELS.format(name=name))
    return out

"""People's pass/fail labels for measuring the judge (``rageval judge-agreement``): parsed from a
file's text, no I/O. JSONL (one ``{"id", "label"}`` per line) or a YAML/JSON mapping
``{case id: pass|fail}``; every error names the file and line of the bad entry.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from rageval.errors import DatasetError

LABEL_VALUES = {"pass": True, "fail": False}
BAD_LABEL = ("{where}: label {got} for case {case!r} must be \"pass\" or \"fail\" "
             "(or true/false). Fix that entry in the labels file.")


def label_value(value: Any, case: str, where: str) -> bool:
    """"pass"/"fail" (any case) or a boolean → bool; DatasetError naming ``where`` otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in LABEL_VALUES:
        return LABEL_VALUES[value.strip().lower()]
    raise DatasetError(BAD_LABEL.format(where=where, got=json.dumps(value, ensure_ascii=False), case=case))


def parse_labels(text: str, name: str, *, jsonl: bool) -> dict[str, bool]:
    """Human labels from a file's text (``name`` is used in messages; no I/O here).

    JSONL: one ``{"id": …, "label": "pass"|"fail"}`` per line (blank lines ignored).
    Otherwise YAML or JSON: a mapping ``{case id: pass|fail}``. Errors name the file and line.
    """
    if jsonl:
        return _labels_jsonl(text, name)
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise DatasetError(f"{name}{line}: not valid YAML/JSON ({getattr(exc, 'problem', exc)}). "
                           "Write the labels as a mapping `case-id: pass` or as JSONL.") from None
    if not isinstance(data, dict) or not data:
        raise DatasetError(f"{name}: expected a mapping of case id to pass/fail, e.g. `q01: pass`, "
                           f"got {type(data).__name__ if data is not None else 'an empty file'}.")
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            case, line = str(key_node.value), key_node.start_mark.line + 1
            if case in lines:
                raise DatasetError(f"{name}:{line}: case {case!r} is labelled again (first on line {lines[case]}). "
                                   "Keep one label per case.")
            lines[case] = line
    out: dict[str, bool] = {}
    for key, value in data.items():
        case = str(key)
        where = f"{name}:{lines[case]}" if case in lines else name
        out[case] = label_value(value, case, where)
    return out


def _labels_jsonl(text: str, name: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    seen: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name}:{lineno}"
        try:
            item = json.loads(line)
        except ValueError:
            raise DatasetError(f"{where}: not a JSON object. Each line must look like "
                               "{\"id\": \"q01\", \"label\": \"pass\"}.") from None
        if not isinstance(item, dict) or not isinstance(item.get("id"), (str, int)) or isinstance(item.get("id"), bool):
            raise DatasetError(f"{where}: each line needs an \"id\" (the golden case id) and a \"label\", "
                               "e.g. {\"id\": \"q01\", \"label\": \"pass\"}.")
        case = str(item["id"])
        if case in seen:
            raise DatasetError(f"{where}: case {case!r} is labelled again (first on line {seen[case]}). "
                               "Keep one label per case.")
        if "label" not in item:
            raise DatasetError(f"{where}: case {case!r} has no \"label\"; add \"label\": \"pass\" or \"fail\".")
        seen[case] = lineno
        out[case] = label_value(item["label"], case, where)
    if not out:
        raise DatasetError(f"{name}: no labels found. Add one line per case: {{\"id\": \"q01\", \"label\": \"pass\"}}.")
    return out

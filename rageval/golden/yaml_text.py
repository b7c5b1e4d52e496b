"""Values written as YAML text that reads back as the same value, for edits made on a YAML
file's text: double-quoted (JSON string syntax, every character YAML would reject or fold
escaped), single-quoted, plain where that is safe, flow lists and mappings, and a new value in
the style of the scalar it replaces; and where a node's text ends, for placing an edit."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

_PLAIN_SAFE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]*")
_PROPERTIES = re.compile(r"((?:[!&]\S*\s+)*)(.*)", re.DOTALL)
# Characters PyYAML's reader accepts, minus the ones YAML treats as line breaks inside a scalar.
_YAML_UNSAFE = re.compile("[^\x09\x0A\x0D\x20-\x7E\xA0-\u2027\u202A-\uD7FF\uE000-\uFEFE\uFF00-\uFFFD"
                          "\U00010000-\U0010FFFF]")


def yaml_double_quoted(value: str) -> str:
    """A YAML double-quoted scalar (JSON string syntax is valid YAML), with every character YAML
    would reject or fold (C1 controls, U+2028/2029, BOM) written as an escape."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def single_quoted(value: str) -> str:
    """A YAML single-quoted scalar; double-quoted when the value needs escapes single quotes lack."""
    if "\n" in value or _YAML_UNSAFE.search(value):
        return yaml_double_quoted(value)
    return "'" + value.replace("'", "''") + "'"


def plain_or_quoted(value: str) -> str:
    """Plain when it reads back as the same string (DT-1, pr, incident-2026-11-29), else quoted."""
    if _PLAIN_SAFE.fullmatch(value) and yaml.safe_load(value) == value:
        return value
    return yaml_double_quoted(value)


def flow_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(plain_or_quoted(v) for v in values) + "]"


def flow_quoted_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(yaml_double_quoted(v) for v in values) + "]"


def _flow_scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return plain_or_quoted(value)


def flow_mapping(values: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{plain_or_quoted(k)}: {_flow_scalar(v)}" for k, v in values.items()) + "}"


def scalar_like(node: yaml.ScalarNode, source: str, value: int | str) -> str:
    """``value`` in the style of the scalar ``node`` it replaces (``source`` is that scalar's text),
    keeping any tag or anchor written before it: ``4`` -> ``5``, ``"7"`` -> ``"8"``."""
    properties = _PROPERTIES.fullmatch(source).group(1)
    if node.style == '"':
        body = yaml_double_quoted(str(value))
    elif node.style == "'":
        body = single_quoted(str(value))
    else:
        body = str(value)
    return properties + body


def quoted_like(item: yaml.Node, value: str) -> str:
    """``value`` quoted like the list's last item: single quotes if it uses them, else double."""
    if isinstance(item, yaml.ScalarNode) and item.style == "'":
        return single_quoted(value)
    return yaml_double_quoted(value)


def line_end(text: str, pos: int) -> int:
    """Index just after the line containing ``pos`` (len(text) on a last line without newline)."""
    nl = text.find("\n", pos)
    return len(text) if nl < 0 else nl + 1


def content_end(text: str, node: yaml.Node) -> int:
    """Index just after the last character that belongs to ``node`` — not after the blank lines
    and comments PyYAML counts into a block collection's end mark."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        return content_end(text, node.value[-1][1])
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return content_end(text, node.value[-1])
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":
        end -= 1
    return end

"""Reading the files rageval is given: text → data, plus the line numbers error messages need.

The bottom layer: it imports only the standard library, PyYAML and ``rageval.errors``.

- ``parse_yaml(text)``: the data and the node tree of one YAML document (safe loader).
- ``key_lines(node)``: the line of every mapping key of that tree, by dotted path (``gate.floors``).
"""

from __future__ import annotations

from typing import Any

import yaml


def parse_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    """Parse YAML once (safe loader): the data, and the node tree that knows every line number
    (for error messages). Raises yaml.YAMLError like yaml.safe_load."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        return (loader.construct_document(node) if node is not None else None), node
    finally:
        loader.dispose()


def key_lines(node: yaml.Node | None) -> dict[str, int]:
    """The 1-based line of every mapping key under ``node``, by dotted path (``gate.floors.hit@3``)."""
    lines: dict[str, int] = {}
    _walk(node, "", lines)
    return lines


def _walk(node: yaml.Node | None, prefix: str, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            lines[key] = key_node.start_mark.line + 1
            _walk(value_node, key, lines)

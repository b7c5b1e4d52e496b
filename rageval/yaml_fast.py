"""The fast half of rageval's strict YAML read: plain documents built straight from parser events.

``rageval.parse`` reads YAML strictly by composing a node tree (every node with its line, for
messages) and constructing data from it; for a 5,000-case golden set that is ~0.45 ms per case,
most of it Python building nodes nobody looks at when the file is fine. :func:`plain_data` builds
the same data from the same parser's events, keeps no marks, and handles only what rageval's files
hold: mappings, sequences and untagged scalars (strings, numbers, booleans, null, timestamps).

It raises :class:`Unsure` for everything else — a syntax error, an alias, an explicit tag, a merge
key (``<<``), a duplicate key, a collection as a key, nesting deeper than ``max_depth``, a second
document, a value no constructor builds — and the caller then reads the text the strict way, which
refuses or accepts it and names the line. So the fast read never accepts a document the strict one
refuses, and what it returns equals the strict read's data (tests/test_parse_fast.py holds both to
PyYAML's own data on a table of tricky documents and on generated ones).
"""

from __future__ import annotations

from typing import Any

import yaml

#: tags of the scalars built here (an untagged plain scalar resolves to one of these, or to
#: ``merge`` / ``value``, which are left to the strict read)
_STR = "tag:yaml.org,2002:str"
SCALAR_TAGS = frozenset({"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                         "tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp", _STR})
_NO_KEY = object()        # a mapping waiting for its next key


class Unsure(Exception):
    """The fast read does not build this document; read it the strict way."""


def plain_data(loader: Any, max_depth: int) -> Any:
    """The data of the one document a PyYAML loader (libyaml's or the pure-Python one) parses,
    built from its events; :class:`Unsure` for anything :func:`_document` does not build, for
    nesting deeper than ``max_depth``, for a second document and for any parser error."""
    if loader.yaml_path_resolvers:           # tags that depend on the path: the strict read knows them
        raise Unsure
    try:
        loader.get_event()                   # stream start
        data = None
        if not loader.check_event(yaml.StreamEndEvent):
            loader.get_event()               # document start
            data = _document(loader, max_depth)
            loader.get_event()               # document end
        if not loader.check_event(yaml.StreamEndEvent):
            raise Unsure
    except yaml.YAMLError:
        raise Unsure from None
    return data


def _document(loader: Any, max_depth: int) -> Any:
    """One node's data from the events, with an explicit stack (no recursion)."""
    get_event = loader.get_event
    plain: dict[str, Any] = {}         # an untagged plain scalar's value depends on its text alone
    stack: list[Any] = []              # the open lists and dicts
    keys: list[Any] = []               # per open collection: a mapping's pending key
    while True:
        event = get_event()
        kind = type(event)
        if kind is yaml.ScalarEvent:
            if event.tag is not None:
                raise Unsure
            value = event.value
            if event.implicit[0]:
                value = plain[value] if value in plain else plain.setdefault(value, _plain(loader, value))
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.tag is not None or len(stack) >= max_depth:
                raise Unsure
            stack.append({} if kind is yaml.MappingStartEvent else [])
            keys.append(_NO_KEY)
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            value = stack.pop()
            keys.pop()
        else:                              # an alias
            raise Unsure
        if not stack:
            return value
        parent = stack[-1]
        if type(parent) is list:
            parent.append(value)
        elif keys[-1] is _NO_KEY:
            if kind is not yaml.ScalarEvent:
                raise Unsure               # a list or a mapping as a key
            keys[-1] = value
        else:
            key = keys[-1]
            if key in parent:
                raise Unsure               # a key twice: the strict read names both lines
            parent[key] = value
            keys[-1] = _NO_KEY


def _plain(loader: Any, text: str) -> Any:
    """An untagged plain scalar's value, as the loader's resolver and constructors make it."""
    tag = loader.resolve(yaml.ScalarNode, text, (True, False))
    if tag == _STR:
        return text
    if tag not in SCALAR_TAGS:
        raise Unsure                       # '<<' (merge) or '=' (value)
    try:
        return loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, text))
    except Exception:  # noqa: BLE001 - a value it cannot build (a timestamp out of range …): strict says which
        raise Unsure from None

"""Block-style YAML for the common shape of stored objects, without PyYAML's representer.

PyYAML builds a node per value in Python before its C emitter runs: ~1-3 ms for an
Application with its status, and the controller writes one per app after every commit.
This writes the same block layout directly for mappings, sequences, strings, integers,
booleans and null, with strings plain where PyYAML's own resolver reads them back as the
same string and single-quoted otherwise. Anything else (floats, multi-line or unprintable
strings, long or non-string keys, other types) returns None and the caller uses PyYAML.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

from meshpilot.config.yaml_resolve import plain_tag

__all__ = ["emit_block_yaml"]

_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
# Words of characters with no meaning inside a block plain scalar, joined by single
# spaces or by colons that no space follows (": " and " #" never occur).
_CHAR = r"[A-Za-z0-9_./@+=~(),-]"
_PLAIN = re.compile(rf"[A-Za-z0-9_/(]{_CHAR}*(?:[: ]{_CHAR}+)*")
# printable and not a YAML line break (U+2028, U+2029; NEL and controls are outside)
_PRINTABLE_LINE = re.compile(
    r"[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*"
)
_MAX_KEY = 128  # PyYAML writes longer keys as complex keys ("? ")


def _resolves_to_str(text: str) -> bool:
    """PyYAML and kubectl both read `text` back as a string, not a bool, number, date or null."""
    tag: str = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return tag == _STR_TAG and plain_tag(text) == _STR_TAG


class _Unsupported(Exception):
    pass


def emit_block_yaml(data: dict[str, Any]) -> str | None:
    """The YAML text of `data`, or None when it holds something this writer leaves to PyYAML."""
    lines: list[str] = []
    try:
        _mapping(data, "", lines)
    except _Unsupported:
        return None
    return "\n".join(lines) + "\n" if lines else "{}\n"


def _mapping(data: dict[Any, Any], indent: str, lines: list[str]) -> None:
    for key, value in data.items():
        if type(key) is not str or len(key) > _MAX_KEY:
            raise _Unsupported
        head = f"{indent}{_string(key)}:"
        if type(value) is dict and value:
            lines.append(head)
            _mapping(value, indent + "  ", lines)
        elif type(value) is list and value:
            lines.append(head)
            _sequence(value, indent, lines)  # PyYAML does not indent a mapping's sequence
        else:
            lines.append(f"{head} {_scalar(value)}")


def _sequence(items: list[Any], indent: str, lines: list[str]) -> None:
    for item in items:
        if type(item) in (dict, list) and item:
            start = len(lines)
            if isinstance(item, dict):
                _mapping(item, indent + "  ", lines)
            else:
                _sequence(item, indent + "  ", lines)
            lines[start] = f"{indent}- {lines[start][len(indent) + 2 :]}"
        else:
            lines.append(f"{indent}- {_scalar(item)}")


def _scalar(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is dict:
        return "{}"  # empty (non-empty ones are blocks)
    if kind is list:
        return "[]"
    raise _Unsupported


@functools.lru_cache(maxsize=8192)  # keys and most values repeat from object to object
def _string(text: str) -> str:
    if _PLAIN.fullmatch(text) and _resolves_to_str(text):
        return text
    if _PRINTABLE_LINE.fullmatch(text):
        return "'" + text.replace("'", "''") + "'"
    raise _Unsupported

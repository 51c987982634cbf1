"""`--set PATH=VALUE` with istioctl's path syntax, written into an IstioOperator spec tree.

PATH is relative to `spec` (a leading `spec.` is accepted): keys joined by dots (`\\.` for a
dot inside a key), a list entry by index `[0]` or by selector `[name:istio-ingressgateway]`.
VALUE: `true`/`false` are booleans, integers and decimals are numbers, a value in quotes is
a string as written, anything else a string. Missing mappings on the way are created; a list
entry that does not exist is an error, as in istioctl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from meshpilot.install.spec import IstioOperatorError

__all__ = ["SetFlag", "apply_sets", "parse_set", "parse_value"]

_SEGMENT = re.compile(r"^(?P<key>[^\[\]]*)(?P<selectors>(\[[^\[\]]*\])*)$")
_SELECTOR = re.compile(r"\[([^\[\]]*)\]")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


@dataclass(frozen=True, slots=True)
class SetFlag:
    text: str  # as the user wrote it, for messages
    path: tuple[str | int | tuple[str, str], ...]
    value: Any
    raw: str = ""  # the value as written: used where a field wants text, like tag=1.15


def parse_value(text: str) -> Any:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text in ("true", "false"):
        return text == "true"
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _split_keys(path: str) -> list[str]:
    parts, current, escaped = [], "", False
    for char in path:
        if escaped:
            current, escaped = current + char, False
        elif char == "\\":
            escaped = True
        elif char == "." and not _inside_brackets(current):
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _inside_brackets(text: str) -> bool:
    return text.count("[") > text.count("]")


def parse_set(text: str) -> SetFlag:
    """One `--set` argument, parsed; a malformed one raises naming it."""
    path_text, sep, value_text = text.partition("=")
    bad = f"--set {text}: "
    if not sep or not path_text.strip():
        raise IstioOperatorError(bad + "expected PATH=VALUE, e.g. values.pilot.traceSampling=10")
    path_text = path_text.strip().removeprefix("spec.")
    path: list[str | int | tuple[str, str]] = []
    for segment in _split_keys(path_text):
        match = _SEGMENT.match(segment)
        if match is None or (not match["key"] and not match["selectors"]):
            raise IstioOperatorError(bad + f"bad path segment {segment!r} in {path_text!r}")
        if match["key"]:
            path.append(match["key"])
        for selector in _SELECTOR.findall(match["selectors"]):
            if _INT.match(selector) and int(selector) >= 0:
                path.append(int(selector))
            elif ":" in selector and selector.split(":", 1)[0]:
                key, _, value = selector.partition(":")
                path.append((key, value))
            else:
                raise IstioOperatorError(
                    bad + f"bad list selector [{selector}]: use an index [0] or [key:value]"
                )
    if isinstance(path[0], int | tuple):
        raise IstioOperatorError(bad + "the path must start with a field name")
    return SetFlag(text, tuple(path), parse_value(value_text), value_text)


def _where(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, tuple):
            out += f"[{part[0]}:{part[1]}]"
        else:
            out += f".{part}" if out else part
    return out or "spec"


def _step(
    node: Any, part: str | int | tuple[str, str], flag: SetFlag, done: tuple[Any, ...]
) -> Any:
    where = f"--set {flag.text}: {_where(done)}"
    if isinstance(part, str):
        if not isinstance(node, dict):
            raise IstioOperatorError(f"{where} is a {type(node).__name__}, not a mapping")
        return node
    if not isinstance(node, list):
        raise IstioOperatorError(f"{where} is not a list, so it has no entry {_where((part,))}")
    return node


def _index(
    node: list[Any], part: int | tuple[str, str], flag: SetFlag, done: tuple[Any, ...]
) -> int:
    if isinstance(part, int):
        if part >= len(node):
            raise IstioOperatorError(
                f"--set {flag.text}: {_where(done)} has {len(node)} entries; no index {part}"
            )
        return part
    key, value = part
    for i, entry in enumerate(node):
        if isinstance(entry, dict) and str(entry.get(key)) == value:
            return i
    raise IstioOperatorError(f"--set {flag.text}: {_where(done)} has no entry with {key}={value!r}")


def apply_sets(tree: dict[str, Any], flags: list[SetFlag]) -> dict[str, Any]:
    """`tree` with every flag written into it, in order (the tree is changed and returned)."""
    for flag in flags:
        node: Any = tree
        for i, part in enumerate(flag.path):
            done = flag.path[:i]
            last = i == len(flag.path) - 1
            node = _step(node, part, flag, done)
            if isinstance(part, str):
                if last:
                    node[part] = flag.value
                else:
                    nxt = flag.path[i + 1]
                    if node.get(part) is None:
                        node[part] = [] if isinstance(nxt, int | tuple) else {}
                    node = node[part]
            else:
                at = _index(node, part, flag, done)
                if last:
                    node[at] = flag.value
                else:
                    node = node[at]
    return tree

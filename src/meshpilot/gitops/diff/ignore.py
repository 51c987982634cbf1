"""`ignoreDifferences` of an Application: fields left out of the comparison.

Argo CD's rules: a rule selects objects by group and kind (`*` for any) and optionally name
and namespace, and names fields by JSON pointer (RFC 6901). A pointer into a field that does
not exist is no error. `jqPathExpressions` and `managedFieldsManagers` need a jq engine and
server-side field ownership, which we do not have: they are refused with a clear message
rather than silently ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.diff.keys import ResourceKey

__all__ = [
    "IgnoreDifferencesError",
    "IgnoreRule",
    "keep_live_values",
    "parse_ignore_differences",
    "parse_pointer",
    "remove_pointer",
]

_UNSUPPORTED = {
    "jqPathExpressions": "jq path expressions are not supported; use jsonPointers",
    "managedFieldsManagers": "managedFieldsManagers is not supported: the store keeps no "
    "field managers; use jsonPointers",
}
_KNOWN = {"group", "kind", "name", "namespace", "jsonPointers", *_UNSUPPORTED}


class IgnoreDifferencesError(MeshpilotError):
    """An `ignoreDifferences` entry that cannot be applied (names the entry and field)."""


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    group: str
    kind: str
    name: str = ""
    namespace: str = ""
    pointers: tuple[tuple[str, ...], ...] = ()

    def matches(self, key: ResourceKey) -> bool:
        return (
            self.group in ("*", key.group)
            and self.kind in ("*", key.kind)
            and self.name in ("", key.name)
            and self.namespace in ("", key.namespace)
        )


def parse_ignore_differences(entries: Iterable[Mapping[str, Any]]) -> tuple[IgnoreRule, ...]:
    """Rules from `spec.ignoreDifferences` (Argo CD field names)."""
    rules = []
    for index, entry in enumerate(entries):
        where = f"spec.ignoreDifferences[{index}]"
        for field in entry:
            if field in _UNSUPPORTED and entry[field]:
                raise IgnoreDifferencesError(f"{where}.{field}: {_UNSUPPORTED[field]}")
            if field not in _KNOWN:
                raise IgnoreDifferencesError(f"{where}.{field}: unknown field")
        kind = entry.get("kind")
        if not isinstance(kind, str) or not kind:
            raise IgnoreDifferencesError(f"{where}.kind: required")
        pointers = entry.get("jsonPointers") or []
        if not isinstance(pointers, list):
            raise IgnoreDifferencesError(f"{where}.jsonPointers: expected a list of strings")
        parsed = []
        for p_index, pointer in enumerate(pointers):
            try:
                parsed.append(parse_pointer(pointer))
            except ValueError as exc:
                raise IgnoreDifferencesError(f"{where}.jsonPointers[{p_index}]: {exc}") from exc
        rules.append(
            IgnoreRule(
                group=str(entry.get("group") or ""),
                kind=kind,
                name=str(entry.get("name") or ""),
                namespace=str(entry.get("namespace") or ""),
                pointers=tuple(parsed),
            )
        )
    return tuple(rules)


def parse_pointer(pointer: Any) -> tuple[str, ...]:
    """RFC 6901: `/a/b~1c/0` -> ("a", "b/c", "0"); `` is the whole document (refused here)."""
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer (it must start with '/')")
    tokens = pointer[1:].split("/")
    for token in tokens:
        if "~" in token.replace("~0", "").replace("~1", ""):
            raise ValueError(f"{pointer!r}: '~' must be followed by 0 or 1")
    return tuple(t.replace("~1", "/").replace("~0", "~") for t in tokens)


def remove_pointer(doc: Any, tokens: tuple[str, ...]) -> None:
    """Delete the value at `tokens` from `doc` in place; a missing path is a no-op."""
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token)
        if node is None:
            return
    last = tokens[-1]
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        del node[int(last)]


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return None


def keep_live_values(target: Any, live: Any, tokens: tuple[str, ...]) -> None:
    """RespectIgnoreDifferences: the value at `tokens` in `target` becomes the live one (or
    goes away when live has none), so a sync leaves ignored fields as they are."""
    source = live
    for token in tokens:
        source = _child(source, token)
        if source is None:
            remove_pointer(target, tokens)
            return
    node = target
    for token in tokens[:-1]:
        child = _child(node, token)
        if child is None:
            if not isinstance(node, dict):
                return
            child = node[token] = {}
        node = child
    last = tokens[-1]
    if isinstance(node, dict):
        node[last] = copy.deepcopy(source)
    elif isinstance(node, list) and last.isdigit() and int(last) < len(node):
        node[int(last)] = copy.deepcopy(source)

"""Operations on an ordered list of filters or routes (Istio's semantics for NETWORK_FILTER,
HTTP_FILTER, LISTENER_FILTER, HTTP_ROUTE, and FILTER_CHAIN/VIRTUAL_HOST where they apply):

ADD appends; INSERT_FIRST puts first; INSERT_BEFORE / INSERT_AFTER go before / after the
first item the match names (without one: first / last; a match that names nothing present:
no change); REPLACE replaces the first matching item; REMOVE removes every matching one;
MERGE merges into every matching one.
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from typing import Any

from google.protobuf import message

from meshpilot.xds.patch.merge import merge_message

__all__ = ["apply_list_operation"]


def apply_list_operation(
    items: MutableSequence[Any],
    operation: str,
    value: message.Message | None,
    matches: Callable[[Any], bool],
    has_match: bool,
    merge: Callable[[Any, message.Message], None] = merge_message,
) -> bool:
    """Apply one operation to `items` (a repeated message field) in place; whether it
    changed anything."""
    found = [i for i, item in enumerate(items) if matches(item)] if has_match else None
    if operation == "MERGE":
        targets = found if found is not None else range(len(items))
        for i in targets:
            assert value is not None
            merge(items[i], value)
        return bool(targets)
    if operation == "REMOVE":
        targets = found if found is not None else list(range(len(items)))
        if not targets:
            return False
        kept = [item for i, item in enumerate(items) if i not in set(targets)]
        _replace_all(items, kept)
        return True
    assert value is not None
    if operation == "ADD":
        items.add().CopyFrom(value)  # type: ignore[attr-defined]
        return True
    position = _position(operation, found, len(items))
    if position is None:
        return False
    current = list(items)
    if operation == "REPLACE":
        current[position] = value
    else:
        current.insert(position, value)
    _replace_all(items, current)
    return True


def _position(operation: str, found: list[int] | None, size: int) -> int | None:
    if operation == "INSERT_FIRST":
        return 0
    if operation == "INSERT_BEFORE":
        return 0 if found is None else (found[0] if found else None)
    if operation == "INSERT_AFTER":
        return size if found is None else (found[0] + 1 if found else None)
    if operation == "REPLACE":
        return found[0] if found else None
    return None


def _replace_all(items: MutableSequence[Any], new: list[Any]) -> None:
    copies = []
    for item in new:
        copy = type(item)()
        copy.CopyFrom(item)
        copies.append(copy)
    del items[:]
    items.extend(copies)

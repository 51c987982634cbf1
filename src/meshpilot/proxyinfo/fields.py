"""Typed reads from JSON that other programs wrote (Envoy's admin pages, the control plane's
debug pages): a missing or mistyped field reads as empty, never as an exception, because a
debugging tool must show what it can of whatever the proxy holds.

Paths are proto field names as `config_dump` writes them (snake_case).
"""

from __future__ import annotations

from typing import Any

__all__ = ["JsonObject", "flag", "integer", "obj", "objs", "strings", "text"]

JsonObject = dict[str, Any]


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def obj(value: Any, *path: str) -> JsonObject:
    """The object at `path`, or {}."""
    found = _at(value, path)
    return found if isinstance(found, dict) else {}


def objs(value: Any, *path: str) -> list[JsonObject]:
    """The objects in the list at `path` (anything else in it is skipped), or []."""
    found = _at(value, path)
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else []


def text(value: Any, *path: str) -> str:
    """The string at `path`, or ""."""
    found = _at(value, path)
    return found if isinstance(found, str) else ""


def strings(value: Any, *path: str) -> list[str]:
    found = _at(value, path)
    return [item for item in found if isinstance(item, str)] if isinstance(found, list) else []


def integer(value: Any, *path: str) -> int:
    """The number at `path` (proto JSON writes 64-bit integers as strings), or 0."""
    found = _at(value, path)
    if isinstance(found, bool):
        return 0
    if isinstance(found, int):
        return found
    if isinstance(found, str) and found.isdigit():
        return int(found)
    return 0


def flag(value: Any, *path: str) -> bool:
    return _at(value, path) is True

"""JSON from outside (request bodies, webhook payloads, JSON files) with bounded nesting.

json.loads recurses once per level and raises RecursionError on deep input; a payload just
under Python's limit parses, then breaks whatever walks it next. Both become ValueError, which
callers already catch for malformed JSON.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_DEPTH", "JSONDepthError", "loads"]

# The YAML reader's limit (config/yaml_build.py): far deeper than any object or payload.
MAX_DEPTH = 200


class JSONDepthError(ValueError):
    """JSON nested deeper than MAX_DEPTH levels."""


def loads(data: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads; raises ValueError (json.JSONDecodeError or JSONDepthError) on bad input."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise JSONDepthError(f"JSON nested deeper than {max_depth} levels") from None
    if _depth_exceeds(value, max_depth):
        raise JSONDepthError(f"JSON nested deeper than {max_depth} levels")
    return value


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists/objects nest deeper than `limit`, walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False

"""Stable YAML text of normalized objects and the unified diff between two of them."""

from __future__ import annotations

import difflib
from typing import Any

import yaml

__all__ = ["to_yaml", "unified_diff"]


def to_yaml(obj: dict[str, Any] | None) -> str:
    """Sorted keys, block style, no line folding: the same object always gives the same text."""
    if obj is None:
        return ""
    text: str = yaml.safe_dump(
        obj, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 16
    )
    return text


def unified_diff(live: dict[str, Any] | None, target: dict[str, Any] | None, label: str) -> str:
    """`diff -u live target` for one resource; `` when the texts are equal."""
    lines = difflib.unified_diff(
        to_yaml(live).splitlines(keepends=True),
        to_yaml(target).splitlines(keepends=True),
        fromfile=f"live/{label}",
        tofile=f"target/{label}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)

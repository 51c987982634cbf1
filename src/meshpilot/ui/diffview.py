"""The API's diff text (`argocd app diff` style: one `===== group/kind ns/name ======` block
per resource, each a unified diff of the normalised live and desired YAML, Secret values
masked) laid out side by side: live on the left, desired on the right."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["DiffRow", "ResourceDiff", "side_by_side"]

_HEADER = re.compile(r"^===== (.*) ======$")


@dataclass(frozen=True, slots=True)
class DiffRow:
    left: str  # the live line ("" when none)
    right: str  # the desired line
    change: str  # "same", "changed", "removed" (live only), "added" (desired only), "hunk"


@dataclass(frozen=True, slots=True)
class ResourceDiff:
    title: str  # group/kind namespace/name
    rows: list[DiffRow] = field(default_factory=list)


def side_by_side(text: str) -> list[ResourceDiff]:
    out: list[ResourceDiff] = []
    block: list[str] = []
    title = ""
    for line in text.splitlines():
        found = _HEADER.match(line)
        if found:
            if title:
                out.append(ResourceDiff(title, _rows(block)))
            title, block = found.group(1), []
        else:
            block.append(line)
    if title:
        out.append(ResourceDiff(title, _rows(block)))
    return out


def _rows(lines: list[str]) -> list[DiffRow]:
    rows: list[DiffRow] = []
    removed: list[str] = []
    added: list[str] = []

    def flush() -> None:
        # Pair a run of removed lines with the run of added lines after it: a changed line
        # shows old and new on one row.
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else ""
            right = added[i] if i < len(added) else ""
            kind = "changed" if left and right else ("removed" if left else "added")
            rows.append(DiffRow(left, right, kind))
        removed.clear()
        added.clear()

    for line in lines:
        if line.startswith(("--- ", "+++ ")):
            continue
        if line.startswith("@@"):
            flush()
            rows.append(DiffRow(line, line, "hunk"))
        elif line.startswith("-"):
            if added:
                flush()
            removed.append(line[1:])
        elif line.startswith("+"):
            added.append(line[1:])
        else:
            flush()
            rows.append(DiffRow(line[1:], line[1:], "same"))
    flush()
    return rows

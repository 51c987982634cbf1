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
        for left, right in _pair(removed, added):
            kind = (
                "changed"
                if left is not None and right is not None
                else ("removed" if left is not None else "added")
            )
            rows.append(DiffRow(left or "", right or "", kind))
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


def _key(line: str) -> tuple[int, str]:
    """A YAML line's indentation and key (`  weight: 80` -> (2, "weight"))."""
    text = line.lstrip(" ")
    return len(line) - len(text), text.split(":", 1)[0] if ":" in text else ""


def _pair(removed: list[str], added: list[str]) -> list[tuple[str | None, str | None]]:
    """A run of removed lines beside the run of added lines after it: a line whose key
    (and indentation) is in both is shown as changed on one row; other lines at the same
    position and indentation pair up too (`- reviews` / `- ratings`); the rest stand alone."""
    partner: dict[int, int] = {}  # added index -> removed index
    taken: set[int] = set()
    for ri, line in enumerate(removed):
        key = _key(line)
        if not key[1]:
            continue
        for ai, other in enumerate(added):
            if ai not in partner and _key(other) == key:
                partner[ai] = ri
                taken.add(ri)
                break
    loose_r = [ri for ri in range(len(removed)) if ri not in taken]
    loose_a = [ai for ai in range(len(added)) if ai not in partner]
    for ri, ai in zip(loose_r, loose_a, strict=False):
        if _key(removed[ri])[0] == _key(added[ai])[0] and not (
            _key(removed[ri])[1] and _key(added[ai])[1]
        ):
            partner[ai] = ri
            taken.add(ri)
    out: list[tuple[str | None, str | None]] = [
        (removed[ri], None) for ri in range(len(removed)) if ri not in taken
    ]
    for ai, line in enumerate(added):
        out.append((removed[partner[ai]] if ai in partner else None, line))
    return out

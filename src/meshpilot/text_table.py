"""Plain-text tables as kubectl and the argocd CLI print them: every column as wide as its
widest cell, a fixed gap between columns, trailing blanks trimmed. An empty cell (a core
kind's GROUP) still takes its column's width, so the rows below stay aligned."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["render_table"]


def render_table(rows: Sequence[Sequence[str]], gap: int = 2) -> str:
    """The rows (the header first) as lines without a final newline; short rows are padded
    with empty cells."""
    if not rows:
        return ""
    count = max(len(row) for row in rows)
    cells = [[*map(str, row), *([""] * (count - len(row)))] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(count)]
    spacer = " " * gap
    return "\n".join(
        spacer.join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    )

"""Tables as istioctl prints them (Go's tabwriter): each column as wide as its widest cell
plus padding, left-aligned, the last column unpadded; trailing blanks are trimmed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Table"]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    padding: int = 5  # istioctl: 5 for most tables, 1 for listeners

    @classmethod
    def of(cls, columns: Sequence[str], rows: Iterable[Sequence[str]], padding: int = 5) -> Table:
        return cls(tuple(columns), tuple(tuple(row) for row in rows), padding)

    def render(self) -> str:
        lines = [self.columns, *self.rows]
        widths = [
            max(len(line[i]) for line in lines if i < len(line))
            for i in range(len(self.columns) - 1)
        ]
        out = []
        for line in lines:
            cells = [
                cell.ljust(widths[i] + self.padding) if i < len(widths) else cell
                for i, cell in enumerate(line)
            ]
            out.append("".join(cells).rstrip())
        return "\n".join(out)

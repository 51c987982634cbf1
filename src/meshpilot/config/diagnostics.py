"""Diagnostics: what is wrong with an input object, where, and how bad."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Diagnostic", "FieldError", "Origin", "Severity", "format_path"]


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an object came from: its file and the line its document starts on."""

    file: str
    line: int
    # Line of every key/item inside the document, by path; used to point at a field.
    positions: dict[tuple[str | int, ...], int] | None = None

    def line_of(self, path: tuple[str | int, ...]) -> int:
        """The line of the deepest existing prefix of `path` (the document start if none)."""
        if not self.positions:
            return self.line
        for end in range(len(path), 0, -1):
            line = self.positions.get(path[:end])
            if line is not None:
                return line
        return self.line


@dataclass(frozen=True, slots=True)
class FieldError:
    """A problem with one field of one object, before it is tied to a file."""

    path: tuple[str | int, ...]
    message: str
    severity: Severity = Severity.ERROR


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A problem with one input, naming file, line, object and field."""

    file: str
    line: int
    message: str
    kind: str = ""
    namespace: str = ""
    name: str = ""
    field: str = ""
    severity: Severity = Severity.ERROR
    code: str = ""  # Istio's analyzer message code (IST0101, ...), when there is one

    @property
    def object_ref(self) -> str:
        if not self.kind:
            return ""
        name = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {name}"

    def __str__(self) -> str:
        level = f"{self.severity.value} {self.code}" if self.code else self.severity.value
        parts = [f"{self.file}:{self.line}", level]
        if self.object_ref:
            parts.append(self.object_ref)
        if self.field:
            parts.append(self.field)
        return ": ".join(parts) + ": " + self.message

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.file, self.line, self.field, self.message)


def format_path(path: tuple[str | int, ...]) -> str:
    """('spec', 'http', 0, 'route') -> 'spec.http[0].route'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out

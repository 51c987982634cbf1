"""Read YAML/JSON files into plain documents that remember the line of every field.

libyaml composes the node tree (fast, with marks); we build plain Python values from it and
record the line of every mapping key and sequence item by path, so that a validation error
deep inside an object can still name its line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.yaml_build import Position, build_stream
from meshpilot.errors import InputError

__all__ = ["RawDocument", "ReadResult", "read_documents", "read_paths", "read_text"]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class RawDocument:
    """One YAML document (or one item of a `kind: List`) with the lines of its fields."""

    file: str
    line: int
    data: Any
    positions: dict[Position, int]


@dataclass(slots=True)
class ReadResult:
    documents: list[RawDocument] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def read_text(text: str, file: str) -> ReadResult:
    """Parse every document in `text`. A syntax error, and a document that cannot be built
    (bad tag, too many aliases, too deep: see yaml_build), is a diagnostic naming the line."""
    stream = build_stream(text, file)
    result = ReadResult(diagnostics=stream.diagnostics)
    for doc in stream.documents:
        if doc.data is not None:
            result.documents.extend(_split_lists(file, doc.line, doc.data, doc.positions))
    return result


def _split_lists(
    file: str, line: int, data: Any, positions: dict[Position, int]
) -> Iterator[RawDocument]:
    """Yield a `kind: List` document's items as documents of their own."""
    if (
        isinstance(data, dict)
        and data.get("kind") == "List"
        and isinstance(data.get("items"), list)
    ):
        # one pass over the positions: a long list must not cost items x positions
        by_item: dict[Any, dict[Position, int]] = {}
        for path, ln in positions.items():
            if len(path) > 2 and path[0] == "items":
                by_item.setdefault(path[1], {})[path[2:]] = ln
        for index, item in enumerate(data["items"]):
            prefix = ("items", index)
            yield RawDocument(file, positions.get(prefix, line), item, by_item.get(index, {}))
        return
    yield RawDocument(file, line, data, positions)


def read_paths(paths: Iterable[str | Path]) -> ReadResult:
    """Read files and directories (recursively, *.yaml/*.yml/*.json, in sorted order)."""
    result = ReadResult()
    for file in _expand(paths):
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{file}: not UTF-8 text ({exc.reason})") from exc
        except OSError as exc:
            raise InputError(f"{file}: cannot read: {exc.strerror}") from exc
        one = read_text(text, str(file))
        result.documents.extend(one.documents)
        result.diagnostics.extend(one.diagnostics)
    return result


def read_documents(paths: Iterable[str | Path]) -> list[RawDocument]:
    return read_paths(paths).documents


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and p.suffix in _SUFFIXES
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                )
            )
        elif path.exists():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or directory")
    return files

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

import yaml

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.errors import InputError

__all__ = ["RawDocument", "ReadResult", "read_documents", "read_paths", "read_text"]

_SUFFIXES = (".yaml", ".yml", ".json")
Position = tuple[str | int, ...]


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


class _Builder:
    """Turns composed nodes into Python values, noting positions and duplicate keys."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[Position, int] = {}
        self.diagnostics: list[Diagnostic] = []
        self._scalars = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: Position) -> Any:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    merged = self.build(value_node, path)
                    for item in merged if isinstance(merged, list) else [merged]:
                        if isinstance(item, dict):
                            out.update({k: v for k, v in item.items() if k not in out})
                    continue
                key = self.build(key_node, path)
                if not isinstance(key, str | int | float | bool) or key is None:
                    key = str(key)
                key_path = (*path, str(key))
                if key in out:
                    self.diagnostics.append(
                        Diagnostic(
                            file=self.file,
                            line=key_node.start_mark.line + 1,
                            message=f"duplicate key {key!r}; the later value is used",
                        )
                    )
                self.positions[key_path] = key_node.start_mark.line + 1
                out[key] = self.build(value_node, key_path)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                item_path = (*path, index)
                self.positions[item_path] = item.start_mark.line + 1
                items.append(self.build(item, item_path))
            return items
        value = self._scalars.construct_object(node, deep=True)
        # Timestamps and binary become strings: Kubernetes objects carry them as text.
        if not isinstance(value, str | int | float | bool) and value is not None:
            return node.value
        return value


def read_text(text: str, file: str) -> ReadResult:
    """Parse every document in `text`; a syntax error becomes one diagnostic for the file."""
    result = ReadResult()
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.CSafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = exc.problem or str(exc)
        result.diagnostics.append(
            Diagnostic(file=file, line=line, message=f"invalid YAML: {problem}")
        )
        return result
    except yaml.YAMLError as exc:
        result.diagnostics.append(Diagnostic(file=file, line=1, message=f"invalid YAML: {exc}"))
        return result
    for node in nodes:
        if node is None:
            continue
        builder = _Builder(file)
        data = builder.build(node, ())
        result.diagnostics.extend(builder.diagnostics)
        if data is None:
            continue
        result.documents.extend(
            _split_lists(file, node.start_mark.line + 1, data, builder.positions)
        )
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
        for index, item in enumerate(data["items"]):
            prefix = ("items", index)
            item_positions = {p[2:]: ln for p, ln in positions.items() if p[:2] == prefix}
            yield RawDocument(file, positions.get(prefix, line), item, item_positions)
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

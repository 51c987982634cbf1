"""Build plain values from libyaml's node tree, within bounds that a hostile file cannot pass.

The bounds are those of Kubernetes' YAML reader (go-yaml v3, `allowedAliasRatio`): nodes
reached through aliases may be at most a share of all nodes built (99% up to 400,000 nodes,
falling to 10% at 4,000,000), so a "billion laughs" file stops after about a thousand nodes
instead of expanding to 10^9. An anchor whose value contains its own alias, nesting deeper than
MAX_DEPTH, and a scalar its tag cannot construct (`!!int abc`, `!foo x`, an integer past
Python's digit limit) stop the document too. Each is a BuildError naming a line, never an
exception the caller did not ask for.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import yaml

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.yaml_resolve import KNOWN_TAGS, Loader, plain_value
from meshpilot.config.yaml_scan import FlowLoader, needs_flow_loader

__all__ = [
    "MAX_DEPTH",
    "BuildError",
    "BuiltDocument",
    "BuiltStream",
    "NodeBuilder",
    "Position",
    "allowed_alias_ratio",
    "build_stream",
]

Position = tuple[str | int, ...]

# Deep enough for any Kubernetes object or Helm values file; shallow enough that whatever
# walks the values afterwards (validation, merges, copies) stays far from Python's recursion
# limit. libyaml itself refuses nesting past 1000.
MAX_DEPTH = 200
_RATIO_LOW = 400_000
_RATIO_HIGH = 4_000_000
_TAG = "tag:yaml.org,2002:"
_NOUNS = {
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "timestamp": "a timestamp",
    "binary": "base64 data",
}
# Plain `<<` and `=` outside a mapping key resolve to these tags, which no safe constructor
# takes; Kubernetes reads them as the strings they look like.
_AS_TEXT = {f"{_TAG}merge", f"{_TAG}value"}


def allowed_alias_ratio(decoded: int) -> float:
    """The share of built nodes that may come from aliases, as go-yaml v3 allows it."""
    if decoded <= _RATIO_LOW:
        return 0.99
    if decoded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


class BuildError(Exception):
    """A document that cannot be built: the line and the message (`invalid YAML: ...`)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"{line}: {message}")
        self.line = line
        self.message = message


class NodeBuilder:
    """Turns one document's nodes into Python values, noting positions and duplicate keys.

    libyaml's composer hands an alias back as the very node its anchor names, so a node seen
    before in this document is an alias; nodes built inside one count against the ratio.
    """

    def __init__(self, file: str) -> None:
        self.file = file
        self.positions: dict[Position, int] = {}
        self.diagnostics: list[Diagnostic] = []
        self._scalars = yaml.constructor.SafeConstructor()
        self._decoded = 0
        self._aliased = 0
        self._alias_depth = 0
        self._seen: set[int] = set()
        self._open: set[int] = set()  # collections being built: an alias to one is a cycle
        self._line = 1  # last line built outside an alias, where an expansion is blamed

    def build(self, node: yaml.Node, path: Position = (), depth: int = 0) -> Any:
        ident = id(node)
        via_alias = ident in self._seen
        self._seen.add(ident)
        self._alias_depth += via_alias
        self._count(node)
        if isinstance(node, yaml.ScalarNode):
            value = self._scalar(node)
        else:
            if ident in self._open:
                raise BuildError(_line(node), "invalid YAML: an anchor's value contains its alias")
            if depth >= MAX_DEPTH:
                raise BuildError(
                    _line(node), f"invalid YAML: nested deeper than {MAX_DEPTH} levels"
                )
            self._open.add(ident)
            if isinstance(node, yaml.MappingNode):
                value = self._mapping(node, path, depth + 1)
            elif isinstance(node, yaml.SequenceNode):
                value = self._sequence(node, path, depth + 1)
            else:  # libyaml composes no other kind of node
                raise BuildError(_line(node), "invalid YAML: unknown node")
            self._open.discard(ident)
        self._alias_depth -= via_alias
        return value

    def _count(self, node: yaml.Node) -> None:
        self._decoded += 1
        if self._alias_depth:
            self._aliased += 1
        if (
            self._aliased > 100
            and self._decoded > 1000
            and self._aliased / self._decoded > allowed_alias_ratio(self._decoded)
        ):
            share = allowed_alias_ratio(self._decoded)
            raise BuildError(
                self._line,
                f"invalid YAML: too many aliases (alias expansion bounded: {self._aliased} "
                f"of {self._decoded} nodes came from aliases, at most {share:.0%} may)",
            )

    def _mapping(self, node: yaml.MappingNode, path: Position, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        explicit: set[Any] = set()  # keys written here, as opposed to merged with `<<`
        for key_node, value_node in node.value:
            line = _line(key_node)
            if not self._alias_depth:
                self._line = line
            if key_node.tag == f"{_TAG}merge":
                merged = self.build(value_node, path, depth)
                for item in merged if isinstance(merged, list) else [merged]:
                    if isinstance(item, dict):
                        out.update({k: v for k, v in item.items() if k not in out})
                continue
            key = self.build(key_node, path, depth)
            if not isinstance(key, str | int | float | bool) or key is None:
                key = str(key)
            key_path = (*path, str(key))
            if key in explicit:
                self.diagnostics.append(
                    Diagnostic(self.file, line, f"duplicate key {key!r}; the later value is used")
                )
            explicit.add(key)
            self.positions[key_path] = line
            out[key] = self.build(value_node, key_path, depth)
        return out

    def _sequence(self, node: yaml.SequenceNode, path: Position, depth: int) -> list[Any]:
        items = []
        for index, item in enumerate(node.value):
            item_path = (*path, index)
            if not self._alias_depth and id(item) not in self._seen:
                self._line = _line(item)
            self.positions[item_path] = _line(item)
            items.append(self.build(item, item_path, depth))
        return items

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        if node.tag in _AS_TEXT:
            return node.value
        try:
            if node.tag in KNOWN_TAGS:
                return plain_value(node.tag, node.value)
            value = self._scalars.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, LookupError, AttributeError, TypeError) as exc:
            raise BuildError(_line(node), f"invalid YAML: {_scalar_problem(node, exc)}") from None
        # Timestamps and binary become strings: Kubernetes objects carry them as text.
        if not isinstance(value, str | int | float | bool) and value is not None:
            return node.value
        return value


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _scalar_problem(node: yaml.ScalarNode, exc: Exception) -> str:
    tag = str(node.tag)
    short = f"!!{tag.removeprefix(_TAG)}" if tag.startswith(_TAG) else tag
    text = node.value if len(node.value) <= 40 else f"{node.value[:37]}..."
    if tag == f"{_TAG}int" and isinstance(exc, ValueError) and node.value.strip("+-").isdigit():
        limit = sys.get_int_max_str_digits()
        return f"integer of {len(node.value)} digits is too large (at most {limit})"
    noun = _NOUNS.get(tag.removeprefix(_TAG)) if tag.startswith(_TAG) else None
    if noun is None:
        return f"unknown tag {short} on {text!r}"
    return f"{short} {text!r} is not {noun}"


@dataclass(frozen=True, slots=True)
class BuiltDocument:
    """One document's value, the line it starts on and the line of every field by path."""

    line: int
    data: Any
    positions: dict[Position, int]


@dataclass(slots=True)
class BuiltStream:
    documents: list[BuiltDocument] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # the first error that stopped a document or the stream (duplicate keys are not errors)
    error: Diagnostic | None = None


def build_stream(text: str, file: str) -> BuiltStream:
    """Every document in `text`. A syntax error ends the stream; a document that cannot be
    built (see the module docstring) is left out; each is a diagnostic `invalid YAML: ...`."""
    out = BuiltStream()
    try:
        nodes = _compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        _fail(out, Diagnostic(file, line, f"invalid YAML: {exc.problem or exc}"))
        return out
    except yaml.YAMLError as exc:
        _fail(out, Diagnostic(file, 1, f"invalid YAML: {exc}"))
        return out
    except UnicodeEncodeError as exc:  # a lone surrogate, from a decoder's errors="surrogateescape"
        line = text.count("\n", 0, exc.start) + 1
        _fail(out, Diagnostic(file, line, "invalid YAML: not Unicode text"))
        return out
    for node in nodes:
        if node is None:
            continue
        builder = NodeBuilder(file)
        try:
            data = builder.build(node)
        except BuildError as exc:
            out.diagnostics.extend(builder.diagnostics)
            _fail(out, Diagnostic(file, exc.line, exc.message))
            continue
        out.diagnostics.extend(builder.diagnostics)
        out.documents.append(BuiltDocument(_line(node), data, builder.positions))
    return out


def _compose(text: str) -> list[yaml.Node]:
    """libyaml's nodes; the slower go-yaml-like reader only for what libyaml alone refuses
    (yaml_scan.py), so that kubectl's reading of a flow list of IPv6 addresses is ours."""
    try:
        return list(yaml.compose_all(text, Loader=Loader))
    except yaml.MarkedYAMLError as exc:
        if not needs_flow_loader(exc):
            raise
    try:
        return list(yaml.compose_all(text, Loader=FlowLoader))  # type: ignore[arg-type]
    except RecursionError:  # the pure-Python composer recurses per level
        raise yaml.YAMLError(f"nested deeper than {MAX_DEPTH} levels") from None


def _fail(out: BuiltStream, diagnostic: Diagnostic) -> None:
    out.diagnostics.append(diagnostic)
    out.error = out.error or diagnostic

"""Integer fields with the range their Istio type and their Envoy field can hold.

A number past what the Envoy field holds was accepted and then broke the push (a
`maxConnections: 1099511627776` made every ADS stream of the proxies it reached fail with
"Value out of range"). Model fields typed `Int32`, `Count32`, `UInt32` or `UInt64` carry a
`Range`; `range_errors(model)` walks an object and reports every value outside its range
with the field's path. It runs after the kind's own checks (config/validation) and skips
fields they already reported (a negative count keeps its "must be non-negative" message).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel

from meshpilot.config.diagnostics import FieldError

__all__ = [
    "INT32_MAX",
    "UINT32_MAX",
    "Count32",
    "Int32",
    "Range",
    "UInt32",
    "UInt64",
    "range_errors",
]

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Range:
    low: int
    high: int
    name: str

    def error(self, value: int) -> str | None:
        if self.low <= value <= self.high:
            return None
        return f"{value} is out of range: must be in {self.low}..{self.high} ({self.name})"


# Istio's int32 fields (weights, attempts, percentages); Envoy's fields for them are wider.
Int32 = Annotated[int, Range(-(2**31), INT32_MAX, "int32")]
# Istio's int32 counts and limits that cannot be negative (connection pool settings).
Count32 = Annotated[int, Range(0, INT32_MAX, "int32")]
# Istio's uint32 / UInt32Value fields, held by Envoy UInt32Value fields.
UInt32 = Annotated[int, Range(0, UINT32_MAX, "uint32")]
UInt64 = Annotated[int, Range(0, UINT64_MAX, "uint64")]


def range_errors(model: BaseModel, reported: frozenset[Path] = frozenset()) -> list[FieldError]:
    """Every ranged value of `model` out of its range, except at paths in `reported`."""
    return [
        FieldError(path, message)
        for path, message in _walk(model, ())
        if not any(path[: len(r)] == r for r in reported)
    ]


def _walk(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    if isinstance(value, BaseModel):
        for name, alias, bound in _plan(type(value)):
            item = getattr(value, name)
            if item is None:
                continue
            where = (*path, alias)
            if bound is not None and isinstance(item, int) and not isinstance(item, bool):
                message = bound.error(item)
                if message is not None:
                    yield where, message
            else:
                yield from _walk(item, where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, (*path, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, (*path, str(key)))


@cache
def _plan(cls: type[BaseModel]) -> tuple[tuple[str, str, Range | None], ...]:
    """(attribute, YAML name, range) of each field of a model class that can hold a ranged
    number or a nested model."""
    out = []
    for name, info in cls.model_fields.items():
        bound = next((m for m in info.metadata if isinstance(m, Range)), None)
        bound = bound or _range_in(info.annotation)
        if bound is not None or _may_nest(info.annotation):
            out.append((name, info.alias or name, bound))
    return tuple(out)


def _range_in(annotation: Any) -> Range | None:
    """The Range of `Int32 | None` and the like."""
    if typing.get_origin(annotation) is Annotated:
        return next((m for m in annotation.__metadata__ if isinstance(m, Range)), None)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _range_in(arg)
            if found is not None:
                return found
    return None


def _may_nest(annotation: Any) -> bool:
    """Whether values of this type can contain a model (lists, dicts, optional models)."""
    if isinstance(annotation, type):
        return issubclass(annotation, BaseModel)
    return any(_may_nest(arg) for arg in typing.get_args(annotation))

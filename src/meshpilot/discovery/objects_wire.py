"""Objects as JSON that reads back into the same models: pydantic's JSON dump writes a
Duration as its nanoseconds, which the models refuse on input (they take "10s"), so such
fields are written in protobuf JSON form here."""

from __future__ import annotations

import typing
from functools import cache
from typing import Any

from pydantic import BaseModel

from meshpilot.config.duration import format_duration, parse_duration

__all__ = ["wire_dump"]


def wire_dump(model: BaseModel) -> dict[str, Any]:
    """`model` as camelCase JSON without defaults, that `model_validate` takes back."""
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    _fix(model, dumped)
    return dumped


def _fix(model: BaseModel, dumped: dict[str, Any]) -> None:
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        if key not in dumped:
            continue
        annotation: Any = info.annotation
        if _mentions_duration(annotation, tuple(info.metadata)):
            dumped[key] = _durations(dumped[key])
        else:
            _fix_value(getattr(model, name), dumped[key])


def _fix_value(value: Any, dumped: Any) -> None:
    if isinstance(value, BaseModel) and isinstance(dumped, dict):
        _fix(value, dumped)
    elif isinstance(value, (list, tuple)) and isinstance(dumped, list):
        for item, out in zip(value, dumped, strict=False):
            _fix_value(item, out)
    elif isinstance(value, dict) and isinstance(dumped, dict):
        for key, item in value.items():
            if key in dumped:
                _fix_value(item, dumped[key])


def _durations(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return format_duration(value)
    if isinstance(value, list):
        return [_durations(v) for v in value]
    if isinstance(value, dict):
        return {k: _durations(v) for k, v in value.items()}
    return value


@cache
def _mentions_duration(annotation: Any, metadata: tuple[Any, ...] = ()) -> bool:
    """Is this a Duration, or a container or optional of one?"""
    if any(getattr(m, "func", None) is parse_duration for m in metadata):
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        extra = annotation.__metadata__
        if any(getattr(m, "func", None) is parse_duration for m in extra):
            return True
    return any(_mentions_duration(arg) for arg in typing.get_args(annotation) if arg is not None)

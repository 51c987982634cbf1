"""Semantic validation close to Istio's: one module per kind, each returning FieldErrors.

Types, required fields and unknown fields are checked by the models; these functions check
what a schema cannot: formats, ranges, references inside one object, conflicting fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshpilot.config.diagnostics import FieldError
from meshpilot.config.kinds import Kind

__all__ = ["validate_object"]

Validator = Callable[[Any], list[FieldError]]


def _validators() -> dict[Kind, Validator]:
    from meshpilot.config.validation import istio, kube

    return {**istio.VALIDATORS, **kube.VALIDATORS}


_CACHE: dict[Kind, Validator] = {}


def validate_object(kind: Kind, model: Any) -> list[FieldError]:
    if not _CACHE:
        _CACHE.update(_validators())
    validator = _CACHE.get(kind)
    return validator(model) if validator else []

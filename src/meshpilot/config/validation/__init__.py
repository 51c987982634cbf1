"""Semantic validation close to Istio's: one module per kind, each returning FieldErrors.

Types, required fields and unknown fields are checked by the models; these functions check
what a schema cannot: formats, ranges, references inside one object, conflicting fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshpilot.config.diagnostics import FieldError, Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.ranges import range_errors

__all__ = ["validate_object"]

Validator = Callable[[Any], list[FieldError]]


def _validators() -> dict[Kind, Validator]:
    from meshpilot.config.validation import istio, kube

    return {**istio.VALIDATORS, **kube.VALIDATORS}


_CACHE: dict[Kind, Validator] = {}


# Kinds with numbers Envoy holds in fixed-size fields (config/ranges.py).
_RANGED = frozenset(
    {
        Kind.VIRTUAL_SERVICE,
        Kind.DESTINATION_RULE,
        Kind.GATEWAY,
        Kind.SERVICE_ENTRY,
        Kind.WORKLOAD_ENTRY,
        Kind.SIDECAR,
    }
)


def validate_object(kind: Kind, model: Any) -> list[FieldError]:
    if not _CACHE:
        _CACHE.update(_validators())
    validator = _CACHE.get(kind)
    errors = validator(model) if validator else []
    if kind in _RANGED:
        reported = frozenset(e.path for e in errors if e.severity is Severity.ERROR)
        errors += range_errors(model, reported)
    return errors

"""Fields a model keeps as plain dicts (Sidecar ingress TLS and connection pools, egress
proxy), validated against their typed models so that they get the same checks."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from meshpilot.config.validation.common import Path, Problems, quoted

__all__ = ["parse_part"]

M = TypeVar("M", bound=BaseModel)


def parse_part(p: Problems, path: Path, model: type[M], data: object) -> M | None:
    """Validate a field the model keeps as a plain dict against its typed model; report the
    problems at their paths and return None if it does not fit."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False, include_input=False):
            loc = tuple(part for part in err["loc"] if not (isinstance(part, str) and "[" in part))
            if err["type"] == "extra_forbidden":
                message = f"unknown field {quoted(loc[-1])}" if loc else "unknown field"
            elif err["type"] == "missing":
                message = "required field is missing"
            else:
                message = err["msg"].removeprefix("Value error, ")
            p.error((*path, *loc), message)
    return None

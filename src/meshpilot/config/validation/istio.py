"""Validation of Istio networking objects (filled out kind by kind)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshpilot.config.diagnostics import FieldError
from meshpilot.config.kinds import Kind

__all__ = ["VALIDATORS"]

VALIDATORS: dict[Kind, Callable[[Any], list[FieldError]]] = {}

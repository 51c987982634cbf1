"""Cross-object checks (`meshpilot analyze`): references that no single object can validate."""

from __future__ import annotations

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.model.push_context import PushContext

__all__ = ["analyze"]


def analyze(push: PushContext) -> list[Diagnostic]:
    """Reference problems in a valid set of objects, sorted by file and line."""
    return []

"""Building analyzer diagnostics: the offending object, field, line and Istio message code."""

from __future__ import annotations

import json
from typing import Any

from meshpilot.analysis.messages import level_of
from meshpilot.config.diagnostics import Diagnostic, format_path
from meshpilot.config.objects import ConfigObject

__all__ = ["Path", "finding", "quoted"]

Path = tuple[str | int, ...]


def finding(
    obj: ConfigObject[Any],
    path: Path,
    message: str,
    *,
    code: str,
) -> Diagnostic:
    """A diagnostic about `obj` at `path` (its line from the source positions). `code` is
    the analyzer message code (IST0101, ..., or meshpilot's MPxxxx); its level is the one
    the catalogue gives it (analysis/messages.py)."""
    return Diagnostic(
        file=obj.origin.file,
        line=obj.origin.line_of(path),
        kind=str(obj.key.kind),
        namespace=obj.namespace,
        name=obj.name,
        field=format_path(path),
        message=message,
        severity=level_of(code),
        code=code,
    )


def quoted(text: str) -> str:
    """`"text"`, as Go's %q prints it in Istio's messages."""
    return json.dumps(text)

"""How `meshpilot analyze` prints its findings: istioctl's log, json and yaml outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from meshpilot.config.diagnostics import Diagnostic, Severity

__all__ = ["OUTPUTS", "counted", "render_findings", "summary"]

OUTPUTS = ("log", "json", "yaml")

# istioctl's level names, so scripts written for `istioctl analyze -o json` read ours.
_LEVELS = {Severity.ERROR: "Error", Severity.WARNING: "Warning", Severity.INFO: "Info"}


def render_findings(diagnostics: Sequence[Diagnostic], output: str) -> str:
    """The findings in the chosen output; "" for the log output with nothing found."""
    ordered = sorted(diagnostics, key=Diagnostic.sort_key)
    if output == "log":
        return "\n".join(str(diag) for diag in ordered)
    rows = [_row(diag) for diag in ordered]
    if output == "yaml":
        return yaml.safe_dump(rows, sort_keys=False, default_flow_style=False, width=100).rstrip()
    return json.dumps(rows, indent=2)


def _row(diag: Diagnostic) -> dict[str, Any]:
    return {
        "code": diag.code,
        "level": _LEVELS[diag.severity],
        "file": diag.file,
        "line": diag.line,
        "object": diag.object_ref,
        "field": diag.field,
        "message": diag.message,
    }


def counted(count: int, noun: str) -> str:
    """'1 error', '2 errors'; 'info' is not counted in the plural."""
    plural = noun if count == 1 or noun == "info" else f"{noun}s"
    return f"{count} {plural}"


def summary(objects: int, diagnostics: Sequence[Diagnostic]) -> str:
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = sum(d.severity is Severity.WARNING for d in diagnostics)
    infos = len(diagnostics) - errors - warnings
    return (
        f"{counted(objects, 'object')} checked: {counted(errors, 'error')}, "
        f"{counted(warnings, 'warning')}, {counted(infos, 'info')}"
    )

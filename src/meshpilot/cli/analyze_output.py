"""How `meshpilot analyze` prints its findings, as istioctl analyze does.

log:  `Error [IST0101] (VirtualService default/reviews vs.yaml:12) Referenced host not found:
      "reviews2"`, one line per finding;
json, yaml: a list of {code, documentationUrl, level, message, origin, reference} (istioctl's
      keys, sorted as Go writes them) plus `field`, the path of the field the finding is about.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from meshpilot.analysis.messages import documentation_url
from meshpilot.config.diagnostics import Diagnostic, Severity

__all__ = [
    "LEVELS",
    "OUTPUTS",
    "counted",
    "level_name",
    "log_line",
    "render_findings",
    "summary",
]

OUTPUTS = ("log", "json", "yaml")

# istioctl's level names, lowest first (the thresholds compare by this order).
LEVELS = {Severity.INFO: "Info", Severity.WARNING: "Warning", Severity.ERROR: "Error"}


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


def level_name(severity: Severity) -> str:
    return LEVELS[severity]


def render_findings(diagnostics: Sequence[Diagnostic], output: str) -> str:
    """The findings in the chosen output; "" for the log output with nothing found."""
    # istioctl's order: errors first, then warnings, then info; within a level by file and line.
    ordered = sorted(diagnostics, key=lambda d: (-_RANK[d.severity], d.sort_key()))
    if output == "log":
        return "\n".join(log_line(diag) for diag in ordered)
    rows = [_row(diag) for diag in ordered]
    if output == "yaml":
        return yaml.safe_dump(rows, sort_keys=True, default_flow_style=False, width=100).rstrip()
    return json.dumps(rows, indent=2, sort_keys=True)


def _origin(diag: Diagnostic) -> str:
    """istioctl's friendly name of the resource: `Kind namespace/name` (`Kind name` when
    cluster-scoped); "" for a finding about no object."""
    if not diag.kind:
        return ""
    if diag.namespace:
        return f"{diag.kind} {diag.namespace}/{diag.name}"
    return f"{diag.kind} {diag.name}" if diag.name else diag.kind


def _reference(diag: Diagnostic) -> str:
    return f"{diag.file}:{diag.line}" if diag.file else ""


def log_line(diag: Diagnostic) -> str:
    where = " ".join(part for part in (_origin(diag), _reference(diag)) if part)
    origin = f" ({where})" if where else ""
    return f"{level_name(diag.severity)} [{diag.code}]{origin} {diag.message}"


def _row(diag: Diagnostic) -> dict[str, Any]:
    row = {
        "code": diag.code,
        "documentationUrl": documentation_url(diag.code),
        "level": level_name(diag.severity),
        "message": diag.message,
        "field": diag.field,
    }
    if _origin(diag):
        row["origin"] = _origin(diag)
    if _reference(diag):
        row["reference"] = _reference(diag)
    return row


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

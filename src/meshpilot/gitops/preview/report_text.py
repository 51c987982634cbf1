"""The preview as plain text for a terminal, and as JSON for scripts."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from meshpilot.gitops.preview.model import AppPreview, Change, PreviewReport, ProxyDiff

__all__ = ["render_json", "render_text"]


def _app(app: AppPreview) -> list[str]:
    counts = ", ".join(f"{app.count(c)} {c}" for c in Change)
    lines = [f"== {app.app}: {counts}", f"   affected: it {app.reason}"]
    if app.error:
        lines.append(f"   ERROR: render failed: {app.error}")
    lines += [f"   {f}" for f in app.findings]
    for res in app.resources:
        lines += ["", f"--- {res.key} ({res.change})", res.diff.rstrip()]
    return [*lines, ""]


def _proxy(diff: ProxyDiff) -> list[str]:
    more = f" (+{len(diff.proxies) - 1} like it)" if len(diff.proxies) > 1 else ""
    lines = [f"proxy {diff.proxy_type} {diff.proxies[0]}{more}:"]
    for change in diff.changes:
        lines.append(f"  {change.type} {change.name} {change.change}")
        lines += [f"    {detail}" for detail in change.details]
    return lines


def render_text(report: PreviewReport) -> str:
    lines = [
        f"preview {report.repo}: {report.base} ({report.merge_base[:7]}) <- "
        f"{report.head} ({report.head_commit[:7]}), {len(report.changed_files)} files changed"
    ]
    if report.failed:
        lines.append("FAILED: the head revision does not render or fails the mesh's checks")
    if not report.apps:
        lines.append(f"no application reads the changed files. {report.no_app_hint}")
    lines.append("")
    for app in report.apps:
        lines += _app(app)
    if report.apps:
        lines.append(
            f"== proxies: {report.changed_proxies} change, {report.unchanged_proxies} unchanged"
        )
    for diff in report.proxies:
        lines += _proxy(diff)
    return "\n".join(lines).rstrip() + "\n"


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def render_json(report: PreviewReport) -> str:
    data = _plain(report)
    data["failed"] = report.failed
    data["changed_proxies"] = report.changed_proxies
    data["no_app_hint"] = report.no_app_hint
    for app, raw in zip(report.apps, data["apps"], strict=True):
        raw["counts"] = {str(c): app.count(c) for c in Change}
    return json.dumps(data, indent=2, sort_keys=True, default=str)

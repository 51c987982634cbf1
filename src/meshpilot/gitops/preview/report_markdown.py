"""The preview as a GitHub-flavoured Markdown PR comment: a loud block for errors at head, a
summary table per app, a collapsible `<details>` per app with ```diff blocks, and one for the
Envoy changes per proxy class. Kept under GitHub's 65536-character comment limit."""

from __future__ import annotations

from meshpilot.gitops.preview.model import AppPreview, Change, Finding, PreviewReport, ProxyDiff

__all__ = ["render_markdown"]

_LIMIT = 60_000  # GitHub refuses comments over 65536 characters
_DIFF_LIMIT = 12_000  # per resource diff
_SIGN = {Change.ADDED: "+", Change.REMOVED: "-", Change.CHANGED: "~"}


def _fence(text: str, lang: str = "") -> str:
    ticks = "````" if "```" in text else "```"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def _counts(app: AppPreview) -> str:
    return " ".join(f"{_SIGN[c]}{app.count(c)}" for c in Change)


def _status(app: AppPreview) -> str:
    if app.error:
        return "❌ render failed"
    if app.errors:
        return f"❌ {len(app.errors)} error(s)"
    return "✅" if app.resources else "no change"


def _finding_text(finding: Finding) -> str:
    """The finding without its `file:line` (shown apart, as code)."""
    return str(finding).split(": ", 1)[1]


def _errors(report: PreviewReport) -> list[str]:
    lines = []
    for app in report.apps:
        if app.error:
            lines.append(f"> - **{app.app}**: render failed: {app.error}")
        lines += [f"> - **{app.app}** `{f.file}:{f.line}`: {_finding_text(f)}" for f in app.errors]
    if not lines:
        return []
    loud = "> **This change fails the mesh's checks: syncing it will fail.**"
    return ["> [!CAUTION]", loud, *lines, ""]


def _app(app: AppPreview) -> list[str]:
    summary = f"<b>{app.app}</b>: {_counts(app)}"
    lines = ["<details>", f"<summary>{summary}</summary>", "", f"Affected: it {app.reason}."]
    if app.error:
        lines += ["", f"**Render failed:** {app.error}"]
    if app.findings:
        lines += ["", "**Findings at head**", ""]
        lines += [f"- `{f.file}:{f.line}` {_finding_text(f)}" for f in app.findings]
    for res in app.resources:
        diff = res.diff if len(res.diff) <= _DIFF_LIMIT else res.diff[:_DIFF_LIMIT] + "\n…"
        lines += ["", f"`{res.key}` {res.change}", "", _fence(diff, "diff")]
    return [*lines, "", "</details>", ""]


def _proxy(diff: ProxyDiff) -> list[str]:
    more = f" (+{len(diff.proxies) - 1} more like it)" if len(diff.proxies) > 1 else ""
    lines = [f"- {diff.proxy_type} `{diff.proxies[0]}`{more}"]
    for change in diff.changes:
        lines.append(f"  - {change.type} `{change.name}` {change.change}")
        lines += [f"    - {detail}" for detail in change.details]
    return lines


def _envoy(report: PreviewReport) -> list[str]:
    summary = (
        f"<b>Envoy configuration</b>: {report.changed_proxies} proxies change, "
        f"{report.unchanged_proxies} unchanged"
    )
    lines = ["<details open>", f"<summary>{summary}</summary>", ""]
    for diff in report.proxies:
        lines += _proxy(diff)
    return [*lines, "", "</details>", ""]


def render_markdown(report: PreviewReport) -> str:
    head = f"{report.head} ({report.head_commit[:7]})"
    lines = [f"### meshpilot preview: `{report.base}` ← `{head}`", ""]
    lines += _errors(report)
    if not report.apps:
        lines += [
            f"No application reads the {len(report.changed_files)} changed file(s). "
            + report.no_app_hint
        ]
        return "\n".join(lines) + "\n"
    lines += ["| App | Resources (+ - ~) | Findings | Status |", "|---|---|---|---|"]
    for app in report.apps:
        lines.append(f"| {app.app} | {_counts(app)} | {len(app.findings)} | {_status(app)} |")
    lines += ["", f"**Proxies:** {report.changed_proxies} change, "
              f"{report.unchanged_proxies} unchanged.", ""]  # fmt: skip
    for app in report.apps:
        lines += _app(app)
    if report.proxies:
        lines += _envoy(report)
    text = "\n".join(lines)
    if len(text) > _LIMIT:
        text = text[:_LIMIT] + "\n\n… (truncated; run `meshpilot gitops preview -o text` for all)\n"
    return text

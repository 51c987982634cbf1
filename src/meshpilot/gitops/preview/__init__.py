"""`gitops preview`: what a Git change does, before it is merged, to every affected app's
manifests and to every proxy's Envoy configuration; Markdown ready for a PR comment."""

from __future__ import annotations

from meshpilot.gitops.preview.engine import PreviewDeps, PreviewRequest, run_preview
from meshpilot.gitops.preview.model import (
    AppPreview,
    Change,
    Finding,
    PreviewReport,
    ProxyDiff,
    ResourceChange,
    XdsChange,
)
from meshpilot.gitops.preview.report_markdown import render_markdown
from meshpilot.gitops.preview.report_text import render_json, render_text

__all__ = [
    "AppPreview",
    "Change",
    "Finding",
    "PreviewDeps",
    "PreviewReport",
    "PreviewRequest",
    "ProxyDiff",
    "ResourceChange",
    "XdsChange",
    "render_json",
    "render_markdown",
    "render_text",
    "run_preview",
]

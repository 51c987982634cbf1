"""One application's preview of a branch: what `meshpilot gitops preview --base <the app's
targetRevision> --head BRANCH --app NS/NAME` prints (the rendered manifest diff and each
affected proxy's Envoy configuration diff, with the mesh's findings), run with the
server's renderer (its repo credentials and SOPS keys) against the live store."""

from __future__ import annotations

import asyncio
import re

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.controller.loop import Controller
from meshpilot.gitops.preview import PreviewDeps, PreviewRequest, render_text, run_preview
from meshpilot.ui.views import AppRow

__all__ = ["PreviewResult", "preview_branch"]

# What a branch name may look like here (git's own rules are looser; this keeps option-like
# or odd input from ever reaching git).
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@{}^~-]{0,199}")


class PreviewResult:
    __slots__ = ("error", "failed", "text")

    def __init__(self, text: str = "", error: str = "", failed: bool = False) -> None:
        self.text = text
        self.error = error
        self.failed = failed


async def preview_branch(controller: Controller, app: AppRow, head: str) -> PreviewResult:
    if not _REVISION.fullmatch(head) or ".." in head:
        return PreviewResult(error=f"head {head[:80]!r}: not a branch, tag or commit name")
    request = PreviewRequest(app.repo, app.revision, head, (f"{app.namespace}/{app.name}",))
    deps = PreviewDeps(controller.renderer, controller.store.snapshot())
    try:
        report = await asyncio.to_thread(run_preview, request, deps)
    except MeshpilotError as exc:  # a revision that does not resolve, the repo unreachable
        return PreviewResult(error=str(exc))
    return PreviewResult(render_text(report), failed=report.failed)

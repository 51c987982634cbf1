"""The analyzer's findings about objects about to be written into a store (`meshpilot apply`):
the checks of `meshpilot analyze`, run on the store's content with the new objects in place of
the ones they replace, keeping the warnings and errors said about the new objects (Info
findings, such as a namespace without injection, are advice for `analyze`, not warnings)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import build_push_context
from meshpilot.store.base import StoreSnapshot

__all__ = ["findings_for_write"]


def findings_for_write(
    snapshot: StoreSnapshot, objects: Sequence[ConfigObject[Any]], mesh: MeshConfig | None = None
) -> list[Diagnostic]:
    """Findings about `objects` once written over `snapshot` (the mesh settings: `mesh` when
    the write carries them, else the store's); they point at the objects' own files."""
    merged = dict(snapshot.objects)
    merged.update((obj.key, obj) for obj in objects)
    push = build_push_context(list(merged.values()), mesh or snapshot.mesh)
    written = {(str(obj.key.kind), obj.namespace, obj.name) for obj in objects}
    return [
        d
        for d in analyze(push)
        if (d.kind, d.namespace, d.name) in written and d.severity is not Severity.INFO
    ]

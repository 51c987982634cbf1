"""The mesh effect of the whole change: every affected app's rendered objects overlaid on
the live store at the merge base and at head (what the store holds once every app has
synced), every proxy class translated on both sides and diffed.

It is computed once for the change, not once per app: apps of one change often depend on
each other (a VirtualService in one routes to a subset another app's DestinationRule adds),
and translating each proxy class twice in total keeps a 100-app change fast. Each app's
validation and analyzer findings are read off the head mesh and attached to that app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import LoadResult
from meshpilot.gitops.preview.app import AppRender
from meshpilot.gitops.preview.mesh import (
    LiveMesh,
    analyze_side,
    build_side,
    mesh_findings,
    same_mesh_objects,
)
from meshpilot.gitops.preview.model import AppPreview, Finding, ProxyDiff
from meshpilot.gitops.preview.proxies import proxy_classes, translate_class
from meshpilot.gitops.preview.xds_diff import diff_translations
from meshpilot.model.push_context import PushContext
from meshpilot.model.relevance import ALL_TYPES, affected_types

__all__ = ["MeshEffect", "mesh_effect"]


@dataclass(frozen=True, slots=True)
class MeshEffect:
    apps: tuple[AppPreview, ...]  # with their findings at head
    proxies: tuple[ProxyDiff, ...]
    unchanged_proxies: int


def _merged(loads: Sequence[LoadResult]) -> LoadResult:
    out = LoadResult()
    for loaded in loads:
        out.objects += loaded.objects
        out.diagnostics += loaded.diagnostics
        if loaded.mesh_origin is not None and out.mesh_origin is None:
            out.mesh, out.mesh_origin = loaded.mesh, loaded.mesh_origin
    return out


def mesh_effect(live: LiveMesh, renders: Sequence[AppRender]) -> MeshEffect:
    base = _merged([r.base for r in renders])
    head = _merged([r.head for r in renders])
    removed = {o.key for o in base.objects}
    head_side = build_side(live, removed, head)
    analyzed = analyze_side(head_side)
    apps = []
    for render in renders:
        findings = tuple(_finding(d) for d in mesh_findings(render.head, analyzed))
        apps.append(replace(render.preview, findings=findings))
    if same_mesh_objects(base, head):
        count = sum(len(c.pods) for c in proxy_classes(head_side.push).values())
        return MeshEffect(tuple(apps), (), count)
    base_side = build_side(live, removed, base)
    diffs, unchanged = _proxy_diffs(base_side.push, head_side.push, _changed(base, head))
    return MeshEffect(tuple(apps), diffs, unchanged)


def _changed(base: LoadResult, head: LoadResult) -> list[ConfigKey]:
    """Keys whose object differs; none (meaning "everything") when the mesh config does."""
    if base.mesh != head.mesh:
        return []
    before = {o.key: o.model for o in base.objects}
    after = {o.key: o.model for o in head.objects}
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _proxy_diffs(
    base: PushContext, head: PushContext, changed: list[ConfigKey]
) -> tuple[tuple[ProxyDiff, ...], int]:
    before, after = proxy_classes(base), proxy_classes(head)
    diffs, unchanged = [], 0
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        klass = new or old
        assert klass is not None
        # a proxy that appears or goes away changes whole; else only what the change can touch
        types = (
            affected_types(klass.proxy_type, changed, base.by_key, head.by_key)
            if old is not None and new is not None
            else ALL_TYPES
        )
        changes = diff_translations(
            translate_class(base, old, types) if old is not None and types else None,
            translate_class(head, new, types) if new is not None and types else None,
        )
        if changes:
            diffs.append(ProxyDiff(str(klass.proxy_type), klass.names, changes))
        else:
            unchanged += len(klass.pods)
    return tuple(diffs), unchanged


def _finding(d: Diagnostic) -> Finding:
    return Finding(
        file=d.file,
        line=d.line,
        message=d.message,
        object=d.object_ref,
        field=d.field,
        severity=str(d.severity),
        code=d.code,
    )

"""The mesh analyzers' findings for the controller, from the store's typed objects.

`health.analyze_manifests` starts from plain manifests: it loads and validates every one
again before building a PushContext. The store already holds those objects validated and
typed, so here the PushContext is built from them directly, and incrementally: only the
indexes whose kinds changed since the previous build are rebuilt (Istio's updateContext).
Invalid objects never reach the store, so the loader's errors cannot occur; its warnings
do not affect health (only errors make a resource Degraded) and are left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.gitops.diff.keys import ResourceKey, group_of
from meshpilot.gitops.health import MeshFindings
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.store.base import StoreSnapshot

__all__ = ["NOT_MESH", "Findings", "MeshAnalysis", "mesh_objects"]

# Our own kinds (and the mesh settings, passed apart): never analyzed as mesh objects.
NOT_MESH = frozenset({Kind.APPLICATION, Kind.APP_PROJECT, Kind.MESH_CONFIG})

Objects = Mapping[ConfigKey, ConfigObject[Any]]


def mesh_objects(snapshot: StoreSnapshot) -> dict[ConfigKey, ConfigObject[Any]]:
    return {k: o for k, o in snapshot.objects.items() if k.kind not in NOT_MESH}


@dataclass(frozen=True, slots=True)
class Findings:
    """One analysis: by resource (what health reads) and by store key (what an app's
    reconcile compares to know whether its resources' findings changed)."""

    by_resource: MeshFindings
    by_key: Mapping[ConfigKey, tuple[Diagnostic, ...]]

    def of(self, keys: Iterable[ConfigKey]) -> tuple[tuple[Diagnostic, ...], ...]:
        return tuple(self.by_key.get(k, ()) for k in keys)


class MeshAnalysis:
    """Findings of one set of mesh objects, built from the previous set's PushContext.
    Not thread-safe: the caller serializes `analyze` (the view holds a lock)."""

    def __init__(self) -> None:
        self._objects: Objects = {}
        self._push: PushContext | None = None

    def analyze(
        self,
        snapshot: StoreSnapshot,
        objects: Objects,
        api_version: Callable[[ConfigKey], str],
    ) -> Findings:
        """`api_version(key)` gives a stored object's apiVersion (the findings are keyed by
        group as well, like the comparison's resources)."""
        changed = _changed(self._objects, objects)
        prev = self._push
        push = build_push_context(
            list(objects.values()), snapshot.mesh, prev=prev, changed=changed if prev else None
        )
        self._objects, self._push = objects, push
        found: dict[ConfigKey, list[Diagnostic]] = defaultdict(list)
        for diagnostic in [*_about(snapshot.diagnostics, objects), *analyze(push)]:
            key = _config_key(diagnostic)
            if key is not None and key in objects and diagnostic not in found[key]:
                found[key].append(diagnostic)
        by_key = {key: tuple(diags) for key, diags in found.items()}
        by_resource = {
            ResourceKey(group_of(api_version(k)), k.kind, k.namespace, k.name): diags
            for k, diags in by_key.items()
        }
        return Findings(by_resource, by_key)


def _changed(old: Objects, new: Objects) -> set[ConfigKey]:
    """Keys added, removed or replaced (the store replaces an object it reads again)."""
    out = {k for k, o in new.items() if old.get(k) is not o}
    out.update(k for k in old if k not in new)
    return out


def _about(diagnostics: tuple[Diagnostic, ...], objects: Objects) -> list[Diagnostic]:
    """The store's own diagnostics of the latest read that name a mesh object."""
    return [d for d in diagnostics if (k := _config_key(d)) is not None and k in objects]


def _config_key(diagnostic: Diagnostic) -> ConfigKey | None:
    try:
        kind = Kind(diagnostic.kind)
    except ValueError:
        return None
    return ConfigKey(kind, diagnostic.namespace, diagnostic.name)

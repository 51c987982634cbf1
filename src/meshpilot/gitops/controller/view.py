"""A read-mostly view of the live store for reconciles: stored manifests copied once per
object version (not once per app per reconcile), an index of objects by the app their
tracking annotation names (kept up to date from the store's change events), and the mesh
analyzers' findings computed once per version of the mesh objects for all apps.

Manifests returned by `manifest` are shared between reconciles: read them, never change them
(refresh and compare copy what they normalize).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION
from meshpilot.gitops.health import MeshFindings, analyze_manifests
from meshpilot.store.base import ChangeEvent, ChangeHandler, StoreSnapshot
from meshpilot.store.writes import ApplyResult, DeleteResult, LiveStore

__all__ = ["StoreView"]

# Our own kinds: their writes (status above all) never change what the mesh thinks.
_NOT_MESH = frozenset({Kind.APPLICATION, Kind.APP_PROJECT})


class StoreView:
    """A LiveStore over another one (writes pass through)."""

    def __init__(self, store: LiveStore) -> None:
        self.store = store
        self._copies: dict[ConfigKey, tuple[ConfigObject[Any], dict[str, Any]]] = {}
        self._findings: tuple[dict[ConfigKey, ConfigObject[Any]], MeshFindings] | None = None
        self._lock = threading.Lock()
        # tracking index: key → (object it was read from, owning app's tracking name)
        self._owner: dict[ConfigKey, tuple[ConfigObject[Any], str]] | None = None
        self._by_app: dict[str, set[ConfigKey]] = {}
        self._dirty: set[ConfigKey] = set()
        store.subscribe(self._on_change)

    def snapshot(self) -> StoreSnapshot:
        return self.store.snapshot()

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self.store.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self.store.subscribe(handler)

    def manifest(self, key: ConfigKey) -> dict[str, Any] | None:
        obj = self.store.snapshot().objects.get(key)
        if obj is None:
            return self.store.manifest(key)
        with self._lock:
            hit = self._copies.get(key)
        if hit is not None and hit[0] is obj:
            return hit[1]
        manifest = self.store.manifest(key)
        if manifest is not None:
            with self._lock:
                self._copies[key] = (obj, manifest)
        return manifest

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False
    ) -> list[ApplyResult]:
        return self.store.apply(documents, dry_run=dry_run)

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]:
        return self.store.delete(keys, dry_run=dry_run)

    # -- tracking index --------------------------------------------------------------------

    def tracked_keys(self, tracking: str) -> set[ConfigKey]:
        """Keys of the objects whose tracking annotation names the app `tracking` (the
        store's objects now; built once, then only changed keys are read again)."""
        objects = self.store.snapshot().objects
        with self._lock:
            if self._owner is None:
                self._owner, self._by_app, self._dirty = {}, {}, set(objects)
            dirty, self._dirty = self._dirty, set()
            index = self._owner
        for key in dirty:
            self._reindex(key, objects.get(key))
        with self._lock:
            keys = set(self._by_app.get(tracking, ()))
        # an object replaced since its event (or before the index saw it) is read again
        stale = [k for k in keys if (o := index.get(k)) is None or objects.get(k) is not o[0]]
        for key in stale:
            self._reindex(key, objects.get(key))
        if stale:
            with self._lock:
                keys = set(self._by_app.get(tracking, ()))
        return keys

    def _reindex(self, key: ConfigKey, obj: ConfigObject[Any] | None) -> None:
        owner = ""
        if obj is not None:
            manifest = self.manifest(key) or {}
            annotations = (manifest.get("metadata") or {}).get("annotations") or {}
            owner = str(annotations.get(TRACKING_ANNOTATION) or "").partition(":")[0]
        with self._lock:
            assert self._owner is not None
            old = self._owner.pop(key, None)
            if old is not None and old[1]:
                self._by_app.get(old[1], set()).discard(key)
            if obj is not None:
                self._owner[key] = (obj, owner)
                if owner:
                    self._by_app.setdefault(owner, set()).add(key)

    def _on_change(self, event: ChangeEvent) -> None:
        with self._lock:
            if self._owner is not None:
                self._dirty.update(event.keys)

    # -- mesh findings ---------------------------------------------------------------------

    def mesh_findings(self) -> MeshFindings:
        """Validation and analyzer findings of the whole store's mesh objects; computed
        again only when a mesh object changed (not on an Application's status write)."""
        snapshot = self.store.snapshot()
        mesh = {k: o for k, o in snapshot.objects.items() if k.kind not in _NOT_MESH}
        with self._lock:
            cached = self._findings
        if cached is not None and _same(cached[0], mesh):
            return cached[1]
        manifests = [m for k in sorted(mesh) if (m := self.manifest(k)) is not None]
        findings = analyze_manifests(manifests)
        with self._lock:
            self._findings = (mesh, findings)
        return findings

    def forget(self, keys: frozenset[ConfigKey]) -> None:
        """Drop copies of removed objects (changed ones are replaced on their next read)."""
        with self._lock:
            for key in keys:
                self._copies.pop(key, None)
            if self._owner is not None:
                self._dirty.update(keys)


def _same(a: dict[ConfigKey, ConfigObject[Any]], b: dict[ConfigKey, ConfigObject[Any]]) -> bool:
    """The same objects (by identity: the store replaces an object it re-reads)."""
    return len(a) == len(b) and all(b.get(k) is o for k, o in a.items())

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
from meshpilot.gitops.controller.findings import Findings, MeshAnalysis, mesh_objects
from meshpilot.gitops.diff.tracking import TRACKING_ANNOTATION
from meshpilot.gitops.health import MeshFindings
from meshpilot.gitops.model import AppProject
from meshpilot.store.base import ChangeEvent, ChangeHandler, LiveStore, StoreSnapshot
from meshpilot.store.writes import ApplyResult, DeleteResult

__all__ = ["StoreView"]

# Our own kinds: their writes (status above all) never change what the mesh thinks.
_GITOPS = frozenset({Kind.APPLICATION, Kind.APP_PROJECT})


class StoreView:
    """A LiveStore over another one (writes pass through)."""

    def __init__(self, store: LiveStore) -> None:
        self.store = store
        self._copies: dict[ConfigKey, tuple[ConfigObject[Any], dict[str, Any]]] = {}
        # findings and the count of mesh changes they saw (events say what changed)
        self._findings: tuple[int, Findings] | None = None
        self._mesh_changes = 0
        self._lock = threading.Lock()
        self._analysis = MeshAnalysis()
        self._projects: list[AppProject] | None = None
        self._project_changes = 0
        self._analysis_lock = threading.Lock()
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
        shared = getattr(self.store, "shared_manifest", None)
        if shared is not None:  # the store's own manifest (a write replaces, never changes it)
            manifest: dict[str, Any] | None = shared(key)
        else:
            manifest = self.store.manifest(key)
        if manifest is not None:
            with self._lock:
                self._copies[key] = (obj, manifest)
        return manifest

    def projects(self) -> list[AppProject]:
        """The stored AppProjects, found by a walk of the store only after one changed."""
        with self._lock:
            cached, generation = self._projects, self._project_changes
        if cached is not None:
            return cached
        snapshot = self.store.snapshot()
        found = [o.model for o in snapshot.of_kind(Kind.APP_PROJECT)]
        projects = [p for p in found if isinstance(p, AppProject)]
        with self._lock:
            if generation == self._project_changes:  # no project event meanwhile
                self._projects = projects
        return projects

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        return self.store.apply(documents, dry_run=dry_run, durable=durable)

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
            # the typed object's annotations: no copy of the manifest (an Application's,
            # status and all, changes with every status write)
            meta = getattr(obj.model, "metadata", None)
            annotations = getattr(meta, "annotations", None)
            if not isinstance(annotations, dict):
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
            if any(k.kind not in _GITOPS for k in event.keys):  # mesh settings count
                self._mesh_changes += 1
            if any(k.kind is Kind.APP_PROJECT for k in event.keys):
                self._projects, self._project_changes = None, self._project_changes + 1
            if self._owner is not None:
                self._dirty.update(event.keys)

    # -- mesh findings ---------------------------------------------------------------------

    def mesh_findings(self, *, wait: bool = True) -> MeshFindings:
        """Validation and analyzer findings of the whole store's mesh objects; computed
        again only after a mesh object changed (not on an Application's status write), and
        then from the store's typed objects with only the changed kinds re-indexed.
        `wait=False`: the last findings, even if a mesh object changed since (drift is
        reported without waiting for an analysis of the whole store)."""
        return self.findings(wait=wait).by_resource

    def findings(self, *, wait: bool = True) -> Findings:
        """mesh_findings, also by store key."""
        with self._lock:
            cached, generation = self._findings, self._mesh_changes
        if cached is not None and (cached[0] == generation or not wait):
            return cached[1]
        with self._analysis_lock:  # one analysis at a time; a second caller reuses it
            with self._lock:
                cached, generation = self._findings, self._mesh_changes
            if cached is not None and cached[0] == generation:
                return cached[1]
            snapshot = self.store.snapshot()
            findings = self._analysis.analyze(snapshot, mesh_objects(snapshot), self._api_version)
            with self._lock:
                self._findings = (generation, findings)
        return findings

    def findings_current(self) -> bool:
        with self._lock:
            return self._findings is not None and self._findings[0] == self._mesh_changes

    def _api_version(self, key: ConfigKey) -> str:
        return str((self.manifest(key) or {}).get("apiVersion") or "")

    def forget(self, keys: frozenset[ConfigKey]) -> None:
        """Drop copies of removed objects (changed ones are replaced on their next read)."""
        with self._lock:
            for key in keys:
                self._copies.pop(key, None)
            if self._owner is not None:
                self._dirty.update(keys)

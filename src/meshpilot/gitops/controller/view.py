"""A read-mostly view of the live store for reconciles: stored manifests copied once per
object version (not once per app per reconcile), and the mesh analyzers' findings computed
once per store version for all apps.

Manifests returned by `manifest` are shared between reconciles: read them, never change them
(refresh and compare copy what they normalize).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.health import MeshFindings, analyze_manifests
from meshpilot.store.base import ChangeHandler, StoreSnapshot
from meshpilot.store.writes import ApplyResult, DeleteResult, LiveStore

__all__ = ["StoreView"]


class StoreView:
    """A LiveStore over another one (writes pass through)."""

    def __init__(self, store: LiveStore) -> None:
        self.store = store
        self._copies: dict[ConfigKey, tuple[ConfigObject[Any], dict[str, Any]]] = {}
        self._findings: tuple[int, MeshFindings] | None = None
        self._lock = threading.Lock()

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

    def mesh_findings(self) -> MeshFindings:
        """Validation and analyzer findings of the whole store's mesh objects."""
        snapshot = self.store.snapshot()
        with self._lock:
            cached = self._findings
        if cached is not None and cached[0] == snapshot.version:
            return cached[1]
        manifests = [m for k in sorted(snapshot.objects) if (m := self.manifest(k)) is not None]
        findings = analyze_manifests(manifests)
        with self._lock:
            self._findings = (snapshot.version, findings)
        return findings

    def forget(self, keys: frozenset[ConfigKey]) -> None:
        """Drop copies of removed objects (changed ones are replaced on their next read)."""
        with self._lock:
            for key in keys:
                self._copies.pop(key, None)

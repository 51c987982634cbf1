"""What the control plane of one revision sees of a shared store (Istio's rule).

Istio config objects (networking, security, telemetry, extensions) labelled `istio.io/rev`
are seen only by that revision's control plane, or by the revision a tag of that name points
at; unlabelled ones by every revision. Kubernetes objects (Services, Pods, namespaces) are
seen by all. Mesh settings come from the revision's own ConfigMap `istio-<rev>` when it
exists, else from `istio`, never from another revision's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import ISTIO_API_GROUPS, Kind, api_group
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.base import ChangeEvent, ChangeHandler, StoreSnapshot, WatchedStore
from meshpilot.store.matching import mesh_of, mesh_source
from meshpilot.store.writes import ApplyResult, DeleteResult

__all__ = ["REV_LABEL", "RevisionView", "revision_filter"]

REV_LABEL = "istio.io/rev"
TAG_LABEL = "istio.io/tag"
_TAG_PREFIX = "istio-revision-tag-"


def _labels(obj: ConfigObject[Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = obj.model.metadata.labels
    return labels


def _tags_of(objects: Mapping[ConfigKey, ConfigObject[Any]], revision: str) -> set[str]:
    """The tags whose webhook configuration points at `revision`."""
    return {
        _labels(obj).get(TAG_LABEL, "")
        for key, obj in objects.items()
        if key.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION
        and key.name.startswith(_TAG_PREFIX)
        and _labels(obj).get(REV_LABEL) == revision
    } - {""}


def _mesh_maps(objects: Mapping[ConfigKey, ConfigObject[Any]]) -> dict[ConfigKey, str]:
    """Mesh settings ConfigMaps by key: `istio` ("") and `istio-<rev>` labelled <rev>."""
    out: dict[ConfigKey, str] = {}
    for key, obj in objects.items():
        if key.kind is not Kind.CONFIG_MAP:
            continue
        label = _labels(obj).get(REV_LABEL, "")
        if key.name == "istio":
            out[key] = ""
        elif label and key.name == f"istio-{label}":
            out[key] = label
    return out


def revision_filter(
    objects: Mapping[ConfigKey, ConfigObject[Any]], revision: str
) -> dict[ConfigKey, ConfigObject[Any]]:
    """The objects the control plane of `revision` sees."""
    rev = revision or "default"
    seen_as = {rev} | _tags_of(objects, rev)
    maps = _mesh_maps(objects)
    own = any(label == revision for label in maps.values()) and bool(revision)
    out: dict[ConfigKey, ConfigObject[Any]] = {}
    for key, obj in objects.items():
        if key in maps and maps[key] != (revision if own else ""):
            continue  # another revision's mesh settings (or the shared ones, overridden)
        if api_group(obj.model.api_version) in ISTIO_API_GROUPS:
            label = _labels(obj).get(REV_LABEL)
            if label is not None and label not in seen_as:
                continue
        out[key] = obj
    return out


class RevisionView:
    """A WatchedStore that shows one revision's view of another; writes go through."""

    def __init__(self, store: WatchedStore, revision: str) -> None:
        self.inner = store
        self.revision = revision
        self._cache: tuple[int, StoreSnapshot, StoreSnapshot] | None = None

    def snapshot(self) -> StoreSnapshot:
        full = self.inner.snapshot()
        if self._cache is not None and self._cache[1] is full:
            return self._cache[2]
        objects = revision_filter(full.objects, self.revision)
        raw = {k: m for k in objects if (m := self.inner.shared_manifest(k)) is not None}
        mesh = mesh_of(objects, raw) if any(mesh_source(k) for k in objects) else full.mesh
        view = dataclasses.replace(full, objects=objects, mesh=mesh)
        self._cache = (full.version, full, view)
        return view

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self.snapshot().objects.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self.inner.subscribe(handler)

    def manifest(self, key: ConfigKey) -> dict[str, Any] | None:
        return self.inner.manifest(key)

    def shared_manifest(self, key: ConfigKey) -> dict[str, Any] | None:
        return self.inner.shared_manifest(key)

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        return self.inner.apply(documents, dry_run=dry_run, durable=durable)

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]:
        return self.inner.delete(keys, dry_run=dry_run)

    def load(self) -> ChangeEvent | None:
        return self.inner.load()

    def refresh(self) -> ChangeEvent | None:
        return self.inner.refresh()

    async def watch(self) -> None:
        await self.inner.watch()

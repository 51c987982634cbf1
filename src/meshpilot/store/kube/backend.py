"""KubeStore: the live store on the Kubernetes API (`--store kube://[context]`).

Every kind is read by its own list, then followed by its own watch from the list's
resourceVersion (watch.py). Writes are server-side apply with the field manager
`meshpilot` (writes.py). The API server is the arbiter of each object; what reaches the
snapshot has passed the same loader as the other backends' objects, and one that does not
(written by kubectl against a CRD without a schema, say) is reported and skipped, its last
good version kept. The store version is this handle's count of the changes it took in
(resourceVersions are opaque strings, compared only for equality, as Kubernetes asks).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.fail_closed import kept_last_good, log_fail_closed
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot
from meshpilot.store.kube.client import KubeClient, api_error
from meshpilot.store.kube.codec import decode_items, item_key
from meshpilot.store.kube.kinds import API_RESOURCES, ApiResource
from meshpilot.store.kube.target import KubeTarget
from meshpilot.store.kube.watch import follow
from meshpilot.store.kube.writes import apply_documents, delete_keys
from meshpilot.store.matching import changed_keys, mesh_of, mesh_source
from meshpilot.store.writes import ApplyResult, DeleteResult

__all__ = ["KubeStore", "Listing"]

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
Listing = tuple[ApiResource, list[Manifest], str]  # a kind's items and the list's version


class KubeStore:
    """A WatchedStore on the Kubernetes API; handlers run in the thread that calls
    `refresh` or on the event loop of `watch`."""

    def __init__(self, target: KubeTarget, skip_kinds: Collection[Kind] = ()) -> None:
        self.target = target
        self.client = KubeClient(target)
        skip = frozenset(skip_kinds)
        self.resources = [r for k, r in API_RESOURCES.items() if k not in skip]
        self.versions: dict[Kind, str] = {}  # the resourceVersion each kind is taken in at
        self.absent: set[Kind] = set()  # kinds the server does not serve (no CRD)
        self._snapshot = StoreSnapshot(version=0)
        self._raw: dict[ConfigKey, Manifest] = {}
        self._unreadable: set[ConfigKey] = set()
        self._handlers: list[ChangeHandler] = []
        self.lock = threading.RLock()  # held while the snapshot changes
        self.loaded = False

    def __repr__(self) -> str:
        return f"KubeStore({self.target.display()} at {self.client.server})"

    # -- reading -------------------------------------------------------------------------

    def snapshot(self) -> StoreSnapshot:
        if not self.loaded:
            self.load()
        return self._snapshot

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self.snapshot().objects.get(key)

    def manifest(self, key: ConfigKey) -> Manifest | None:
        raw = self.shared_manifest(key)
        return copy.deepcopy(raw) if raw is not None else None

    def shared_manifest(self, key: ConfigKey) -> Manifest | None:
        if not self.loaded:
            self.load()
        return self._raw.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self._handlers.append(handler)

    def list_kind(self, resource: ApiResource) -> Listing | None:
        """One kind's items now; None when the server does not serve it (404)."""
        status, data = self.client.request("GET", resource.collection())
        if status == 404:
            return None
        if status != 200:
            raise api_error(status, data, f"list {resource.plural}")
        version = str((data.get("metadata") or {}).get("resourceVersion") or "")
        items = [i for i in data.get("items") or [] if isinstance(i, dict)]
        return resource, items, version

    def load(self) -> ChangeEvent | None:
        """List every kind now (the first read; `refresh`)."""
        listings = []
        for resource in self.resources:
            listing = self.list_kind(resource)
            if listing is None:
                if resource.kind not in self.absent:
                    log.info("%s: the server has no %s; not watched", self, resource.plural)
                self.absent.add(resource.kind)
                continue
            self.absent.discard(resource.kind)
            listings.append(listing)
        with self.lock:
            return self.take_listings(listings)

    def refresh(self) -> ChangeEvent | None:
        return self.load()

    async def watch(self) -> None:
        """Follow every kind's watch until cancelled (watch.py)."""
        await follow(self)

    # -- writing (writes.py) --------------------------------------------------------------

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        """Validate every document, have the server dry-run all of them, then apply each
        (server-side apply). Raises InvalidObjectsError or ConflictError before any write;
        the API has no transaction across objects, so a failure past the dry run (the server
        gone) can leave the first objects written."""
        return apply_documents(self, documents, dry_run=dry_run)

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]:
        return delete_keys(self, keys, dry_run=dry_run)

    # -- snapshots -----------------------------------------------------------------------

    def take_listings(self, listings: Sequence[Listing]) -> ChangeEvent | None:
        """Each listed kind as it is now (objects of it not listed are gone)."""
        listed = {resource.kind for resource, _, _ in listings}
        puts = [(resource, item) for resource, items, _ in listings for item in items]
        present = {item_key(r, i) for r, i in puts}
        gone = [k for k in self._snapshot.objects if k.kind in listed and k not in present]
        for resource, _, version in listings:
            self.versions[resource.kind] = version
        return self.take_in(puts, gone)

    def take_in(
        self,
        puts: Sequence[tuple[ApiResource, Manifest]],
        deleted: Iterable[ConfigKey],
        *,
        written_here: bool = False,
    ) -> ChangeEvent | None:
        """Publish `puts` and `deleted` over the current objects. Call with the lock held."""
        deleted = list(deleted)
        loaded = decode_items(puts)
        old = self._snapshot.objects
        objects, raw = dict(old), dict(self._raw)
        touched = {item_key(r, i) for r, i in puts}
        unreadable = self._unreadable - touched - set(deleted)
        for key in touched:
            if key in loaded.objects:
                objects[key], raw[key] = loaded.objects[key], loaded.raw[key]
                continue
            unreadable.add(key)
            kept = old.get(key)
            if key in loaded.fail_closed and (kept is None or kept.fail_closed):
                objects[key] = loaded.fail_closed[key]  # no last good version: deny
            elif kept is None:
                objects.pop(key, None)
                raw.pop(key, None)
            else:
                log.warning("%s: invalid object on the API server, the last good kept", key)
        for key in deleted:
            objects.pop(key, None)
            raw.pop(key, None)
        changed = changed_keys(old, objects, [*touched, *deleted])
        self._raw, self._unreadable = raw, unreadable
        here = frozenset(changed) if written_here else frozenset()
        return self._publish(objects, loaded.diagnostics, changed, here)

    def _publish(
        self,
        objects: dict[ConfigKey, ConfigObject[Any]],
        diagnostics: list[Diagnostic],
        changed: set[ConfigKey],
        written_here: frozenset[ConfigKey],
    ) -> ChangeEvent | None:
        mesh = self._snapshot.mesh
        if not self.loaded or any(mesh_source(key) for key in changed):
            mesh = mesh_of(objects, self._raw)  # only the istio ConfigMaps feed it
        if mesh != self._snapshot.mesh:
            changed.add(MESH_KEY)
        kept = [k for k, o in objects.items() if not o.fail_closed and k in self._unreadable]
        log_fail_closed(objects, self._snapshot.objects)
        diagnostics = list(kept_last_good(diagnostics, kept))
        for diag in diagnostics:
            log.warning("%s", diag)  # written behind the store's back: reported, skipped
        version = self._snapshot.version + (1 if changed or not self.loaded else 0)
        self._snapshot = StoreSnapshot(
            version=version, objects=objects, mesh=mesh, diagnostics=tuple(diagnostics)
        )
        self.loaded = True
        if not changed:
            return None
        event = ChangeEvent(frozenset(changed), version, False, written_here)
        for handler in self._handlers:
            handler(event)
        return event

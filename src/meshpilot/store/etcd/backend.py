"""EtcdStore: the live store on etcd (`--store etcd://host:port[,host:port]/prefix`).

One key per object under the prefix (codec.py). The store version is etcd's revision and
an object's resourceVersion its key's mod revision. A write reads the objects it replaces,
validates and prepares them as the directory store does (store/writes.py), and commits
them all in one transaction that compares every key's mod revision with the one read: a
concurrent edit makes it fail, and then the write is prepared again on what is stored now
(a write naming a resourceVersion is refused with a conflict instead): never a lost update,
and a GitOps sync wave lands whole, at one revision. Readers list the prefix once and then
follow etcd's watch from the next revision (watch.py).
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
from meshpilot.config.loader import load_documents
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.admission import refuse_unstorable
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot
from meshpilot.store.etcd.client import EtcdClient, KeyValue
from meshpilot.store.etcd.codec import decode_values, encode_value, etcd_key, key_of, read_value
from meshpilot.store.etcd.errors import EtcdError, NotLeaderError
from meshpilot.store.etcd.target import EtcdTarget
from meshpilot.store.etcd.watch import follow
from meshpilot.store.matching import changed_keys, matching_documents, mesh_of, mesh_source
from meshpilot.store.writes import (
    ApplyAction,
    ApplyResult,
    ConflictError,
    DeleteResult,
    prepare_manifest,
)

__all__ = ["EtcdStore"]

log = logging.getLogger(__name__)
Manifest = dict[str, Any]
# Writes without a resourceVersion prepared again after a concurrent edit, at most.
_ATTEMPTS = 100


class EtcdStore:
    """A WatchedStore on etcd; handlers run in the thread that calls `refresh` or on the
    event loop of `watch`."""

    def __init__(self, target: EtcdTarget, skip_kinds: Collection[Kind] = ()) -> None:
        self.target = target
        self.prefix = target.prefix
        self.client = EtcdClient(target)
        self._skip = frozenset(skip_kinds)
        self._snapshot = StoreSnapshot(version=0)
        self._raw: dict[ConfigKey, Manifest] = {}
        self._unreadable: set[ConfigKey] = set()
        self._handlers: list[ChangeHandler] = []
        self.lock = threading.RLock()  # held while the snapshot changes
        self.loaded = False
        # (leader key, term): every write then requires that this replica still leads
        # (store/etcd/lease.py); None: unfenced writes (the CLI, discovery, the API).
        self.fence: tuple[bytes, int] | None = None

    def __repr__(self) -> str:
        return f"EtcdStore({self.target.display()})"

    # -- reading -------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The etcd revision this handle has taken in everything up to."""
        return self._snapshot.version

    def snapshot(self) -> StoreSnapshot:
        self._ensure_loaded()
        return self._snapshot

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self.snapshot().objects.get(key)

    def manifest(self, key: ConfigKey) -> Manifest | None:
        raw = self.shared_manifest(key)
        return copy.deepcopy(raw) if raw is not None else None

    def shared_manifest(self, key: ConfigKey) -> Manifest | None:
        self._ensure_loaded()
        return self._raw.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self._handlers.append(handler)

    def load(self) -> ChangeEvent | None:
        """List the whole prefix now (the first read, and after a compaction)."""
        listing = self.client.list_prefix(self.prefix.encode())
        with self.lock:
            return self.take_in(listing.kvs, (), listing.revision, full=True)

    def refresh(self) -> ChangeEvent | None:
        """Take in what was written since the last look (by this or another process)."""
        return self.load()

    async def watch(self) -> None:
        """Follow etcd's watch of the prefix until cancelled (watch.py)."""
        await follow(self)

    def _ensure_loaded(self) -> None:
        if not self.loaded:
            self.load()

    # -- writing -------------------------------------------------------------------------

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        """Validate and write `documents` as whole objects in one transaction, all or
        nothing. Raises InvalidObjectsError or ConflictError; nothing is written then.
        `durable` is always so on etcd (a commit is on a quorum's disks)."""
        loaded = load_documents(documents)
        refuse_unstorable(loaded)
        by_key = {
            obj.key: doc
            for obj, doc in zip(loaded.objects, matching_documents(documents, loaded), strict=True)
        }
        keys = {etcd_key(self.prefix, key): key for key in by_key}
        for _ in range(_ATTEMPTS):
            stored = self.client.get_many(list(keys))
            current = {keys[kv.key]: kv for kv in stored.kvs}
            planned = []
            for key, doc in by_key.items():
                existing = self._stored_manifest(current.get(key))
                manifest, action = prepare_manifest(key, doc.data, existing, stored.revision + 1)
                planned.append((key, manifest, action))
            changes = [(k, m) for k, m, action in planned if action is not ApplyAction.UNCHANGED]
            if dry_run or not changes:
                return [_result(key, m, action) for key, m, action in planned]
            puts = [(etcd_key(self.prefix, k), encode_value(m)) for k, m in changes]
            expected = [(etcd_key(self.prefix, k), _mod(current.get(k))) for k, _ in changes]
            applied, revision = self.client.swap(expected, puts, fence=self.fence)
            if not applied:
                self._check_fence()
            if applied:
                for _, manifest, action in planned:
                    if action is not ApplyAction.UNCHANGED:
                        manifest["metadata"]["resourceVersion"] = str(revision)
                written = [KeyValue(k, v, revision) for k, v in puts]
                self._after_write(written, (), revision)
                return [_result(key, m, action) for key, m, action in planned]
        first = next(iter(by_key))
        raise ConflictError(first, f"other writers changed it {_ATTEMPTS} times in a row")

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]:
        """Remove objects in one transaction; a missing one is reported (deleted=False)."""
        wanted = {etcd_key(self.prefix, key): key for key in dict.fromkeys(keys)}
        for _ in range(_ATTEMPTS):
            stored = self.client.get_many(list(wanted))
            present = {wanted[kv.key]: kv for kv in stored.kvs}
            results = [DeleteResult(key, key in present) for key in wanted.values()]
            if dry_run or not present:
                return results
            expected = [(kv.key, kv.mod_revision) for kv in present.values()]
            deletes = [e for e, _ in expected]
            applied, revision = self.client.swap(expected, deletes=deletes, fence=self.fence)
            if not applied:
                self._check_fence()
            if applied:
                self._after_write((), present, revision)
                return results
        raise ConflictError(keys[0], f"other writers changed it {_ATTEMPTS} times in a row")

    def _check_fence(self) -> None:
        """NotLeaderError when the write failed on the fence (the leader key is gone or
        another's: its one put makes its mod revision the term), not on a conflict."""
        fence = self.fence
        if fence is None:
            return
        held = self.client.get_many([fence[0]]).kvs
        if not held or held[0].mod_revision != fence[1]:
            raise NotLeaderError(
                f"etcd {self.target.display()}: write refused: this replica no longer leads "
                f"({fence[0].decode(errors='replace')} was lost, term {fence[1]})"
            )

    def _stored_manifest(self, kv: KeyValue | None) -> Manifest | None:
        if kv is None:
            return None
        try:
            read = read_value(kv.value, kv.key.decode(errors="replace"))
        except Exception as exc:  # unreadable: refuse the write, do not overwrite it blind
            raise EtcdError(f"etcd key {kv.key!r}: cannot read the stored object: {exc}") from exc
        if len(read.documents) != 1 or not isinstance(read.documents[0].data, dict):
            raise EtcdError(f"etcd key {kv.key!r}: the stored value is not one object")
        data = dict(read.documents[0].data)
        data["metadata"] = {**(data.get("metadata") or {}), "resourceVersion": str(kv.mod_revision)}
        return data

    def _after_write(
        self, puts: Sequence[KeyValue], deleted: Iterable[ConfigKey], revision: int
    ) -> None:
        """Take in this handle's own write: directly when it is the next revision, by a
        listing when others wrote meanwhile; a handle that never read stays so."""
        with self.lock:
            if not self.loaded:
                return
            if revision == self.revision + 1:
                self.take_in(puts, tuple(deleted), revision, written_here=True)
                return
        self.refresh()

    # -- snapshots -----------------------------------------------------------------------

    def take_in(
        self,
        puts: Sequence[KeyValue],
        deleted: Sequence[ConfigKey],
        revision: int,
        *,
        full: bool = False,
        written_here: bool = False,
    ) -> ChangeEvent | None:
        """Publish the store at `revision`: `puts` and `deleted` over the current objects,
        or (`full`) `puts` as everything there is. Call with the lock held."""
        skip = self._skip
        puts = [
            kv for kv in puts if (k := key_of(self.prefix, kv.key)) is None or k.kind not in skip
        ]
        loaded = decode_values(self.prefix, ((kv.key, kv.value, kv.mod_revision) for kv in puts))
        old = self._snapshot.objects
        objects = {} if full else dict(old)
        raw = {} if full else self._raw
        touched = {k for kv in puts if (k := key_of(self.prefix, kv.key)) is not None}
        unreadable = set() if full else self._unreadable - touched - set(deleted)
        for key in touched:
            if key in loaded.objects:
                objects[key], raw[key] = loaded.objects[key], loaded.raw[key]
                continue
            unreadable.add(key)
            kept = old.get(key)
            if key in loaded.fail_closed and (kept is None or kept.fail_closed):
                objects[key] = loaded.fail_closed[key]  # no last good version: deny
            elif kept is not None:
                objects[key] = kept
                if key in self._raw:
                    raw[key] = self._raw[key]
                log.warning("%s: invalid object in etcd, the last good version is kept", key)
            else:
                objects.pop(key, None)
                raw.pop(key, None)
        for key in deleted:
            objects.pop(key, None)
            raw.pop(key, None)
        changed = changed_keys(old, objects, None if full else [*touched, *deleted])
        self._raw, self._unreadable = raw, unreadable
        here = frozenset(changed) if written_here else frozenset()
        return self._publish(objects, loaded.diagnostics, revision, changed, here)

    def _skipped(self, raw: bytes) -> bool:
        key = key_of(self.prefix, raw)
        return key is not None and key.kind in self._skip

    def _publish(
        self,
        objects: dict[ConfigKey, ConfigObject[Any]],
        diagnostics: list[Diagnostic],
        revision: int,
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
        self._snapshot = StoreSnapshot(
            version=revision, objects=objects, mesh=mesh, diagnostics=tuple(diagnostics)
        )
        self.loaded = True
        if not changed:
            return None
        event = ChangeEvent(frozenset(changed), revision, True, written_here)
        for handler in self._handlers:
            handler(event)
        return event


def _mod(kv: KeyValue | None) -> int:
    return kv.mod_revision if kv is not None else 0


def _result(key: ConfigKey, manifest: Manifest, action: ApplyAction) -> ApplyResult:
    return ApplyResult(key, action, str(manifest.get("metadata", {}).get("resourceVersion", "")))

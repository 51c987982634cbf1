"""DirectoryStore: the embedded live store; one YAML file per object, atomic writes, and a
journal other processes watch (`meshpilot discovery --store DIR` serves what `meshpilot
apply` and GitOps sync write).

    <root>/.meshpilot-store, .lock           marker and write lock (store/directory/store_dir.py)
    <root>/.intent                           the write in progress (store/directory/intent.py)
    <root>/.journal                          change feed (store/directory/journal.py)
    <root>/<Kind>/<namespace>/<name>.yaml    one object (cluster-scoped: <Kind>/_cluster/)

A write validates every object with the translation engine's loader first (an invalid
object refuses the whole write with the loader's Diagnostic: file, line, object, field),
checks resourceVersions, writes every changed file of the write to a temporary name and
fsyncs it, records the batch in the intent, renames them all over the old ones and fsyncs
each directory once (atomic.py), then appends one journal line per object, all with the
new store version, fsyncs the journal and clears the intent. A writer killed half-way is
finished or undone under the lock by whoever comes next (store/directory/recovery.py). The store
version is the journal's last version; an object's resourceVersion is the version that last
wrote it. Files and directories are private (0600/0700): the store holds Secrets. A handle
that is current takes the objects it replaces from memory, and takes in its own writes
without parsing the files back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.fail_closed import kept_last_good, log_fail_closed
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_documents
from meshpilot.config.objects import ConfigObject
from meshpilot.config.yaml_source import RawDocument
from meshpilot.store.admission import refuse_unstorable
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot
from meshpilot.store.directory.atomic import fsync_dirs, remove_files, rename_staged
from meshpilot.store.directory.intent import IntentFile
from meshpilot.store.directory.journal import Journal, JournalTail
from meshpilot.store.directory.object_files import LoadedFiles, load_object_files, store_files
from meshpilot.store.directory.recovery import recover, recover_abandoned, recover_on_open
from meshpilot.store.directory.store_dir import StoreError, object_path, open_store_dir, store_lock
from meshpilot.store.directory.yaml_files import YAMLInputError, dump_manifest, load_manifest
from meshpilot.store.inotify import Notifier
from meshpilot.store.matching import changed_keys, matching_documents, mesh_of, mesh_source
from meshpilot.store.writes import (
    ApplyAction,
    ApplyResult,
    DeleteResult,
    prepare_manifest,
)

__all__ = ["DirectoryStore", "StoreError"]

log = logging.getLogger(__name__)

# Journal bytes (~60 per line) up to which a watcher reads the new objects on its event loop:
# the hop to a thread to warm the page cache costs more than reading a few fresh files.
_READ_AHEAD_FROM = 1024
Manifest = dict[str, Any]


class DirectoryStore:
    """A writable ConfigStore in a directory. `refresh()` (or `watch()`) follows writes made
    by any process; handlers run in the thread that calls `refresh` (the watch loop)."""

    def __init__(
        self,
        root: str | Path,
        poll_interval: float = 0.05,
        create: bool = True,
        skip_kinds: Collection[Kind] = (),
    ) -> None:
        self.root = Path(root).expanduser()
        self.poll_interval = poll_interval
        # Kinds this reader never loads (discovery: the GitOps Applications, whose status
        # every resync rewrites; reading them cost it more CPU than serving the mesh).
        self._skip = frozenset(skip_kinds)
        self._skip_dirs = frozenset(str(kind) for kind in skip_kinds)
        store_format = open_store_dir(self.root, create)
        self.journal = Journal(self.root / ".journal")
        self._intent = IntentFile(self.root)
        recover_on_open(self.root, self._intent, self.journal, store_format)
        self._snapshot = StoreSnapshot(version=0)
        self._raw: dict[ConfigKey, Manifest] = {}
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._handlers: list[ChangeHandler] = []
        self._lock = threading.RLock()
        self._loaded = False
        # keys whose file failed to load: `_raw` keeps their last good version, not the file
        self._unreadable: set[ConfigKey] = set()
        # objects this handle wrote, by key: (version, manifest as written), used by the
        # next refresh instead of reading the file back when no later write replaced it
        self._own_writes: dict[ConfigKey, tuple[int, Manifest]] = {}
        self._own_deletes: dict[ConfigKey, int] = {}  # key -> version of our delete

    # -- reading -------------------------------------------------------------------------

    def __repr__(self) -> str:
        return str(self.root)

    def snapshot(self) -> StoreSnapshot:
        self._ensure_loaded()
        return self._snapshot

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self.snapshot().objects.get(key)

    def manifest(self, key: ConfigKey) -> Manifest | None:
        self._ensure_loaded()
        raw = self._raw.get(key)
        return copy.deepcopy(raw) if raw is not None else None

    def shared_manifest(self, key: ConfigKey) -> Manifest | None:
        """The stored manifest itself, not a copy: the caller must never change it (a later
        write replaces it, it is never changed in place). For readers that only look."""
        self._ensure_loaded()
        return self._raw.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self._handlers.append(handler)

    def load(self) -> ChangeEvent | None:
        """Read the whole store now (the first read; `refresh` follows the journal after)."""
        with self._lock:
            tail = self.journal.read_from(0, None)
            return self._commit_full(tail)

    def refresh(self) -> ChangeEvent | None:
        """Take in what was written since the last look (by this or another process)."""
        with self._lock:
            if not self._loaded:
                return self.load()
            tail = self.journal.read_from(self._offset, self._identity)
            if tail.restart:
                return self._commit_full(tail)
            if not tail.entries:
                self._offset = tail.offset
                return None
            return self._commit_entries(tail)

    async def watch(self) -> None:
        """Follow the journal until cancelled: inotify wakes this at once when a write
        lands (a GitOps sync should reach discovery at once, not half a poll interval
        later); one stat per `poll_interval` stays the ground truth."""
        with Notifier([str(self.journal.path)]) as notifier:
            while True:
                await notifier.wait(self.poll_interval, settle=False)
                if self._intent.pending():  # a writer at work, or one that died
                    await asyncio.to_thread(
                        recover_abandoned, self.root, self._intent, self.journal
                    )
                await self._follow()

    async def _follow(self) -> None:
        """Take in the journal's new entries, if any."""
        ident = self.journal.identity()
        if ident is not None and ident[:2] == self._identity:
            if ident[2] == self._offset:
                return
            if ident[2] - self._offset <= _READ_AHEAD_FROM:
                self.refresh()  # a few objects, just written: in the page cache already
                return
        await asyncio.to_thread(self._read_ahead)
        self.refresh()

    def _read_ahead(self) -> None:
        """Warm the page cache for the files the next refresh reads (off the event loop)."""
        tail = self.journal.read_from(self._offset, self._identity)
        for entry in tail.entries[:1000]:
            if entry.key is not None and entry.key.kind not in self._skip:
                with contextlib.suppress(OSError):
                    self._path(entry.key).read_bytes()

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    # -- writing -------------------------------------------------------------------------

    def apply(
        self, documents: Sequence[RawDocument], *, dry_run: bool = False, durable: bool = True
    ) -> list[ApplyResult]:
        """Validate and write `documents` as whole objects, all or nothing.

        Raises InvalidObjectsError (the loader's diagnostics) or ConflictError; nothing is
        written then. `dry_run` checks everything and reports what would happen.
        `durable=False` skips the fsyncs (readers still see whole files and whole journal
        lines): for GitOps status, which the controller recomputes after a crash; fsyncs
        hold the write lock, and a resync at a new commit writes every app's status, which
        a webhook's own sync would otherwise wait behind.
        """
        loaded = load_documents(documents)
        refuse_unstorable(loaded)
        by_key = {
            obj.key: doc
            for obj, doc in zip(loaded.objects, matching_documents(documents, loaded), strict=True)
        }
        with self._write_lock():
            version = self.journal.last_version() + 1
            known = self._known_raw(version - 1)
            planned: list[tuple[ConfigKey, Manifest, ApplyAction]] = []
            for key, doc in by_key.items():
                existing = known[key] if key in known else self._read_file(key)
                manifest, action = prepare_manifest(key, doc.data, existing, version)
                planned.append((key, manifest, action))
            results = [
                ApplyResult(key, action, str(m.get("metadata", {}).get("resourceVersion", "")))
                for key, m, action in planned
            ]
            changes = [(k, m) for k, m, action in planned if action is not ApplyAction.UNCHANGED]
            if dry_run or not changes:
                return results
            files = [(key, self._path(key), dump_manifest(m)) for key, m in changes]
            directories = rename_staged(self._intent.stage(version, files, durable))
            # what the files now hold (no need to parse them), known before the journal
            # names the version: a watching thread's refresh may read it at once
            for key, manifest in changes:
                self._own_writes[key] = (version, manifest)
            try:
                self.journal.append(version, [("put", key) for key, _ in changes], durable=False)
            except BaseException:
                for key, _ in changes:
                    self._own_writes.pop(key, None)
                raise
            if durable:  # after the line: watchers react while the renames reach the disk
                fsync_dirs(directories)
                self.journal.sync()
            self._intent.clear()
        self.refresh()
        return results

    def delete(self, keys: Sequence[ConfigKey], *, dry_run: bool = False) -> list[DeleteResult]:
        """Remove objects; a missing one is reported (deleted=False), not an error."""
        results: list[DeleteResult] = []
        with self._write_lock():
            present = [key for key in dict.fromkeys(keys) if self._path(key).exists()]
            results = [DeleteResult(key, key in present) for key in dict.fromkeys(keys)]
            if dry_run or not present:
                return results
            version = self.journal.last_version() + 1
            self._intent.ready(version, [], present)
            directories = remove_files([self._path(key) for key in present])
            self._own_deletes.update((key, version) for key in present)
            try:
                self.journal.append(version, [("del", key) for key in present], durable=False)
            except BaseException:
                for key in present:
                    self._own_deletes.pop(key, None)
                raise
            fsync_dirs(directories)
            self.journal.sync()
            self._intent.clear()
        self.refresh()
        return results

    # -- files ---------------------------------------------------------------------------

    def _path(self, key: ConfigKey) -> Path:
        return object_path(self.root, key)

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """The store's write lock, with any write a dead writer left finished or undone."""
        with store_lock(self.root):
            if self._intent.pending():
                recover(self.root, self._intent, self.journal)
            yield

    def _known_raw(self, stored_version: int) -> Mapping[ConfigKey, Manifest]:
        """The manifests as this handle last read them, when that is the store's current
        version (called under the write lock, so no writer can move it meanwhile); else
        nothing, and the files are read. Saves parsing every file a write replaces."""
        if not self._loaded or self._snapshot.version != stored_version:
            return {}
        if self._unreadable:
            return {k: v for k, v in self._raw.items() if k not in self._unreadable}
        return self._raw  # read by key only: a concurrent refresh may add keys

    def _read_file(self, key: ConfigKey) -> Manifest | None:
        try:
            path = self._path(key)
            data = load_manifest(path.read_text(encoding="utf-8"), str(path))
        except FileNotFoundError:
            return None
        except YAMLInputError as exc:
            raise StoreError(f"{exc}: cannot read the stored object") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"{self._path(key)}: cannot read the stored object: {exc}") from exc
        return data if isinstance(data, dict) else None

    def _load_files(
        self, keys: Sequence[ConfigKey] | None, known: Mapping[ConfigKey, Manifest] | None = None
    ) -> LoadedFiles:
        """Read the given keys' files (None: every file), through the loader; `known`
        manifests are what their files hold (this handle just wrote them)."""
        known = known or {}
        if keys is None:
            return load_object_files(store_files(self.root, self._skip_dirs))
        return load_object_files(
            RawDocument(str(self._path(k)), 1, known[k], {}) if k in known else self._path(k)
            for k in keys
        )

    # -- snapshots -----------------------------------------------------------------------

    def _commit_full(self, tail: JournalTail) -> ChangeEvent | None:
        loaded = self._load_files(None)
        version = tail.entries[-1].version if tail.entries else self.journal.last_version()
        old = self._snapshot
        for key, stand in loaded.fail_closed.items():  # a hand-edited security policy
            kept = old.objects.get(key)
            loaded.objects[key] = kept if kept is not None and not kept.fail_closed else stand
        changed = changed_keys(old.objects, loaded.objects)
        self._raw = loaded.raw
        self._unreadable = {k for k in loaded.fail_closed if not loaded.objects[k].fail_closed}
        self._own_writes.clear()
        self._own_deletes.clear()
        return self._publish(loaded.objects, loaded.diagnostics, version, changed, tail)

    def _commit_entries(self, tail: JournalTail) -> ChangeEvent | None:
        skip = self._skip
        latest = {e.key: e.version for e in tail.entries if e.key and e.key.kind not in skip}
        keys = sorted(latest)
        known = {}
        deleted_here = set()
        for key in keys:
            own = self._own_writes.pop(key, None)
            if own is not None and own[0] == latest[key]:
                known[key] = own[1]
            if self._own_deletes.pop(key, None) == latest[key]:
                deleted_here.add(key)
        loaded = self._load_files(keys, known)
        objects = dict(self._snapshot.objects)
        errors = {d.file: d for d in loaded.diagnostics if d.severity is Severity.ERROR}
        for key in keys:
            self._unreadable.discard(key)
            if key in loaded.objects:
                objects[key] = loaded.objects[key]
                self._raw[key] = loaded.raw[key]
            elif (problem := errors.get(str(self._path(key)))) is not None:
                self._unreadable.add(key)
                kept = objects.get(key)
                if key in loaded.fail_closed and (kept is None or kept.fail_closed):
                    objects[key] = loaded.fail_closed[key]  # no last good version: deny
                else:
                    log.warning("%s: invalid stored object, the last good version is kept: %s",
                                key, problem)  # fmt: skip
            else:
                objects.pop(key, None)
                self._raw.pop(key, None)
        changed = changed_keys(self._snapshot.objects, objects, keys)
        here = frozenset((known.keys() | deleted_here) & changed)
        version = tail.entries[-1].version
        return self._publish(objects, loaded.diagnostics, version, changed, tail, here)

    def _publish(
        self,
        objects: dict[ConfigKey, ConfigObject[Any]],
        diagnostics: list[Diagnostic],
        version: int,
        changed: set[ConfigKey],
        tail: JournalTail,
        written_here: frozenset[ConfigKey] = frozenset(),
    ) -> ChangeEvent | None:
        mesh = self._snapshot.mesh
        if not self._loaded or any(mesh_source(key) for key in changed):
            mesh = mesh_of(objects, self._raw)  # only the istio ConfigMaps feed it
        if mesh != self._snapshot.mesh:
            changed.add(MESH_KEY)
        kept = [k for k, o in objects.items() if not o.fail_closed and k in self._unreadable]
        log_fail_closed(objects, self._snapshot.objects)
        diagnostics = list(kept_last_good(diagnostics, kept))
        self._snapshot = StoreSnapshot(
            version=version, objects=objects, mesh=mesh, diagnostics=tuple(diagnostics)
        )
        self._offset, self._identity, self._loaded = tail.offset, tail.identity, True
        for diag in diagnostics:
            # warnings were shown to whoever wrote the object; errors mean a hand-edited file
            error = diag.severity is Severity.ERROR
            log.log(logging.WARNING if error else logging.DEBUG, "%s", diag)
        if not changed:
            return None
        event = ChangeEvent(frozenset(changed), version, True, written_here)
        for handler in self._handlers:
            handler(event)
        return event

"""FileStore: objects read from YAML files and directories, watched for changes.

The files are polled (mtime, size and inode of every YAML/JSON file, plus the directories
themselves so that added and removed files count) every `poll_interval` seconds; a change
that has settled re-reads everything off the event loop and reports the keys whose objects
changed. (Polling, not inotify: it works the same for directories, symlinked ConfigMap
volumes and network filesystems, needs no dependency, and costs a few stat calls.)

Invalid input never reaches the store: an object that fails validation keeps its last good
version, and so does every object of a file that is no longer readable YAML. The problems
are kept as diagnostics (and `error` when nothing could be read at all) for /debug/configz.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import CLUSTER_SCOPED, Kind
from meshpilot.config.loader import LoadResult, load_paths
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot

__all__ = ["FileStore", "fingerprint"]

log = logging.getLogger(__name__)

_SUFFIXES = (".yaml", ".yml", ".json")
Fingerprint = dict[str, tuple[int, int, int]]


def fingerprint(paths: Iterable[str | Path]) -> Fingerprint:
    """(mtime_ns, size, inode) of every input file and directory; missing paths are absent."""
    out: Fingerprint = {}
    for raw in paths:
        root = Path(raw)
        with contextlib.suppress(OSError):
            _note(out, root)
            if root.is_dir():
                for dirpath, dirnames, filenames in os.walk(root):
                    dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                    for name in dirnames:
                        _note(out, Path(dirpath) / name)
                    for name in filenames:
                        if name.endswith(_SUFFIXES) and not name.startswith("."):
                            _note(out, Path(dirpath) / name)
    return out


def _note(out: Fingerprint, path: Path) -> None:
    with contextlib.suppress(OSError):
        st = path.stat()
        out[str(path)] = (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True, slots=True)
class _Read:
    result: LoadResult | None
    error: str | None
    files: Fingerprint


class FileStore:
    """A ConfigStore over files given with `-f`; `watch()` keeps it current."""

    def __init__(self, paths: Sequence[str | Path], poll_interval: float = 0.2) -> None:
        self.paths = tuple(str(p) for p in paths)
        self.poll_interval = poll_interval
        self._snapshot = StoreSnapshot(version=0)
        self._mesh_file: str | None = None
        self._files: Fingerprint = {}
        self._handlers: list[ChangeHandler] = []

    def snapshot(self) -> StoreSnapshot:
        return self._snapshot

    def get(self, key: ConfigKey) -> ConfigObject[Any] | None:
        return self._snapshot.objects.get(key)

    def subscribe(self, handler: ChangeHandler) -> None:
        self._handlers.append(handler)

    def load(self) -> ChangeEvent | None:
        """Read the files now (blocking); raise MeshpilotError if the first read fails."""
        read = self._read()
        if read.result is None and self._snapshot.version == 0:
            raise MeshpilotError(read.error or "cannot read the input files")
        return self._apply(read)

    async def watch(self) -> None:
        """Poll until cancelled. A change is read (in a worker thread, applied here) once the
        files look the same on two polls in a row, so a file still being written is not
        read half-way."""
        seen: Fingerprint | None = None
        while True:
            await asyncio.sleep(self.poll_interval)
            current = fingerprint(self.paths)
            if current == self._files or current != seen:
                seen = current
                continue
            self._apply(await asyncio.to_thread(self._read))
            seen = None

    def _read(self) -> _Read:
        files = fingerprint(self.paths)
        try:
            return _Read(load_paths(self.paths), None, files)
        except MeshpilotError as exc:
            return _Read(None, str(exc), files)

    def _apply(self, read: _Read) -> ChangeEvent | None:
        self._files = read.files
        old = self._snapshot
        if read.result is None:
            log.error("config not reloaded, the last good version is kept: %s", read.error)
            self._snapshot = replace(old, error=read.error)
            return None
        objects, stale = _merge(old, read.result)
        mesh, mesh_file = read.result.mesh, _file_of(read.result)
        if _mesh_broken(read.result.diagnostics, self._mesh_file) and old.version:
            mesh, mesh_file = old.mesh, self._mesh_file
            stale |= {MESH_KEY}
        changed = _changed(old.objects, objects)
        if mesh != old.mesh:
            changed.add(MESH_KEY)
        version = old.version + 1 if changed or not old.version else old.version
        self._snapshot = StoreSnapshot(
            version=version,
            objects=objects,
            mesh=mesh,
            diagnostics=tuple(read.result.diagnostics),
            stale=frozenset(stale),
        )
        self._mesh_file = mesh_file
        for diag in read.result.errors:
            log.warning("%s", diag)
        if not changed:
            return None
        event = ChangeEvent(frozenset(changed), version)
        for handler in self._handlers:
            handler(event)
        return event


def _file_of(result: LoadResult) -> str | None:
    return result.mesh_origin.file if result.mesh_origin else None


def _merge(
    old: StoreSnapshot, result: LoadResult
) -> tuple[dict[ConfigKey, ConfigObject[Any]], set[ConfigKey]]:
    """The new objects, plus the last good version of every object whose new one is invalid
    or whose file cannot be read any more."""
    objects = {obj.key: obj for obj in result.objects}
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    broken_files = {d.file for d in errors if not d.kind}
    invalid = {key for d in errors if (key := _diag_key(d)) is not None}
    stale: set[ConfigKey] = set()
    for key, obj in old.objects.items():
        if key in objects:
            continue
        if key in invalid or obj.origin.file in broken_files:
            objects[key] = obj
            stale.add(key)
    return objects, stale


def _diag_key(diag: Diagnostic) -> ConfigKey | None:
    try:
        kind = Kind(diag.kind)
    except ValueError:
        return None
    namespace = "" if kind in CLUSTER_SCOPED else (diag.namespace or "default")
    return ConfigKey(kind, namespace, diag.name) if diag.name else None


def _mesh_broken(diagnostics: Iterable[Diagnostic], mesh_file: str | None) -> bool:
    for diag in diagnostics:
        if diag.severity is not Severity.ERROR:
            continue
        if diag.kind == "MeshConfig" or (mesh_file and diag.file == mesh_file and not diag.kind):
            return True
    return False


def _changed(
    old: Mapping[ConfigKey, ConfigObject[Any]], new: Mapping[ConfigKey, ConfigObject[Any]]
) -> set[ConfigKey]:
    changed = set(old.keys() ^ new.keys())
    changed.update(k for k in old.keys() & new.keys() if old[k].model != new[k].model)
    return changed

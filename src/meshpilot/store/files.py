"""FileStore: objects read from YAML files and directories, watched for changes.

The files are polled (mtime, size and inode of every YAML/JSON file, plus the directories
themselves so that added and removed files count) every `poll_interval` seconds. Polling is
the ground truth: it works the same for directories, symlinked ConfigMap volumes and network
filesystems and costs a few stat calls. On Linux, inotify (through libc, no dependency) wakes
the poll early, so an edit is seen in milliseconds instead of up to one interval. A change
that has settled (two looks in a row agree) is read off the event loop and the keys whose
objects changed are reported. Only files whose stamp changed are parsed again: every file's
parsed result is kept, and the files are merged in the order a full read takes them
(duplicates and a second mesh config are reported the same way), so one edited file in a
big mesh costs one file's parse, not the mesh's; when no whole-read rule is at stake, only
the files read again are merged and compared (store/file_edits.py: 2 ms instead of 8 from
an edit to its change event at 1000 services).

Invalid input never reaches the store: an object that fails validation keeps its last good
version, and so does every object of a file that is no longer readable YAML, or not
readable at all (not UTF-8, no permission, or anything the loader raises on). An invalid
security policy with no last good version is served as its fail-closed stand-in
(config/fail_closed.py), never dropped. The problems are kept as diagnostics, one per file
or object (and `error` when a -f path is missing), for /debug/configz; the other files keep
being served and watched.
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
from meshpilot.config.fail_closed import kept_last_good, log_fail_closed
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import LoadResult, load_paths
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.store.base import MESH_KEY, ChangeEvent, ChangeHandler, StoreSnapshot
from meshpilot.store.file_edits import Edited, diagnostic_key, edited_objects
from meshpilot.store.inotify import Notifier

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


def _ordered_files(paths: Iterable[str], files: Fingerprint) -> list[str]:
    """The input files in the order a full read takes them (each root's files sorted)."""
    out: list[str] = []
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            found = [Path(f) for f in files if f.endswith(_SUFFIXES) and _under(Path(f), root)]
            out.extend(str(f) for f in sorted(p for p in found if p.is_file()))
        else:
            out.append(str(root))
    return out


def _under(path: Path, root: Path) -> bool:
    return path != root and root in path.parents


def _note(out: Fingerprint, path: Path) -> None:
    with contextlib.suppress(OSError):
        st = path.stat()
        out[str(path)] = (st.st_mtime_ns, st.st_size, st.st_ino)


@dataclass(frozen=True, slots=True)
class _Read:
    result: LoadResult | None
    error: str | None
    files: Fingerprint
    edited: Edited | None = None  # only the files read again, merged (store/file_edits.py)


class FileStore:
    """A ConfigStore over files given with `-f`; `watch()` keeps it current."""

    def __init__(
        self, paths: Sequence[str | Path], poll_interval: float = 0.2, incremental: bool = True
    ) -> None:
        self.paths = tuple(str(p) for p in paths)
        self.poll_interval = poll_interval
        self.incremental = incremental  # False: every read merged whole (tests compare)
        self._snapshot = StoreSnapshot(version=0)
        self._mesh_file: str | None = None
        self._files: Fingerprint = {}
        self._handlers: list[ChangeHandler] = []
        # Per input file: its stamp when read and what it held (parsed and validated).
        self._parsed: dict[str, tuple[tuple[int, int, int], LoadResult]] = {}
        self.files_parsed = 0  # files parsed so far (full reads count every file)

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
        files look the same on two checks in a row, so a file still being written is not
        read half-way; the confirming check comes a quarter interval after the first (a
        write in progress moves size or mtime within milliseconds). When inotify saw every
        write complete (closed, or a file renamed into place), it is read at once: the
        confirming check would only delay the push."""
        seen: Fingerprint | None = None
        with Notifier(self.paths) as notifier:
            while True:
                confirm = 0.02 if notifier.active else self.poll_interval / 4
                await notifier.wait(self.poll_interval if seen is None else confirm)
                seen = await self._check(seen, notifier.settled)

    async def _check(self, seen: Fingerprint | None, settled: bool = False) -> Fingerprint | None:
        """One look at the files: the fingerprint to confirm next time, or None. `settled`:
        inotify saw every write closed (or renamed into place), no second look needed."""
        current = fingerprint(self.paths)
        if current == self._files:
            return None
        if current != seen and not settled:
            return current
        self._apply(await asyncio.to_thread(self._read))
        return None

    def _read(self) -> _Read:
        files = fingerprint(self.paths)
        try:
            missing = [p for p in self.paths if p not in files]
            if missing:
                load_paths(missing)  # raises the loader's error for a missing path
            parsed = {}
            for name in _ordered_files(self.paths, files):
                stamp = files.get(name)
                known = self._parsed.get(name)
                if stamp is None or known is None or known[0] != stamp:
                    self.files_parsed += 1
                    known = (stamp or (0, 0, 0), _load_file(name))
                parsed[name] = known
            before, self._parsed = self._parsed, parsed
            if self.incremental:
                results = {name: r for name, (_, r) in parsed.items()}
                previous = {name: r for name, (_, r) in before.items()}
                edited = edited_objects(self._snapshot, previous, results)
                if edited is not None:
                    return _Read(None, None, files, edited)
            return _Read(_combine(r for _, r in parsed.values()), None, files)
        except MeshpilotError as exc:
            self._parsed = {}
            return _Read(None, str(exc), files)

    def _apply(self, read: _Read) -> ChangeEvent | None:
        self._files = read.files
        old = self._snapshot
        if read.edited is not None:
            edited = read.edited
            return self._commit(old, edited.objects, edited.changed, old.mesh,
                                edited.diagnostics, old.stale)  # fmt: skip
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
        self._mesh_file = mesh_file
        diagnostics = kept_last_good(read.result.diagnostics, stale)
        for diag in diagnostics:
            if diag.severity is Severity.ERROR:
                log.warning("%s", diag)
        log_fail_closed(objects, old.objects)
        return self._commit(old, objects, changed, mesh, diagnostics, frozenset(stale))

    def _commit(
        self,
        old: StoreSnapshot,
        objects: dict[ConfigKey, ConfigObject[Any]],
        changed: set[ConfigKey],
        mesh: MeshConfig,
        diagnostics: tuple[Diagnostic, ...],
        stale: frozenset[ConfigKey],
    ) -> ChangeEvent | None:
        """The next snapshot, and its change event for the subscribers."""
        version = old.version + 1 if changed or not old.version else old.version
        self._snapshot = StoreSnapshot(version, objects, mesh, diagnostics, stale)
        if not changed:
            return None
        event = ChangeEvent(frozenset(changed), version)
        for handler in self._handlers:
            handler(event)
        return event


def _load_file(name: str) -> LoadResult:
    """One input file's objects; a file that cannot be read or loaded at all becomes one
    diagnostic for that file (its objects keep their last good version, the other files
    are served and watched as before)."""
    try:
        return load_paths([name])
    except MeshpilotError as exc:
        message = str(exc).removeprefix(f"{name}: ")
    except Exception as exc:  # a loader bug must not stop the watch of every file
        log.debug("loading %s failed", name, exc_info=exc)
        message = f"cannot load: {type(exc).__name__}: {exc}"
    return LoadResult(diagnostics=[Diagnostic(file=name, line=1, message=message)])


def _combine(results: Iterable[LoadResult]) -> LoadResult:
    """Files read one by one, merged as one read of all of them would have loaded them."""
    out = LoadResult()
    seen: dict[ConfigKey, ConfigObject[Any]] = {}
    for one in results:
        out.diagnostics.extend(one.diagnostics)
        out.fail_closed.extend(one.fail_closed)
        if one.mesh_origin is not None:
            if out.mesh_origin is None:
                out.mesh, out.mesh_origin = one.mesh, one.mesh_origin
            else:
                first = out.mesh_origin
                out.diagnostics.append(
                    Diagnostic(
                        file=one.mesh_origin.file,
                        line=one.mesh_origin.line,
                        kind="MeshConfig",
                        message=f"a second mesh config; the one at {first.file}:"
                        f"{first.line} is used",
                    )
                )
        for obj in one.objects:
            first_obj = seen.get(obj.key)
            if first_obj is None:
                seen[obj.key] = obj
                out.objects.append(obj)
                continue
            out.diagnostics.append(
                Diagnostic(
                    file=obj.origin.file,
                    line=obj.origin.line_of(()),
                    kind=str(obj.key.kind),
                    namespace=obj.key.namespace,
                    name=obj.key.name,
                    message=f"duplicate object: already defined at {first_obj.location}; "
                    "this copy is ignored",
                )
            )
    return out


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
    invalid = {key for d in errors if (key := diagnostic_key(d)) is not None}
    stale: set[ConfigKey] = set()
    for key, obj in old.objects.items():
        if key in objects or obj.fail_closed:
            continue
        if key in invalid or obj.origin.file in broken_files:
            objects[key] = obj
            stale.add(key)
    for stand in result.fail_closed:  # invalid security policies with no last good version
        objects.setdefault(stand.key, stand)
    return objects, stale


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
    # Objects of files not read again are the very same objects: `is` settles most keys.
    changed.update(
        k for k in old.keys() & new.keys() if old[k] is not new[k] and old[k].model != new[k].model
    )
    return changed

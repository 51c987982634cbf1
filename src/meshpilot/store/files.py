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
big mesh costs one file's parse, not the mesh's.

Invalid input never reaches the store: an object that fails validation keeps its last good
version, and so does every object of a file that is no longer readable YAML. The problems
are kept as diagnostics (and `error` when nothing could be read at all) for /debug/configz.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import struct
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


class FileStore:
    """A ConfigStore over files given with `-f`; `watch()` keeps it current."""

    def __init__(self, paths: Sequence[str | Path], poll_interval: float = 0.2) -> None:
        self.paths = tuple(str(p) for p in paths)
        self.poll_interval = poll_interval
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
        write complete (closed, or a file renamed into place), it is read at once (B3: an
        endpoint change is pushed about 30 ms sooner)."""
        seen: Fingerprint | None = None
        with _Notifier(self.paths) as notifier:
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
                    known = (stamp or (0, 0, 0), load_paths([name]))
                parsed[name] = known
            self._parsed = parsed
            return _Read(_combine(r for _, r in parsed.values()), None, files)
        except MeshpilotError as exc:
            self._parsed = {}
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


def _combine(results: Iterable[LoadResult]) -> LoadResult:
    """Files read one by one, merged as one read of all of them would have loaded them."""
    out = LoadResult()
    seen: dict[ConfigKey, ConfigObject[Any]] = {}
    for one in results:
        out.diagnostics.extend(one.diagnostics)
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


_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_CREATE, _IN_DELETE = 0x2, 0x8, 0x40, 0x100, 0x200
_IN_Q_OVERFLOW, _IN_ISDIR = 0x4000, 0x40000000


class _Notifier:
    """Wakes the poll loop early when Linux inotify reports a change in a watched directory
    (polling stays the ground truth: it also covers network filesystems and symlink swaps)."""

    # IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM/TO, IN_CREATE, IN_DELETE
    _MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200

    def __init__(self, paths: Sequence[str]) -> None:
        self._paths = paths
        self._fd = -1
        self._event = asyncio.Event()
        self._libc: Any = None
        self._writing: set[tuple[int, bytes]] = set()  # (watch, file name) open for writing
        self._lost = False
        self._woke = False  # events came since the last look (else a poll found the change)

    def __enter__(self) -> _Notifier:
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            if fd >= 0:
                self._fd, self._libc = fd, libc
                self._add_watches()
                asyncio.get_running_loop().add_reader(fd, self._on_readable)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _add_watches(self) -> None:
        for raw in self._paths:
            root = Path(raw)
            dirs = [root] if root.is_dir() else [root.parent]
            if root.is_dir():
                for dirpath, dirnames, _ in os.walk(root):
                    dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                    dirs.extend(Path(dirpath) / d for d in dirnames)
            for d in dirs:
                self._libc.inotify_add_watch(self._fd, os.fsencode(d), self._MASK)

    def _on_readable(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self._fd, 65536):
                self._note(chunk)
        self._woke = True
        self._add_watches()  # new subdirectories (re-adding a watch is a no-op)
        self._event.set()

    def _note(self, chunk: bytes) -> None:
        """Track the files being written: created or modified and not closed yet (struct
        inotify_event: wd, mask, cookie, len, then the name)."""
        i = 0
        while i + 16 <= len(chunk):
            wd, mask, _, size = struct.unpack_from("iIII", chunk, i)
            name = (wd, chunk[i + 16 : i + 16 + size].rstrip(b"\0"))
            i += 16 + size
            if mask & _IN_Q_OVERFLOW:
                self._lost = True  # events were dropped: nothing is known complete
            elif mask & _IN_ISDIR:
                continue
            elif mask & (_IN_MODIFY | _IN_CREATE):
                self._writing.add(name)
            elif mask & (_IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_DELETE):
                self._writing.discard(name)

    @property
    def settled(self) -> bool:
        """Events came and every write they reported is complete (closed, or renamed
        into place): a change can be read at once. Unknown (a symlink made, events lost)
        leaves it to the poll's second look, which then resets this."""
        done = self._woke and not self._writing and not self._lost
        self._writing.clear()
        self._lost = self._woke = False
        return done

    @property
    def active(self) -> bool:
        return self._fd >= 0

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        if self._event.is_set():
            self._event.clear()
            if self._writing or self._lost:
                await asyncio.sleep(0.01)  # let the writer finish


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
    # Objects of files not read again are the very same objects: `is` settles most keys.
    changed.update(
        k for k in old.keys() & new.keys() if old[k] is not new[k] and old[k].model != new[k].model
    )
    return changed

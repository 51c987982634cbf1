"""The directory store on disk: where each object's file lives, the marker that makes a
directory a store (with its format), and the write lock.

    <root>/.meshpilot-store                  marker: "meshpilot directory store, format N"
    <root>/.lock                             writers hold an exclusive flock while writing
    <root>/<Kind>/<namespace>/<name>.yaml    one object (cluster-scoped: <Kind>/_cluster/)

Format 2 adds the write-ahead intent (store/directory/intent.py); format 1 stores (written by
earlier meshpilot versions) are read the same, and become format 2 once their stale temporary
files are removed (store/directory/recovery.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.errors import MeshpilotError

__all__ = [
    "CLUSTER_DIR",
    "FORMAT",
    "MARKER",
    "StoreError",
    "mark_current_format",
    "object_path",
    "open_store_dir",
    "store_lock",
]

MARKER = ".meshpilot-store"
CLUSTER_DIR = "_cluster"  # namespaces cannot start with "_", so no clash
FORMAT = 2
_MARKER_TEXT = "meshpilot directory store, format {}\n"


class StoreError(MeshpilotError):
    """The store directory cannot be used (not a store, unreadable, unwritable)."""


def object_path(root: Path, key: ConfigKey) -> Path:
    return root / str(key.kind) / (key.namespace or CLUSTER_DIR) / f"{key.name}.yaml"


def open_store_dir(root: Path, create: bool) -> int:
    """Check that `root` is a store (making an empty or missing one when `create`);
    returns its format."""
    marker = root / MARKER
    try:
        text = marker.read_text(errors="replace")
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StoreError(f"{root}: cannot read the store: {exc.strerror}") from exc
    else:
        word = text.strip().rsplit(" ", 1)[-1]
        return int(word) if word.isdigit() else 1
    if root.exists() and any(root.iterdir()):
        raise StoreError(f"{root}: not a meshpilot store (no {MARKER} file)")
    if not create:
        raise StoreError(f"{root}: no such store")
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        marker.write_text(_MARKER_TEXT.format(FORMAT))
    except OSError as exc:
        raise StoreError(f"{root}: cannot create the store: {exc.strerror}") from exc
    return FORMAT


def mark_current_format(root: Path) -> None:
    """Record that the store is of the current format (call under the write lock)."""
    tmp = root / f"{MARKER}.new"
    tmp.write_text(_MARKER_TEXT.format(FORMAT))
    os.replace(tmp, root / MARKER)


@contextlib.contextmanager
def store_lock(root: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold the store's exclusive write lock; with `wait=False`, yields False at once when
    another process (or another handle) holds it."""
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing releases the lock

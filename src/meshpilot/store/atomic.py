"""Durable replacement of a batch of files: every file is written to a temporary name and
fsynced, then all are renamed over their targets, then each directory touched is fsynced
once. The caller appends to its journal only after this returns, so a journal line never
names a file that a crash could lose. One fsync per file plus one per directory, instead
of a directory fsync after every file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["fsync_dir", "remove_files", "replace_files"]


def replace_files(files: Sequence[tuple[Path, str]], durable: bool = True) -> None:
    """Write each (path, text) atomically (0600 files, 0700 directories created);
    `durable=False`: still atomic for readers, but nothing is fsynced."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    if durable:
        for directory in dict.fromkeys(path.parent for _, path in staged):
            fsync_dir(directory)


def remove_files(paths: Sequence[Path]) -> None:
    """Unlink each path (a missing one is fine), then fsync each directory once."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for directory in dict.fromkeys(path.parent for path in paths):
        fsync_dir(directory)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

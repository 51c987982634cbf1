"""Atomic replacement of a batch of files: every file is written to a temporary name next to
its target (`.<name>.<random>.tmp`) and fsynced (`stage_files`), then all are renamed over
their targets (`rename_staged`). Between the two the directory store records the batch in
its write-ahead intent (store/directory/intent.py), so a crash during the renames is finished on the
next open rather than leaving some files new and some old. The directories touched are
returned, for the caller to fsync once each (`fsync_dirs`) after it has appended its
journal line: a reader watching the journal then reacts without waiting for those fsyncs.
Each file's data is on disk before its rename, so a crash never leaves a partial file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "TEMPORARY_SUFFIX",
    "StagedFile",
    "discard",
    "fsync_dir",
    "fsync_dirs",
    "remove_files",
    "rename_staged",
    "replace_files",
    "stage_files",
]

TEMPORARY_SUFFIX = ".tmp"


@dataclass(frozen=True, slots=True)
class StagedFile:
    """A file's new content, written under a temporary name in its target's directory."""

    temporary: Path
    target: Path
    size: int


def replace_files(files: Sequence[tuple[Path, str]], durable: bool = True) -> list[Path]:
    """Write each (path, text) atomically (0600 files, 0700 directories created); returns
    the directories whose renames `fsync_dirs` makes durable. `durable=False`: still atomic
    for readers, but the data is not fsynced."""
    staged = stage_files(files, durable)
    try:
        return rename_staged(staged)
    except BaseException:
        discard(staged)
        raise


def stage_files(files: Sequence[tuple[Path, str]], durable: bool = True) -> list[StagedFile]:
    """Write each (path, text) to a new temporary file next to `path` (fsynced unless not
    `durable`); on an error, the temporary files already written are removed."""
    staged: list[StagedFile] = []
    try:
        for path, text in files:
            data = text.encode()
            fd, tmp = _temporary(path)
            staged.append(StagedFile(Path(tmp), path, len(data)))
            try:
                written = 0
                while written < len(data):
                    written += os.write(fd, data[written:])
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException:
        discard(staged)
        raise
    return staged


def rename_staged(staged: Sequence[StagedFile]) -> list[Path]:
    """Rename every staged file over its target; returns the directories to fsync."""
    for one in staged:
        os.replace(one.temporary, one.target)
    return list(dict.fromkeys(one.target.parent for one in staged))


def discard(staged: Sequence[StagedFile]) -> None:
    for one in staged:
        with contextlib.suppress(OSError):
            os.unlink(one.temporary)


def _temporary(path: Path) -> tuple[int, str]:
    """A new 0600 file next to `path`. The directory is made only when missing: a mkdir of
    an existing one still takes its lock, which the writes and renames of other objects in
    that directory hold, and a GitOps sync writes into existing directories."""
    prefix, directory = f".{path.stem}.", path.parent
    try:
        return tempfile.mkstemp(prefix=prefix, suffix=TEMPORARY_SUFFIX, dir=directory)
    except FileNotFoundError:
        _private_dirs(directory)
        return tempfile.mkstemp(prefix=prefix, suffix=TEMPORARY_SUFFIX, dir=directory)


def _private_dirs(directory: Path) -> None:
    """Make `directory` and its missing parents 0700 (`mkdir(parents=True)` would make the
    parents with the default mode: a store's `<Kind>` directories came out 0755)."""
    missing = [directory, *(p for p in directory.parents if not p.exists())]
    for path in sorted(missing, key=lambda p: len(p.parts)):
        path.mkdir(exist_ok=True, mode=0o700)


def remove_files(paths: Sequence[Path]) -> list[Path]:
    """Unlink each path (a missing one is fine); returns the directories to fsync."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return list(dict.fromkeys(path.parent for path in paths))


def fsync_dirs(directories: Sequence[Path]) -> None:
    for directory in directories:
        fsync_dir(directory)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

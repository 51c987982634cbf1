"""The directory store's change feed: an append-only journal of (version, op, key) lines.

Writers append one line per changed object under the store's write lock, all lines of one
apply carrying the same new version, then fsync. Readers in other processes stat the file
(cheap) and read only the bytes appended since their last look, so a change is seen within
one poll. A journal that was compacted (replaced, so its inode changed) or shrank tells the
reader to re-read the whole store instead.

    <version> TAB put|del TAB <Kind> TAB <namespace> TAB <name> LF
    <version> TAB base LF                      (first line after compaction)
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind

__all__ = ["Journal", "JournalEntry", "JournalTail"]

_COMPACT_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class JournalEntry:
    version: int
    op: str  # "put", "del" or "base"
    key: ConfigKey | None


@dataclass(frozen=True, slots=True)
class JournalTail:
    """What a reader learnt: new entries, where it stopped, and whether to start over."""

    entries: tuple[JournalEntry, ...]
    offset: int
    identity: tuple[int, int]  # (device, inode) of the file read
    restart: bool  # the journal was replaced or truncated: re-read everything


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def identity(self) -> tuple[int, int, int] | None:
        """(device, inode, size), or None when there is no journal yet."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino, st.st_size

    def last_version(self) -> int:
        """The version of the last complete line (0 for an empty store)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 4096))
                lines = fh.read().split(b"\n")
        except FileNotFoundError:
            return 0
        for line in reversed(lines[:-1]):  # the last item is after the final newline
            entry = _parse(line)
            if entry is not None:
                return entry.version
        return 0

    def append(
        self, version: int, changes: list[tuple[str, ConfigKey]], durable: bool = True
    ) -> None:
        """Append the lines of one write (one write call: readers see whole lines) and
        make them durable unless told not to. Call under the write lock."""
        text = "".join(
            f"{version}\t{op}\t{key.kind}\t{key.namespace}\t{key.name}\n" for op, key in changes
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, text.encode())
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            if self.path.stat().st_size > _COMPACT_BYTES:
                self._compact(version)

    def sync(self) -> None:
        """fsync the journal (after an `append(..., durable=False)` whose files the caller
        made durable after the line was written)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _compact(self, version: int) -> None:
        """Replace a long journal with one `base` line; readers then re-read the store."""
        tmp = self.path.with_name(self.path.name + ".compact")
        tmp.write_text(f"{version}\tbase\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    def read_from(self, offset: int, identity: tuple[int, int] | None) -> JournalTail:
        """Entries appended after `offset` of the file known as `identity`."""
        try:
            with self.path.open("rb") as fh:
                st = os.fstat(fh.fileno())
                current = (st.st_dev, st.st_ino)
                restart = identity is not None and (current != identity or st.st_size < offset)
                start = 0 if restart or identity is None else offset
                fh.seek(start)
                data = fh.read()
        except FileNotFoundError:
            return JournalTail((), 0, (0, 0), restart=identity not in (None, (0, 0)))
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written waits
        entries = tuple(e for line in complete.splitlines() if (e := _parse(line)) is not None)
        return JournalTail(entries, start + len(complete), current, restart)


def _parse(line: bytes) -> JournalEntry | None:
    parts = line.decode(errors="replace").split("\t")
    try:
        version = int(parts[0])
    except ValueError:
        return None
    if len(parts) == 2 and parts[1] == "base":
        return JournalEntry(version, "base", None)
    if len(parts) != 5 or parts[1] not in ("put", "del"):
        return None
    try:
        kind = Kind(parts[2])
    except ValueError:
        return None
    return JournalEntry(version, parts[1], ConfigKey(kind, parts[3], parts[4]))

"""The directory store's write-ahead intent (`<root>/.intent`): what the write in progress
is about to change, so that a writer killed half-way is finished, or undone, by the next
process that takes the store's lock (store/directory/recovery.py).

A write, under the lock, goes: `begin` (its temporary files are about to be made), the
temporary files, `ready` (the whole batch, made durable before any rename), the renames and
removals, the journal lines, then `clear`. What the file holds tells how far a dead writer
got: empty, nothing to do; `begin` without `ready`, nothing of the batch was renamed yet
(undo: remove its temporary files); `ready`, every temporary file was whole (finish the
renames and removals, then the journal line).

    begin TAB <version> LF
    put TAB <Kind> TAB <namespace> TAB <name> TAB <temporary file name> TAB <bytes> LF
    del TAB <Kind> TAB <namespace> TAB <name> LF
    ready LF
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.store.directory.atomic import StagedFile, discard, fsync_dir, stage_files

__all__ = ["INTENT_FILE", "Intent", "IntentFile", "StagedObject"]

INTENT_FILE = ".intent"


@dataclass(frozen=True, slots=True)
class StagedObject:
    """One object's new file, written under a temporary name next to its own."""

    key: ConfigKey
    temporary: str  # a file name in the object's directory
    size: int  # bytes: a shorter file was not whole (a non-durable write, then power loss)


@dataclass(frozen=True, slots=True)
class Intent:
    version: int
    puts: tuple[StagedObject, ...]
    deletes: tuple[ConfigKey, ...]
    ready: bool  # False: the writer stopped before its first rename


class IntentFile:
    """The intent record of one store. Every method but `read` and `pending` is called
    under the store's write lock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / INTENT_FILE
        self._name_synced = False

    def pending(self) -> bool:
        """Whether a write is under way, or was left unfinished (a stat; no lock needed)."""
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def begin(self, version: int) -> None:
        self._write(f"begin\t{version}\n", durable=False)

    def stage(
        self, version: int, files: Sequence[tuple[ConfigKey, Path, str]], durable: bool = True
    ) -> list[StagedFile]:
        """Write each object's (key, path, text) new file under a temporary name, then
        record the batch as ready; on an error nothing is left of either."""
        self.begin(version)
        staged: list[StagedFile] = []
        try:
            staged = stage_files([(path, text) for _, path, text in files], durable)
            objects = [
                StagedObject(key, one.temporary.name, one.size)
                for (key, _, _), one in zip(files, staged, strict=True)
            ]
            self.ready(version, objects, durable=durable)
        except BaseException:
            discard(staged)
            self.clear()
            raise
        return staged

    def ready(
        self,
        version: int,
        puts: Sequence[StagedObject],
        deletes: Sequence[ConfigKey] = (),
        durable: bool = True,
    ) -> None:
        """Record the whole batch; durable before the first rename, so a power loss
        cannot leave renames on disk without it."""
        lines = [f"begin\t{version}\n"]
        lines += [f"put\t{_key(p.key)}\t{p.temporary}\t{p.size}\n" for p in puts]
        lines += [f"del\t{_key(key)}\n" for key in deletes]
        lines.append("ready\n")
        self._write("".join(lines), durable)

    def clear(self) -> None:
        """The write is complete (its journal line is written)."""
        self._write("", durable=False)

    def read(self) -> Intent | None:
        """The recorded write, or None when there is none (or it names no version)."""
        try:
            text = self.path.read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return None
        lines = text.split("\n")
        head = lines[0].split("\t")
        if len(head) != 2 or head[0] != "begin" or not head[1].isdigit():
            return None
        ready = text.endswith("\nready\n")
        puts: list[StagedObject] = []
        deletes: list[ConfigKey] = []
        for line in lines[1:]:
            parts = line.split("\t")
            key = _parse_key(parts[1:4])
            if parts[0] == "put" and len(parts) == 6 and key and parts[5].isdigit():
                puts.append(StagedObject(key, parts[4], int(parts[5])))
            elif parts[0] == "del" and len(parts) == 4 and key:
                deletes.append(key)
        return Intent(int(head[1]), tuple(puts), tuple(deletes), ready)

    def _write(self, text: str, durable: bool) -> None:
        data = text.encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
            if durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        if durable and not self._name_synced:
            fsync_dir(self.root)  # the file's name must survive a power loss too
            self._name_synced = True


def _key(key: ConfigKey) -> str:
    return f"{key.kind}\t{key.namespace}\t{key.name}"


def _parse_key(parts: Sequence[str]) -> ConfigKey | None:
    if len(parts) != 3:
        return None
    try:
        return ConfigKey(Kind(parts[0]), parts[1], parts[2])
    except ValueError:
        return None

"""Recovery of a directory store after a writer died (kill -9, a crash, a power loss) in the
middle of a write: run under the store's write lock, by the next writer, the next process
that opens the store, and a following reader that sees the intent outlive its writer.

The intent record (store/directory/intent.py) tells how far the dead writer got. Before `ready`,
nothing of its write was renamed into place: the write is undone (its temporary files are
removed) and the store stays at the version before it. From `ready` on, every new file was
whole on disk: the write is finished (the remaining renames and removals), and its journal
line is appended if it is missing, so a reader that was following the journal all along
takes in the whole write, as a reader opening the store afterwards does. Either way every
object of the write is old, or every object is new, and no temporary file is left.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.store.directory.atomic import TEMPORARY_SUFFIX, fsync_dirs
from meshpilot.store.directory.intent import Intent, IntentFile
from meshpilot.store.directory.journal import Journal
from meshpilot.store.directory.store_dir import FORMAT, mark_current_format, object_path, store_lock

__all__ = [
    "Recovery",
    "recover",
    "recover_abandoned",
    "recover_on_open",
    "remove_temporaries",
    "upgrade_format",
]

log = logging.getLogger(__name__)

_JOURNAL_COMPACTION = ".journal.compact"  # journal.py's replacement, made under the lock


@dataclass(frozen=True, slots=True)
class Recovery:
    version: int
    finished: bool  # True: the write was completed; False: it was undone
    objects: int  # objects the write changed (finished) or would have changed (undone)
    temporaries_removed: int
    # objects whose new file was not whole (a non-durable write, then a power loss): kept old
    incomplete: tuple[ConfigKey, ...] = ()


def recover_on_open(
    root: Path, intent_file: IntentFile, journal: Journal, store_format: int
) -> None:
    """Before a new handle reads anything: finish or undo a write a dead writer left, and
    remove an earlier version's stale temporary files."""
    if store_format >= FORMAT and not intent_file.pending():
        return
    try:
        with store_lock(root):
            if intent_file.pending():
                recover(root, intent_file, journal)
            if store_format < FORMAT:
                upgrade_format(root)
    except OSError as exc:  # a reader that may not write here
        log.warning("%s: cannot check for an interrupted write: %s", root, exc)


def recover_abandoned(root: Path, intent_file: IntentFile, journal: Journal) -> None:
    """A following reader's turn at an intent whose writer may have died: only when no
    writer holds the lock (it never waits behind a live one)."""
    try:
        with store_lock(root, wait=False) as held:
            if held:
                recover(root, intent_file, journal)
    except OSError as exc:
        log.debug("%s: cannot check for an interrupted write: %s", root, exc)


def recover(root: Path, intent_file: IntentFile, journal: Journal) -> Recovery | None:
    """Finish or undo the write the intent records, if any (call under the write lock:
    then no live writer has a write in progress)."""
    intent = intent_file.read()
    if intent is None and not intent_file.pending():
        return None
    incomplete: tuple[ConfigKey, ...] = ()
    if intent is not None and intent.ready:
        incomplete = _finish(root, intent, journal)
    removed = remove_temporaries(root)
    intent_file.clear()
    if intent is None:  # unreadable: the writer died while writing `begin`
        intent = Intent(journal.last_version() + 1, (), (), ready=False)
    result = Recovery(
        intent.version,
        intent.ready,
        len(intent.puts) + len(intent.deletes),
        removed,
        incomplete,
    )
    _report(root, result)
    return result


def _finish(root: Path, intent: Intent, journal: Journal) -> tuple[ConfigKey, ...]:
    """Do the renames and removals the dead writer did not get to, then its journal lines."""
    incomplete: list[ConfigKey] = []
    directories: dict[Path, None] = {}
    for staged in intent.puts:
        target = object_path(root, staged.key)
        temporary = target.parent / staged.temporary
        try:
            size = temporary.stat().st_size
        except FileNotFoundError:
            continue  # renamed before the writer died
        if size != staged.size:
            incomplete.append(staged.key)
            continue  # removed with the other temporary files
        os.replace(temporary, target)
        directories[target.parent] = None
    for key in intent.deletes:
        path = object_path(root, key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            directories[path.parent] = None
    fsync_dirs(list(directories))
    if journal.last_version() < intent.version:
        changes = [("put", s.key) for s in intent.puts] + [("del", k) for k in intent.deletes]
        journal.append(intent.version, changes)
    return tuple(incomplete)


def remove_temporaries(root: Path) -> int:
    """Remove the temporary files writers make (`<Kind>/<namespace>/.<name>.<random>.tmp`,
    and the journal's compaction file); call under the write lock, so none is in use."""
    removed = 0
    for path in _temporaries(root):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
    return removed


def _temporaries(root: Path) -> Iterator[Path]:
    compaction = root / _JOURNAL_COMPACTION
    if compaction.exists():
        yield compaction
    for kind_dir in _subdirectories(root):
        for namespace_dir in _subdirectories(kind_dir):
            with os.scandir(namespace_dir) as entries:
                names = [e.name for e in entries if e.is_file(follow_symlinks=False)]
            for name in names:
                if name.startswith(".") and name.endswith(TEMPORARY_SUFFIX):
                    yield namespace_dir / name


def _subdirectories(path: Path) -> list[Path]:
    with os.scandir(path) as entries:
        return [
            path / e.name
            for e in entries
            if e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
        ]


def _report(root: Path, result: Recovery) -> None:
    if result.finished:
        log.warning(
            "%s: finished a write interrupted at store version %d (%d objects); "
            "%d temporary files removed",
            root,
            result.version,
            result.objects,
            result.temporaries_removed,
        )
    else:
        log.warning(
            "%s: undid a write interrupted before its first rename (store version %d was "
            "never committed; every object stays as it was); %d temporary files removed",
            root,
            result.version,
            result.temporaries_removed,
        )
    if result.incomplete:
        names = ", ".join(str(key) for key in result.incomplete[:5])
        log.error(
            "%s: %d objects of store version %d keep their old version: their new file "
            "was not whole (a write without fsync, then a power loss?): %s",
            root,
            len(result.incomplete),
            result.version,
            names,
        )


def upgrade_format(root: Path) -> None:
    """Make a store written by an earlier meshpilot (format 1, no intent record) current:
    its writers left their temporary files behind when killed. Call under the write lock."""
    removed = remove_temporaries(root)
    mark_current_format(root)
    if removed:
        log.warning("%s: %d temporary files of interrupted writes removed", root, removed)

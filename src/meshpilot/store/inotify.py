"""Linux inotify as an early wake-up for stores that poll (no inotify: polling alone).

Polling stays the ground truth: it also covers network filesystems and symlink swaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["Notifier"]

_IN_MODIFY, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_CREATE, _IN_DELETE = 0x2, 0x8, 0x40, 0x100, 0x200
_IN_Q_OVERFLOW, _IN_ISDIR = 0x4000, 0x40000000


class Notifier:
    """Wakes the poll loop early when Linux inotify reports a change in a watched directory
    (polling stays the ground truth: it also covers network filesystems and symlink swaps)."""

    # IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM/TO, IN_CREATE, IN_DELETE
    _MASK = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200

    def __init__(self, paths: Sequence[str], settle_s: float = 0.01) -> None:
        self._paths = paths
        # Only files given: only their own events wake (the store's journal shares its
        # directory with the write-ahead intent and the lock, both written on every write).
        given = [Path(p) for p in paths]
        files_only = given and not any(p.is_dir() for p in given)
        self._only = {os.fsencode(p.name) for p in given} if files_only else None
        self.settle_s = settle_s  # the longest wait for a write in progress to finish
        self._fd = -1
        self._event = asyncio.Event()
        self._libc: Any = None
        self._writing: set[tuple[int, bytes]] = set()  # (watch, file name) open for writing
        self._lost = False
        self._woke = False  # events came since the last look (else a poll found the change)

    def __enter__(self) -> Notifier:
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
        relevant = False
        with contextlib.suppress(OSError):
            while chunk := os.read(self._fd, 65536):
                relevant = self._note(chunk) or relevant
        if relevant:
            self._woke = True
            self._add_watches()  # new subdirectories (re-adding a watch is a no-op)
            self._event.set()

    def _note(self, chunk: bytes) -> bool:
        """Track the files being written: created or modified and not closed yet (struct
        inotify_event: wd, mask, cookie, len, then the name); whether any event concerns
        what is watched."""
        relevant = False
        i = 0
        while i + 16 <= len(chunk):
            wd, mask, _, size = struct.unpack_from("iIII", chunk, i)
            name = (wd, chunk[i + 16 : i + 16 + size].rstrip(b"\0"))
            i += 16 + size
            if mask & _IN_Q_OVERFLOW:
                self._lost = relevant = True  # events were dropped: nothing is known complete
                continue
            if self._only is not None and name[1] not in self._only:
                continue
            relevant = True
            if mask & _IN_ISDIR:
                continue
            if mask & (_IN_MODIFY | _IN_CREATE):
                self._writing.add(name)
            elif mask & (_IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_DELETE):
                self._writing.discard(name)
        return relevant

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

    async def wait(self, timeout: float, settle: bool = True) -> None:
        """Until an event or `timeout`; `settle`: give a write still open up to 10 ms to
        finish (not needed by readers that take whole lines only, like the store's journal)."""
        # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that
        # lands as the event fires, and the watch loop (and whoever awaits it) never ends
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._event.wait()
        if self._event.is_set():
            self._event.clear()
            if settle:
                await self._settle()

    async def _settle(self) -> None:
        """Give writes still open up to SETTLE_S to finish, back as soon as inotify reports
        them closed (an atomic write closes microseconds after its create, and the watch
        often wakes in between, where a fixed sleep would delay every change). Lost events
        tell nothing: the whole wait."""
        if self._lost:
            await asyncio.sleep(self.settle_s)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.settle_s):
                while self._writing and not self._lost:
                    await self._event.wait()
                    self._event.clear()

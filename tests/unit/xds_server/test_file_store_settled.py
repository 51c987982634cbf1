"""The file store reads a change at once when inotify saw every write complete, and takes a
second look when a write may still be in progress (store/files.py Notifier)."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

from meshpilot.store.base import ChangeEvent
from meshpilot.store.files import FileStore, Fingerprint
from meshpilot.store.inotify import Notifier

MODIFY, CLOSE_WRITE, MOVED_TO, CREATE, OVERFLOW = 0x2, 0x8, 0x80, 0x100, 0x4000

POD = """apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: default, labels: {app: a}}
status: {podIP: 10.0.0.1}
"""


def event(mask: int, name: bytes, wd: int = 1) -> bytes:
    padded = name + b"\0" * (16 - len(name))
    return struct.pack("iIII", wd, mask, 0, len(padded)) + padded


def notifier(*events: bytes) -> Notifier:
    n = Notifier(())
    n._note(b"".join(events))
    n._woke = True
    return n


def test_closed_writes_and_renames_are_settled() -> None:
    n = notifier(
        event(CREATE, b"a.tmp"), event(MODIFY, b"a.tmp"), event(CLOSE_WRITE, b"a.tmp"),
        event(MOVED_TO, b"a.yaml"),
    )  # fmt: skip
    assert n.settled
    assert not n.settled  # the next look with no event: the poll decides


def test_a_write_in_progress_is_not_settled() -> None:
    assert not notifier(event(MODIFY, b"a.yaml")).settled
    assert not notifier(event(CLOSE_WRITE, b"a.yaml"), event(MODIFY, b"a.yaml")).settled


def test_lost_events_are_not_settled() -> None:
    assert not notifier(event(OVERFLOW, b"")).settled


def test_a_write_in_progress_is_waited_for_until_it_closes() -> None:
    """The watch woke between a write's create and its close: it goes on as soon as the
    close is reported, not after the whole wait (30 s here)."""

    async def scenario() -> None:
        n = Notifier((), settle_s=30.0)
        n._note(event(CREATE, b"a.tmp"))
        n._woke = True
        n._event.set()

        async def close() -> None:
            await asyncio.sleep(0.01)
            n._note(event(CLOSE_WRITE, b"a.tmp"))
            n._event.set()

        closer = asyncio.create_task(close())
        await asyncio.wait_for(n.wait(1.0), 5.0)
        await closer
        assert n.settled

    asyncio.run(scenario())


class CountingStore(FileStore):
    """Counts the looks at the files (the real store otherwise)."""

    looks = 0

    async def _check(self, seen: Fingerprint | None, settled: bool = False) -> Fingerprint | None:
        self.looks += 1
        return await super()._check(seen, settled)


def test_an_atomic_write_is_read_on_the_first_look(tmp_path: Path) -> None:
    (tmp_path / "mesh.yaml").write_text(POD)
    store = CountingStore([tmp_path], poll_interval=5.0)  # only inotify wakes it this soon
    store.load()
    seen: asyncio.Queue[ChangeEvent] = asyncio.Queue()
    store.subscribe(seen.put_nowait)

    async def scenario() -> None:
        watch = asyncio.create_task(store.watch())
        try:
            await asyncio.sleep(0.05)  # the watches are in place
            tmp = tmp_path / "pod.tmp"
            tmp.write_text(POD.replace("p1", "p2"))
            tmp.rename(tmp_path / "pod.yaml")
            await asyncio.wait_for(seen.get(), 5.0)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    asyncio.run(scenario())
    assert store.looks == 1
    assert any(k.name == "p2" for k in store.snapshot().objects)

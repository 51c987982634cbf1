"""A Notifier given files wakes for those files only: the directory store's journal shares
its directory with the write-ahead intent and the lock, both written on every write, and a
follower woken by them re-reads for nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from meshpilot.store.inotify import Notifier


async def _woken_by(notifier: Notifier, write: Path) -> bool:
    write.write_text("x\n")
    await notifier.wait(0.3, settle=False)
    return notifier.settled


def test_a_file_watch_wakes_for_the_file_and_not_for_its_neighbours(tmp_path: Path) -> None:
    journal, intent = tmp_path / ".journal", tmp_path / ".intent"
    journal.write_text("")

    async def scenario() -> tuple[bool, bool]:
        with Notifier([str(journal)]) as notifier:
            assert notifier.active
            return await _woken_by(notifier, intent), await _woken_by(notifier, journal)

    assert asyncio.run(scenario()) == (False, True)


def test_a_directory_watch_wakes_for_any_file_in_it(tmp_path: Path) -> None:
    async def scenario() -> bool:
        with Notifier([str(tmp_path)]) as notifier:
            return await _woken_by(notifier, tmp_path / "a.yaml")

    assert asyncio.run(scenario())

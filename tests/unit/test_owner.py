"""Temporary directories with an owner (meshpilot/owner.py): removed once the owner process
is gone, never while it runs, and never one this user's processes did not mark as theirs."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from meshpilot.owner import OWNER_FILE, Owner, owned_tempdir, remove_dead_tempdirs

PREFIX = "meshpilot-unit-"


@pytest.fixture(autouse=True)
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where gettempdir() points
    return tmp_path


def dead_owner() -> Owner:
    """The owner record of a process that ran and exited."""
    code = "from meshpilot.owner import Owner; o = Owner.current(); print(o.pid, o.start_time)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    pid, start = out.stdout.split()
    return Owner(int(pid), int(start))


def test_only_directories_of_dead_owners_are_removed(private_tmp: Path) -> None:
    mine = owned_tempdir(PREFIX)
    assert mine.parent == private_tmp and mine.name.startswith(PREFIX)
    assert Owner.read(mine / OWNER_FILE) == Owner.current()
    dead = owned_tempdir(PREFIX)
    dead_owner().write(dead / OWNER_FILE)
    unmarked = private_tmp / f"{PREFIX}unmarked"  # being made, or an earlier version's
    unmarked.mkdir()
    elsewhere = private_tmp / "elsewhere"
    elsewhere.mkdir()
    dead_owner().write(elsewhere / OWNER_FILE)
    link = private_tmp / f"{PREFIX}link"  # a link to a directory is never followed
    link.symlink_to(elsewhere)
    other_prefix = owned_tempdir("meshpilot-other-")
    dead_owner().write(other_prefix / OWNER_FILE)

    assert remove_dead_tempdirs(PREFIX) == [dead]
    assert not dead.exists()
    for kept in (mine, unmarked, elsewhere, link, other_prefix):
        assert kept.exists(), kept
    assert remove_dead_tempdirs(PREFIX) == []

"""The process that owns what we leave on the machine, so that a later run removes what a
dead owner left (kill -9 runs no cleanup) and never what a running one uses.

An owner is a PID plus that process's start time, so a reused PID does not count. The
netns runtime keeps one owner file per cluster (runtime/leftovers.py); a temporary
directory keeps its owner in an `owner` file inside it (`owned_tempdir`), and the next
start of the same program removes the directories of its prefix whose owner is gone
(`remove_dead_tempdirs`): discovery's front Envoy sockets, a proxy agent's working
directory, GitOps' git credentials and plugin working copies.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "OWNER_FILE",
    "TEMP_DIR",
    "WORKDIR_PREFIX",
    "Owner",
    "owned_tempdir",
    "process_start_time",
    "remove_dead_tempdirs",
]

log = logging.getLogger(__name__)

WORKDIR_PREFIX = "meshpilot-"  # every temporary directory of ours: meshpilot-<what>-*
TEMP_DIR = Path(tempfile.gettempdir())
OWNER_FILE = "owner"


@dataclass(frozen=True, slots=True)
class Owner:
    pid: int
    start_time: int
    workdir: str = ""  # a temporary directory of ours, removed with the leftovers

    @classmethod
    def current(cls, workdir: Path | None = None) -> Owner:
        pid = os.getpid()
        return cls(pid, process_start_time(pid) or 0, str(workdir or ""))

    def alive(self) -> bool:
        return process_start_time(self.pid) == self.start_time

    def write(self, path: Path) -> None:
        data = {"pid": self.pid, "start_time": self.start_time, "workdir": self.workdir}
        path.write_text(json.dumps(data) + "\n")

    @classmethod
    def read(cls, path: Path) -> Owner | None:
        try:
            data = json.loads(path.read_text())
            return cls(int(data["pid"]), int(data["start_time"]), str(data.get("workdir", "")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def remove_workdir(self) -> None:
        """Only a `meshpilot-*` directory directly in the temporary directory."""
        path = Path(self.workdir)
        if self.workdir and path.parent == TEMP_DIR and path.name.startswith(WORKDIR_PREFIX):
            shutil.rmtree(path, ignore_errors=True)


def process_start_time(pid: int) -> int | None:
    """Clock ticks since boot at which `pid` started (/proc/<pid>/stat field 22)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rsplit(")", 1)[1].split()[19])


def owned_tempdir(prefix: str, parent: Path | None = None) -> Path:
    """A new private (0700) directory `<parent or tmp>/<prefix><random>` whose owner file
    names this process; `prefix` starts with `meshpilot-`."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    owner_file = path / OWNER_FILE
    owner_file.touch(mode=0o600)
    Owner.current().write(owner_file)
    return path


def remove_dead_tempdirs(prefix: str, parent: Path | None = None) -> list[Path]:
    """Remove the `<parent or tmp>/<prefix>*` directories whose owner process is gone.
    Left alone: a running owner's, one whose owner file this user did not write (another
    user's, or one without an owner file: being made, or made by an earlier meshpilot)."""
    removed = []
    for path in sorted((parent or Path(tempfile.gettempdir())).glob(f"{prefix}*")):
        owner_file = path / OWNER_FILE
        try:
            directory, info = path.lstat(), owner_file.lstat()
        except OSError:
            continue
        ours = stat.S_ISDIR(directory.st_mode) and stat.S_ISREG(info.st_mode)
        if not ours or info.st_uid != os.geteuid():
            continue
        owner = Owner.read(owner_file)
        if owner is None or owner.alive():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    if removed:
        names = ", ".join(str(p) for p in removed)
        log.info("removed %d directories of processes that are gone: %s", len(removed), names)
    return removed

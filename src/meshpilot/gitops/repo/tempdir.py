"""Private temporary directories: 0700, removed on every exit path.

Decrypted values are normally kept in memory; anything that must touch disk (a plugin's
working copy, a Helm chart copy with its dependencies, git's credentials) goes here, and
the directory is removed in `finally`, so exceptions and timeouts leave nothing behind. A
kill -9 runs no `finally`: an `owned` directory also holds an owner file (meshpilot/owner.py),
and the first use of its prefix in a process removes those whose process is gone.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from meshpilot.owner import owned_tempdir, remove_dead_tempdirs

__all__ = ["private_tempdir"]

_swept: set[tuple[Path | None, str]] = set()  # (parent, prefix) this process has cleared
_sweeping = threading.Lock()


@contextmanager
def private_tempdir(
    parent: Path | None = None, prefix: str = "meshpilot-", owned: bool = False
) -> Iterator[Path]:
    """`owned`: the directory holds an `owner` file next to what the caller puts there."""
    if owned:
        with _sweeping:
            if (parent, prefix) not in _swept:
                _swept.add((parent, prefix))
                remove_dead_tempdirs(prefix, parent)
        path = owned_tempdir(prefix, parent)
    else:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))  # mkdtemp creates it 0700
    try:
        path.chmod(0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

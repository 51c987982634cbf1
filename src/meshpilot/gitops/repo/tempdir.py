"""Private temporary directories: 0700, removed on every exit path.

Decrypted values are normally kept in memory; anything that must touch disk (a plugin's
working copy, a Helm chart copy with its dependencies) goes here, and the directory is
removed in `finally`, so exceptions and timeouts leave nothing behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["private_tempdir"]


@contextmanager
def private_tempdir(parent: Path | None = None, prefix: str = "meshpilot-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))  # mkdtemp creates it 0700
    try:
        path.chmod(0o700)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)

"""Files of the CA dir: private ones 0600 in a 0700 directory, public ones 0644; atomic writes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["dir_lock", "ensure_private_dir", "write_private", "write_public"]


@contextlib.contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """Exclusive lock of the directory for its first-start writes: two processes starting
    at once must not each generate half of the CA."""
    with (path / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_private_dir(path: Path) -> Path:
    """Create the directory 0700 (parents as needed), or tighten an existing one to 0700."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:
        path.chmod(0o700)
    return path


def _write(path: Path, data: bytes, mode: int) -> None:
    # Created with its final mode (never briefly world-readable), then renamed into place.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)  # the umask may have narrowed it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_private(path: Path, data: bytes) -> None:
    _write(path, data, 0o600)


def write_public(path: Path, data: bytes) -> None:
    _write(path, data, 0o644)

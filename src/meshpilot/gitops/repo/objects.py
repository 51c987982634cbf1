"""Object lookups in a mirror through one long-lived `git cat-file --batch-check`.

"Is this commit mirrored?" and "the tree id of commit:path" were a `git rev-parse` process
each (2-5 ms of fork, exec and git start-up): a resync after a push asked once per app,
and a webhook's reconcile three times. The batch process answers in microseconds. It sees
what later fetches and repacks bring (git looks at the pack directory again on a miss).
A reader that fails or stalls is killed; the caller falls back to a process per lookup.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from meshpilot.gitops.repo.errors import GitCommandError

__all__ = ["ObjectInfo", "ObjectReader"]


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    oid: str
    type: str  # commit, tree, blob, tag


class ObjectReader:
    def __init__(self, mirror: Path, env: Mapping[str, str], timeout: float = 30.0) -> None:
        self.mirror = mirror
        self.timeout = timeout
        self._lock = threading.Lock()
        self._buffer = b""
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            ["git", "cat-file", "--batch-check"],
            cwd=mirror,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def lookup(self, spec: str) -> ObjectInfo | None:
        """The object `spec` names (`<sha>^{commit}`, `<sha>:<path>`); None: no such object.
        Raises GitCommandError when the reader cannot answer (it is closed then)."""
        if "\n" in spec or "\r" in spec or not spec:
            raise GitCommandError("object name not usable with cat-file --batch-check")
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.stdout is None:
                raise GitCommandError("git cat-file reader closed")
            try:
                proc.stdin.write(spec.encode() + b"\n")
                proc.stdin.flush()
                line = self._read_line(proc.stdout.fileno())
            except (OSError, GitCommandError) as exc:
                self._close_locked()
                raise GitCommandError(f"git cat-file reader failed: {exc}") from None
        fields = line.split(" ")
        if len(fields) == 3 and fields[1] in ("commit", "tree", "blob", "tag"):
            return ObjectInfo(fields[0], fields[1])
        return None  # "<spec> missing" or "<spec> ambiguous"

    def _read_line(self, fd: int) -> str:
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise GitCommandError(f"no answer within {self.timeout:g}s")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise GitCommandError("git cat-file exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: cat-file exits on its own
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

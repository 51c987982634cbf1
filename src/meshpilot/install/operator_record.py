"""Where a running `meshpilot operator` is found: `<ca dir>/operator/operator.json` (its pid
and store), so that `install` starts one only when none runs for that store; its log lives
beside it. The revisions' control-plane sockets are in `revision_socket_dir`: pods dial them."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from meshpilot.security.files import ensure_private_dir, write_private

__all__ = [
    "OperatorRecord",
    "find_operator",
    "operator_dir",
    "remove_operator_record",
    "revision_socket_dir",
    "traversable_dir",
    "write_operator_record",
]


@dataclass(frozen=True, slots=True)
class OperatorRecord:
    pid: int
    store: str


def operator_dir(ca_dir: Path) -> Path:
    return ca_dir / "operator"


def revision_socket_dir(ca_dir: Path, revision: str) -> Path:
    """Where the operator's control plane of `revision` puts its Unix sockets: outside the
    CA dir (0700), which the Envoys of netns pods (each its own UID) cannot cross."""
    digest = hashlib.sha256(str(ca_dir.absolute()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"mp-op-{digest}" / (revision or "default")


def traversable_dir(path: Path) -> Path:
    """`path` and its parent created 0711 (crossed, never listed), refused when either is a
    symlink or another user's (a shared temp dir)."""
    for directory in (path.parent, path):
        directory.mkdir(mode=0o711, exist_ok=True)
        info = directory.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
            raise PermissionError(f"{directory}: not a directory of this user; remove it")
        directory.chmod(0o711)
    return path


def _path(ca_dir: Path) -> Path:
    return operator_dir(ca_dir) / "operator.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_operator(ca_dir: Path) -> OperatorRecord | None:
    """The operator running for this CA dir, if any (a dead one's record is ignored)."""
    try:
        record = OperatorRecord(**json.loads(_path(ca_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return record if _alive(record.pid) else None


def write_operator_record(ca_dir: Path, record: OperatorRecord) -> None:
    ensure_private_dir(operator_dir(ca_dir))
    write_private(_path(ca_dir), json.dumps(asdict(record)).encode())


def remove_operator_record(ca_dir: Path, pid: int) -> None:
    found = find_operator(ca_dir)
    if found is None or found.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            _path(ca_dir).unlink()

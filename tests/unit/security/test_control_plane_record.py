"""Which agent addresses reach a recorded control plane, and records of dead processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from meshpilot.security.control_plane_record import (
    ControlPlaneRecord,
    find_record,
    record_key,
    remove_record,
    root_cert_path,
    write_record,
)


def _record(ca_dir: Path, listen: str = "127.0.0.1", pid: int | None = None) -> ControlPlaneRecord:
    pid = pid or os.getpid()
    root = root_cert_path(ca_dir, record_key(pid, 15010))
    return ControlPlaneRecord(pid, listen, 15010, 15012, str(root), "/run/x.sock", "/run/s.sock")


@pytest.mark.parametrize(
    ("listen", "address", "tls"),
    [
        ("127.0.0.1", "127.0.0.1:15010", False),
        ("127.0.0.1", "localhost:15012", True),
        ("127.0.0.1", "[::1]:15010", False),
        ("0.0.0.0", "127.0.0.1:15012", True),
        ("10.1.2.3", "10.1.2.3:15010", False),
        ("10.1.2.3", "127.0.0.1:15010", None),  # nothing listens on loopback
        ("127.0.0.1", "10.1.2.3:15010", None),  # another machine's
        ("127.0.0.1", "127.0.0.1:16010", None),  # another control plane's port
        ("127.0.0.1", "unix:/run/x.sock", False),
        ("127.0.0.1", "unix:///run/s.sock", True),
        ("127.0.0.1", "unix:/run/other.sock", None),
    ],
)
def test_serves(tmp_path: Path, listen: str, address: str, tls: bool | None) -> None:
    assert _record(tmp_path, listen).serves(address) is tls


def test_written_private_found_by_address_and_removed(tmp_path: Path) -> None:
    record = _record(tmp_path)
    write_record(tmp_path, record, b"ROOT PEM")
    folder = tmp_path / "control-planes"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / f"{os.getpid()}-15010.json").stat().st_mode) == 0o600
    assert Path(record.root_cert).read_bytes() == b"ROOT PEM"
    assert find_record(tmp_path, "127.0.0.1:15010") == (record, False)
    assert find_record(tmp_path, "127.0.0.1:15011") is None
    remove_record(tmp_path, record_key(os.getpid(), 15010))
    assert list(folder.iterdir()) == []
    assert find_record(tmp_path / "nowhere", "127.0.0.1:15010") is None
    assert not (tmp_path / "nowhere").exists()


def test_a_dead_control_planes_record_is_ignored(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the kernel's pid_max default: no such process
    write_record(tmp_path, _record(tmp_path, pid=dead), b"ROOT")
    assert find_record(tmp_path, "127.0.0.1:15010") is None

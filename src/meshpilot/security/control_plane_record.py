"""Where a control plane on this machine can be found: a record in its CA dir.

`meshpilot discovery` writes `<ca_dir>/control-planes/<pid>-<xds port>.json` (0600 in 0700
directories) once its ports are bound, and removes it when it stops: its plaintext and TLS
xDS ports, the address they listen on, its Unix sockets and a copy of its root certificate
(`<pid>-<xds port>-root-cert.pem`, 0644). A proxy agent started on
the same machine by the same user, without `--root-cert`, looks there (agent/local_ca.py), as
a pod finds its mounted root and token. The record holds no secret: the CA dir's
permissions decide who may use it, and only a reader of the CA dir's token key can prove an
identity with it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from meshpilot.security.files import ensure_private_dir, write_private, write_public

__all__ = [
    "RECORDS_DIR",
    "ControlPlaneRecord",
    "find_record",
    "find_revision_record",
    "live_records",
    "record_key",
    "remove_record",
    "root_cert_path",
    "write_record",
]

log = logging.getLogger(__name__)

RECORDS_DIR = "control-planes"
_WILDCARDS = ("0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class ControlPlaneRecord:
    pid: int
    listen_address: str  # what the ports bind (127.0.0.1 unless told otherwise)
    xds_port: int  # plaintext xDS (15010)
    secure_port: int  # xDS + CA over TLS (15012)
    root_cert: str  # the mesh root (public)
    xds_uds: str = ""
    secure_uds: str = ""
    revision: str = ""  # the revision it serves ("" for a plain `meshpilot discovery`)
    monitoring_port: int = 0  # HTTP debug (15014): `meshpilot version` asks it
    webhook_port: int = 0  # the injection webhook (15017), 0 when off

    def serves(self, address: str) -> bool | None:
        """Whether `address` (an agent's --discovery-address) reaches this control plane:
        True over TLS, False in plaintext, None when it is not this one's."""
        if address.startswith("unix:"):
            path = address.removeprefix("unix:")
            path = path[2:] if path.startswith("//") else path
            if path and path == self.secure_uds:
                return True
            return False if path and path == self.xds_uds else None
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        if not port.isdigit() or not self._reaches(host):
            return None
        if int(port) == self.secure_port:
            return True
        return False if int(port) == self.xds_port else None

    def _reaches(self, host: str) -> bool:
        listen = self.listen_address
        if host == listen:
            return True
        return _loopback(host) and (_loopback(listen) or listen in _WILDCARDS)

    def secure_address(self, over_unix: bool) -> str | None:
        """The TLS port as an agent dials it: the Unix socket for an agent that reached the
        plaintext one that way (it may be in another network namespace), else loopback."""
        if over_unix:
            return f"unix:{self.secure_uds}" if self.secure_uds else None
        host = self.listen_address
        if host in _WILDCARDS or _loopback(host):
            host = "::1" if host == "::" or host == "::1" else "127.0.0.1"
        return f"[{host}]:{self.secure_port}" if ":" in host else f"{host}:{self.secure_port}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _path(ca_dir: Path, key: str) -> Path:
    return ca_dir / RECORDS_DIR / f"{key}.json"


def record_key(pid: int, xds_port: int) -> str:
    """A record's name: its process and plaintext port (one process may serve twice)."""
    return f"{pid}-{xds_port}"


def root_cert_path(ca_dir: Path, key: str) -> Path:
    """The copy of the mesh root a record points at (the CA may be plugged in elsewhere)."""
    return ca_dir / RECORDS_DIR / f"{key}-root-cert.pem"


def write_record(ca_dir: Path, record: ControlPlaneRecord, root_pem: bytes) -> None:
    """The root first, then the record naming it (a reader never sees one without it)."""
    ensure_private_dir(ca_dir / RECORDS_DIR)
    write_public(Path(record.root_cert), root_pem)
    key = record_key(record.pid, record.xds_port)
    write_private(_path(ca_dir, key), json.dumps(asdict(record), indent=2).encode())


def remove_record(ca_dir: Path, key: str) -> None:
    for path in (_path(ca_dir, key), root_cert_path(ca_dir, key)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def live_records(ca_dir: Path) -> list[ControlPlaneRecord]:
    """The records of the control planes running on this machine (dead ones skipped)."""
    out: list[ControlPlaneRecord] = []
    try:
        paths = sorted((ca_dir / RECORDS_DIR).glob("*-*.json"))
    except OSError:
        return out
    for path in paths:
        try:
            record = ControlPlaneRecord(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            log.debug("skipping control plane record %s: %s", path, exc)
            continue
        if _alive(record.pid):
            out.append(record)
    return out


def _revision_of_address(address: str) -> str | None:
    """`istiod-1-15-4.istio-system.svc:15012` -> "1-15-4"; `istiod.<ns>.svc...` -> "default";
    None for an address that names no istiod Service (the injected discoveryAddress)."""
    host = address.rpartition(":")[0] if ":" in address else address
    name = host.split(".")[0]
    if name == "istiod":
        return "default"
    return name.removeprefix("istiod-") if name.startswith("istiod-") else None


def find_revision_record(ca_dir: Path, revision_or_address: str) -> ControlPlaneRecord | None:
    """The running control plane of a revision ("default" for the default one), given by
    name or by the address an injected proxy is told (`istiod-<rev>.<ns>.svc:15012`): how
    `meshpilot run` reaches a revision's control plane on this machine."""
    revision = _revision_of_address(revision_or_address) or revision_or_address
    found = [r for r in live_records(ca_dir) if (r.revision or "default") == revision]
    return found[-1] if found else None


def find_record(ca_dir: Path, address: str) -> tuple[ControlPlaneRecord, bool] | None:
    """The running control plane whose record in `ca_dir` serves `address`, and whether
    that address is its TLS port; None when there is none (records of dead processes are
    skipped). Never creates anything."""
    for record in live_records(ca_dir):
        tls = record.serves(address)
        if tls is not None:
            return record, tls
    return None

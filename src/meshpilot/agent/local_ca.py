"""A control plane on this machine as the agent's CA, found without `--root-cert`.

In a pod, the agent finds the mesh root and its token where Kubernetes mounts them. Run by
hand next to `meshpilot discovery`, it finds them where that control plane keeps them: the
record it wrote in its CA dir (security/control_plane_record.py) gives the root and the TLS
port, and the CA dir's token key signs the agent's bootstrap token, as `meshpilot token
issue` does. Only a user who can read the CA dir (0700: the one running the control plane,
or root) gets this far; for anyone else nothing is found and the agent says what to give.
The token is made in memory for each CA call, short-lived, and never written or logged.

A gateway's xDS moves to the TLS port: its `kubernetes://` secrets go only to a stream that
proves its identity with the workload certificate. A sidecar keeps the address it was given.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meshpilot.agent.options import AgentOptions
from meshpilot.model.proxy import ProxyType
from meshpilot.security.control_plane_record import ControlPlaneRecord, find_record
from meshpilot.security.tokens import TOKEN_KEY_FILE, issue_token

__all__ = ["LOCAL_TOKEN_TTL", "LocalCa", "find_local_ca", "local_token_source"]

LOCAL_TOKEN_TTL = dt.timedelta(minutes=10)  # made afresh for every CA call


@dataclass(frozen=True, slots=True)
class LocalCa:
    record: ControlPlaneRecord
    ca_dir: Path
    root_cert: Path
    ca_address: str  # the TLS port (xDS + CA)
    xds_address: str  # where the proxy's xDS goes
    xds_tls: bool


def find_local_ca(ca_dir: Path, options: AgentOptions) -> LocalCa | None:
    """The control plane that `options.discovery_address` reaches, when it runs here and
    left its record in `ca_dir` readable by us; None otherwise (nothing is created)."""
    # Replicas (`a:15010,b:15010`) share one root: the CA is every one found running.
    records = [find_record(ca_dir, address) for address in options.discovery_addresses]
    found = [r for r in records if r is not None]
    if not found:
        return None
    record, tls = found[0]
    over_unix = options.discovery_uds is not None
    secure = [r.secure_address(over_unix=over_unix) for r, _ in found]
    ca_address = options.discovery_address if tls else ",".join(a for a in secure if a) or None
    root = Path(record.root_cert)
    if ca_address is None or not root.is_file():
        return None
    if not os.access(ca_dir / TOKEN_KEY_FILE, os.R_OK):
        return None
    xds_address, xds_tls = options.discovery_address, tls
    if options.proxy_type is ProxyType.ROUTER and options.xds_tls is None and not tls:
        xds_address, xds_tls = ca_address, True
    elif options.xds_tls is not None:
        xds_tls = options.xds_tls
    return LocalCa(record, ca_dir, root, ca_address, xds_address, xds_tls)


def local_token_source(ca_dir: Path, options: AgentOptions) -> Callable[[], str]:
    """Tokens for this proxy's pod and service account, signed with the CA dir's key."""

    def issue() -> str:
        return issue_token(
            ca_dir, options.namespace, options.service_account, options.pod_name, LOCAL_TOKEN_TTL
        )

    return issue

"""How the demo runs: its options, the choice between network-namespace pods and the
loopback fallback, and free ports."""

from __future__ import annotations

from dataclasses import dataclass

from meshpilot.demo.processes import DemoError
from meshpilot.demo.topology import DemoPorts
from meshpilot.runtime import ports
from meshpilot.runtime.commands import HostSupportError, require_host_support

__all__ = ["DemoOptions", "free_port", "loopback_ports", "use_loopback"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoOptions:
    cluster: str = "demo"  # runtime cluster name: namespaces mp-<cluster>-...
    xds_port: int = 15010  # preferred; another free port if taken (0: any)
    monitoring_port: int = 15014  # preferred; another free port if taken (0: any)
    ui: bool = False  # the web UI (`gitops serve`) beside the mesh (`meshpilot demo` turns it on)
    ui_port: int = 8080  # preferred; another free port if taken (0: any)
    envoy_log_level: str = "warning"
    debounce: str = "100ms"
    ready_timeout: float = 90.0
    secret_ttl: str = "24h"  # workload certificates' lifetime; renewed at 80% of it
    loopback: bool | None = None  # None: pods if this machine can, else the loopback


def free_port(preferred: int = 0) -> int:
    """`preferred` if it is free, else a free port below the ephemeral range."""
    try:
        return ports.free_port(preferred)
    except ports.NoFreePort as exc:
        raise DemoError(str(exc)) from None


def loopback_ports() -> DemoPorts:
    """Seven distinct free unprivileged ports. A gateway's Service port differs from its
    listener port: the client sidecar binds the first on 127.0.0.1, the gateway the second
    on 0.0.0.0, and both on one port would clash."""
    chosen = [free_port() for _ in range(7)]  # never the same port twice
    http, tcp, external, ingress_service, ingress, egress_service, egress = chosen
    return DemoPorts(http, tcp, external, ingress_service, ingress, egress_service, egress)


def use_loopback(wanted: bool | None) -> tuple[bool, str]:
    """(loopback?, why): pods when this machine can run them (root, iproute2, iptables)."""
    if wanted is not None:
        return wanted, "asked for" if wanted else ""
    try:
        require_host_support()
    except HostSupportError as exc:
        return True, str(exc)
    return False, ""

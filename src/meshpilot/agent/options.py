"""What the proxy agent knows about its proxy: identity, capture mode, ports, control plane.

`AgentOptions` is the input of the bootstrap (pure) and of the agent (impure). It holds the
facts pilot-agent reads from its environment in a pod (POD_NAME, POD_NAMESPACE, INSTANCE_IP,
the downward-API labels file, ISTIO_META_*), given here explicitly by the CLI.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from meshpilot.agent.merged_metrics import AppScrape
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import ISTIO_VERSION, ProxyType
from meshpilot.registry.workloads import pod_workload_name
from meshpilot.settings import Ports

__all__ = [
    "ISTIO_VERSION",
    "ROOT_CERT_PATH",
    "SDS_SOCKET_PATH",
    "XDS_SERVER_NAME",
    "AgentOptions",
    "InterceptionMode",
    "XdsType",
    "detect_node_ip",
    "discovery_addresses",
    "discovery_endpoint",
    "discovery_socket",
    "parse_label_args",
    "read_labels_file",
    "sds_socket_path",
]

# The SDS socket, relative to Envoy's working directory, as Istio's bootstrap writes it
# (WorkloadIdentityPath + "socket"); the agent runs Envoy in its working directory.
SDS_SOCKET_PATH = "./var/run/secrets/workload-spiffe-uds/socket"
# The mesh root, where Istio mounts it; the agent copies --root-cert here for Envoy.
ROOT_CERT_PATH = "./var/run/secrets/istio/root-cert.pem"
XDS_SERVER_NAME = "istiod.istio-system.svc"  # the name the control plane's cert carries


def sds_socket_path(work_dir: Path) -> Path:
    """Where the agent's SDS server listens (Envoy's cluster `sds-grpc`)."""
    return work_dir / SDS_SOCKET_PATH


class XdsType(StrEnum):
    """`ads_config.api_type`: state of the world or incremental (Istio's ISTIO_DELTA_XDS)."""

    GRPC = "GRPC"
    DELTA_GRPC = "DELTA_GRPC"


class InterceptionMode(StrEnum):
    """How traffic reaches a sidecar (Istio's `sidecar.istio.io/interceptionMode`)."""

    REDIRECT = "REDIRECT"
    TPROXY = "TPROXY"
    NONE = "NONE"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions:
    proxy_type: ProxyType
    pod_name: str
    namespace: str
    ip_addresses: tuple[str, ...] = ("127.0.0.1",)
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str = "default"
    workload_name: str = ""  # empty: derived from the pod name as Istio's injector does
    interception_mode: InterceptionMode = InterceptionMode.REDIRECT
    discovery_address: str = "127.0.0.1:15010"
    xds_tls: bool | None = None  # TLS to the control plane; None: when the port is 15012
    xds_server_name: str = XDS_SERVER_NAME
    xds_type: XdsType = XdsType.DELTA_GRPC
    ports: Ports = field(default_factory=Ports)
    cluster_id: str = "Kubernetes"
    trust_domain: str = "cluster.local"  # also Istio's default MESH_ID
    domain_suffix: str = "cluster.local"
    istio_version: str = ISTIO_VERSION
    concurrency: int = 2  # Istio's default proxy concurrency
    drain_duration_s: int = 45  # Envoy --drain-time-s (ProxyConfig.drainDuration)
    termination_drain_duration_s: float = 5.0  # ProxyConfig.terminationDrainDuration
    stats_inclusion_prefixes: tuple[str, ...] = ()
    stats_inclusion_regexps: tuple[str, ...] = ()
    # The app's metrics merged into 15020/stats/prometheus (ISTIO_PROMETHEUS_ANNOTATIONS).
    app_metrics: AppScrape | None = None

    def __post_init__(self) -> None:
        if not self.pod_name or not self.namespace:
            raise MeshpilotError("the proxy needs a pod name and a namespace (--pod name.ns)")
        if not self.ip_addresses:
            raise MeshpilotError("the proxy needs at least one IP address")
        for ip in self.ip_addresses:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise MeshpilotError(f"invalid IP address {ip!r}") from None
        discovery_addresses(self.discovery_address)  # a clear error for a malformed one
        if self.proxy_type is ProxyType.ROUTER and self.interception_mode is not (
            InterceptionMode.REDIRECT
        ):
            raise MeshpilotError("--interception-mode applies to sidecars only")

    @property
    def node_id(self) -> str:
        """`sidecar~10.1.2.3~pod.ns~ns.svc.cluster.local` (Istio's service node)."""
        return (
            f"{self.proxy_type}~{self.ip_addresses[0]}~{self.pod_name}.{self.namespace}"
            f"~{self.namespace}.svc.{self.domain_suffix}"
        )

    @property
    def workload(self) -> str:
        return self.workload_name or pod_workload_name(self.pod_name, self.labels)

    @property
    def service_cluster(self) -> str:
        """`node.cluster`: Istio's default APP_LABEL_AND_NAMESPACE service cluster."""
        if "app" in self.labels:
            return f"{self.labels['app']}.{self.namespace}"
        return f"{self.workload}.{self.namespace}"

    @property
    def captures(self) -> bool:
        """True when iptables sends the pod's traffic to this proxy (a sidecar, not NONE)."""
        return (
            self.proxy_type is ProxyType.SIDECAR
            and self.interception_mode is not InterceptionMode.NONE
        )

    @property
    def discovery_host_port(self) -> tuple[str, int]:
        """The first control plane's host and port."""
        return discovery_endpoint(self.discovery_addresses[0])

    @property
    def discovery_addresses(self) -> tuple[str, ...]:
        """Every control plane replica given (`a:15012,b:15012`): Envoy and the agent's
        clients move to another when the one they use goes away."""
        return discovery_addresses(self.discovery_address)

    @property
    def secure_xds(self) -> bool:
        """xDS over TLS (verifying the control plane against the mesh root)? Explicit, else
        by Istio's convention: port 15012 is TLS, 15010 plaintext."""
        if self.xds_tls is not None:
            return self.xds_tls
        if self.discovery_uds is not None:
            return False
        return self.discovery_host_port[1] == self.ports.xds_tls

    @property
    def discovery_uds(self) -> str | None:
        """The control plane's Unix socket when the address is `unix:<path>`."""
        return discovery_socket(self.discovery_address)


def discovery_addresses(address: str) -> tuple[str, ...]:
    """`a:15012,b:15012` into its addresses, each checked; `unix:<path>` stands alone."""
    parts = tuple(part.strip() for part in address.split(","))
    if len(parts) == 1:
        if discovery_socket(address) is None:
            discovery_endpoint(address)
        return parts
    for part in parts:
        if not part:
            raise MeshpilotError(f"invalid discovery address {address!r}: an empty entry")
        if part.startswith("unix:"):
            raise MeshpilotError(
                f"invalid discovery address {address!r}: a unix: socket cannot be listed "
                "with other addresses"
            )
        discovery_endpoint(part)
    return parts


def discovery_socket(address: str) -> str | None:
    """`unix:/path` or `unix:///path` (gRPC's forms): the socket path; None for host:port.
    A Unix socket reaches a control plane from another network namespace on the same host."""
    if not address.startswith("unix:"):
        return None
    path = address.removeprefix("unix:")
    path = path[2:] if path.startswith("//") else path
    if not path:
        raise MeshpilotError(f"invalid discovery address {address!r}: unix: needs a path")
    return path


def discovery_endpoint(address: str) -> tuple[str, int]:
    """Split `host:port` (IPv6 in brackets); MeshpilotError naming the address if invalid."""
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise MeshpilotError(f"invalid discovery address {address!r}: expected host:port")
    return host, int(port)


def parse_label_args(items: Iterable[str]) -> dict[str, str]:
    """`k=v` arguments (repeatable --label) into a dict."""
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise MeshpilotError(f"invalid label {item!r}: expected key=value")
        labels[key.strip()] = value.strip()
    return labels


def read_labels_file(path: Path) -> dict[str, str]:
    """A Kubernetes downward-API labels file (`key="value"` per line), as pilot-agent reads
    /etc/istio/pod/labels. Unquoted values are accepted too."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise MeshpilotError(f"cannot read labels file {path}: {exc.strerror}") from exc
    labels: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        value = value.strip()
        if not sep or not key.strip():
            raise MeshpilotError(f'{path}:{number}: expected key="value"')
        if value.startswith('"'):
            try:
                value = str(json.loads(value))
            except json.JSONDecodeError:
                raise MeshpilotError(f"{path}:{number}: badly quoted value") from None
        labels[key.strip()] = value
    return labels


_SIOCGIFADDR = 0x8915


def detect_node_ip() -> str:
    """The first non-loopback IPv4 address of this network namespace (by interface index),
    else 127.0.0.1: what INSTANCE_IP would be in a pod."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in sorted(socket.if_nameindex()):
            try:
                packed = fcntl.ioctl(
                    sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
                )
            except OSError:  # no IPv4 address on this interface
                continue
            ip = socket.inet_ntoa(packed[20:24])
            if not ipaddress.ip_address(ip).is_loopback:
                return ip
    return "127.0.0.1"

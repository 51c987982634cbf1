"""The service registry's model: services, their ports, and endpoints (workload instances)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from meshpilot.config.keys import ConfigKey

__all__ = [
    "Endpoint",
    "Locality",
    "Protocol",
    "Resolution",
    "Service",
    "ServicePort",
    "protocol_from_name",
]


class Protocol(StrEnum):
    HTTP = "HTTP"
    HTTP2 = "HTTP2"
    GRPC = "GRPC"
    GRPC_WEB = "GRPC-Web"
    HTTPS = "HTTPS"
    TLS = "TLS"
    TCP = "TCP"
    MONGO = "Mongo"
    MYSQL = "MySQL"
    REDIS = "Redis"
    UDP = "UDP"
    # Istio's "UnsupportedProtocol": not declared, so the proxy sniffs HTTP vs TCP.
    AUTO = "UnsupportedProtocol"

    @property
    def is_http(self) -> bool:
        return self in (Protocol.HTTP, Protocol.HTTP2, Protocol.GRPC, Protocol.GRPC_WEB)

    @property
    def is_http2(self) -> bool:
        return self in (Protocol.HTTP2, Protocol.GRPC, Protocol.GRPC_WEB)

    @property
    def is_tls(self) -> bool:
        return self in (Protocol.HTTPS, Protocol.TLS)

    @property
    def is_tcp(self) -> bool:
        return self in (
            Protocol.TCP,
            Protocol.HTTPS,
            Protocol.TLS,
            Protocol.MONGO,
            Protocol.MYSQL,
            Protocol.REDIS,
        )


_BY_LOWER = {
    "http": Protocol.HTTP,
    "http2": Protocol.HTTP2,
    "grpc": Protocol.GRPC,
    "grpc-web": Protocol.GRPC_WEB,
    "https": Protocol.HTTPS,
    "tls": Protocol.TLS,
    "tcp": Protocol.TCP,
    "mongo": Protocol.MONGO,
    "mysql": Protocol.MYSQL,
    "redis": Protocol.REDIS,
    "udp": Protocol.UDP,
    "h2c": Protocol.HTTP2,
    "kubernetes.io/h2c": Protocol.HTTP2,
    "kubernetes.io/ws": Protocol.HTTP,
    "kubernetes.io/wss": Protocol.HTTPS,
}


def parse_protocol(value: str) -> Protocol:
    """A declared protocol name (case-insensitive); AUTO when unknown."""
    return _BY_LOWER.get(value.lower(), Protocol.AUTO) if value else Protocol.AUTO


def protocol_from_name(port_name: str, app_protocol: str | None = None) -> Protocol:
    """Istio's rules: appProtocol first, then the port name's prefix before '-'."""
    if app_protocol:
        declared = parse_protocol(app_protocol)
        if declared is not Protocol.AUTO:
            return declared
    name = port_name.lower()
    if name in _BY_LOWER:
        return _BY_LOWER[name]
    prefix = name.split("-", 1)[0]
    if prefix == "grpc" and name.startswith("grpc-web"):
        return Protocol.GRPC_WEB
    return _BY_LOWER.get(prefix, Protocol.AUTO) if "-" in name else Protocol.AUTO


class Resolution(StrEnum):
    CLIENT_SIDE_LB = "ClientSideLB"  # EDS
    DNS_LB = "DNS"  # STRICT_DNS
    DNS_ROUND_ROBIN = "DNSRoundRobin"  # LOGICAL_DNS
    PASSTHROUGH = "Passthrough"  # ORIGINAL_DST


@dataclass(frozen=True, slots=True)
class ServicePort:
    name: str
    port: int
    protocol: Protocol
    # Numeric target port when the Service says so; named targets resolve per workload.
    target_port: int | None = None


@dataclass(frozen=True, slots=True)
class Locality:
    region: str = ""
    zone: str = ""
    subzone: str = ""

    def __str__(self) -> str:
        return "/".join(p for p in (self.region, self.zone, self.subzone) if p) or ""

    @classmethod
    def parse(cls, text: str) -> Locality:
        parts = [p for p in text.replace(".", "/").split("/")] + ["", "", ""]
        return cls(parts[0], parts[1], parts[2])


@dataclass(frozen=True, slots=True)
class Service:
    """One host in one namespace: a Kubernetes Service or one host of a ServiceEntry."""

    hostname: str
    namespace: str
    ports: tuple[ServicePort, ...]
    addresses: tuple[str, ...] = ()
    resolution: Resolution = Resolution.CLIENT_SIDE_LB
    mesh_external: bool = False
    export_to: frozenset[str] = frozenset()  # empty: the mesh default applies
    source: ConfigKey | None = None
    selector: Mapping[str, str] | None = None
    service_accounts: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # Kubernetes Service name (short name for alt domains); empty for ServiceEntry hosts.
    kube_name: str = ""
    # ExternalName Services: the host they alias (Istio's Resolution Alias); "" otherwise.
    alias_for: str = ""

    @property
    def is_kubernetes(self) -> bool:
        return bool(self.kube_name)

    @property
    def is_alias(self) -> bool:
        """An alias has no cluster or listener: its names join its target's virtual host."""
        return bool(self.alias_for)

    @property
    def vip(self) -> str | None:
        return self.addresses[0] if self.addresses else None

    def port(self, number: int) -> ServicePort | None:
        return next((p for p in self.ports if p.port == number), None)

    def port_by_name(self, name: str) -> ServicePort | None:
        return next((p for p in self.ports if p.name == name), None)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One workload instance serving one port of one service."""

    address: str
    port: int  # the port the workload listens on (targetPort)
    service_port: int
    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: str = ""
    workload_name: str = ""
    service_account: str = ""
    tls_mode: str = ""  # "istio" when the workload runs a sidecar that accepts mTLS
    locality: Locality = field(default_factory=Locality)
    weight: int = 1
    healthy: bool = True
    network: str = ""
    node_name: str = ""

    def sort_key(self) -> tuple[str, str, int]:
        return (str(self.locality), self.address, self.port)

"""Proxy: one Envoy (sidecar or gateway), described once when it is named or connects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.istio_version import ISTIO_VERSION as ISTIO_VERSION  # (re-exported)
from meshpilot.registry.model import Locality
from meshpilot.registry.workloads import locality_from_labels, pod_workload_name

__all__ = [
    "Proxy",
    "ProxyType",
    "VerifiedIdentity",
    "as_verified",
    "parse_node_id",
    "proxy_from_pod",
]


class ProxyType(StrEnum):
    SIDECAR = "sidecar"
    ROUTER = "router"


@dataclass(frozen=True, slots=True)
class VerifiedIdentity:
    """Who an ADS stream proved to be (Istio's `Proxy.VerifiedIdentity`): the namespace and
    service account of its client certificate's or its token's SPIFFE identity."""

    namespace: str
    service_account: str

    def __str__(self) -> str:
        return f"ns/{self.namespace}/sa/{self.service_account}"


@dataclass(frozen=True, slots=True)
class Proxy:
    type: ProxyType
    ip_addresses: tuple[str, ...]
    pod_name: str
    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str = "default"
    workload_name: str = ""
    locality: Locality = field(default_factory=Locality)
    istio_version: str = ISTIO_VERSION
    # interceptionMode NONE: no iptables capture; outbound listeners bind on 127.0.0.1.
    intercept: bool = True
    # interceptionMode TPROXY: inbound arrives by TPROXY, not REDIRECT; the capture listeners
    # are transparent and virtualInbound restores the caller's address (original_src).
    tproxy: bool = False
    dns_domain: str = ""
    # Served its sidecar route configs' virtual hosts by VHDS (settings.vhds, Delta xDS).
    vhds: bool = False
    # Proven by the stream it connected on; None (plaintext, or nothing proven): it is
    # served no `kubernetes://` secrets (xds/generate/secrets.py).
    verified: VerifiedIdentity | None = None

    @property
    def id(self) -> str:
        return f"{self.pod_name}.{self.namespace}"

    @property
    def node_id(self) -> str:
        """The Envoy node id istio-proxy sends: type~ip~pod.ns~ns.svc.cluster.local."""
        ip = self.ip_addresses[0] if self.ip_addresses else "127.0.0.1"
        return f"{self.type}~{ip}~{self.id}~{self.namespace}.svc.cluster.local"


def proxy_from_pod(
    pod: ConfigObject[Pod], proxy_type: ProxyType, domain_suffix: str = "cluster.local"
) -> Proxy:
    ips = tuple(ip["ip"] for ip in pod.model.status.pod_i_ps if "ip" in ip) or (
        (pod.model.status.pod_ip,) if pod.model.status.pod_ip else ()
    )
    return Proxy(
        type=proxy_type,
        ip_addresses=ips,
        pod_name=pod.name,
        namespace=pod.namespace,
        labels=dict(pod.labels),
        service_account=pod.model.service_account_name,
        workload_name=pod_workload_name(pod.name, pod.labels),
        locality=locality_from_labels(pod.labels),
        dns_domain=f"{pod.namespace}.svc.{domain_suffix}",
    )


def as_verified(proxy: Proxy) -> Proxy:
    """The proxy as if it had proven its own identity: what offline tools (translate,
    previews, golden tests) show it would receive over a verified stream."""
    return replace(proxy, verified=VerifiedIdentity(proxy.namespace, proxy.service_account))


@dataclass(frozen=True, slots=True)
class NodeId:
    type: ProxyType
    ip: str
    pod_name: str
    namespace: str
    dns_domain: str


def parse_node_id(node_id: str) -> NodeId:
    """Parse `sidecar~10.1.2.3~pod.ns~ns.svc.cluster.local`; ValueError naming what is wrong."""
    parts = node_id.split("~")
    if len(parts) != 4:
        raise ValueError(f"node id {node_id!r} must have 4 parts separated by '~'")
    try:
        proxy_type = ProxyType(parts[0])
    except ValueError:
        raise ValueError(f"node id {node_id!r}: unknown proxy type {parts[0]!r}") from None
    pod, _, namespace = parts[2].partition(".")
    if not pod or not namespace:
        raise ValueError(f"node id {node_id!r}: third part must be <pod>.<namespace>")
    return NodeId(proxy_type, parts[1], pod, namespace, parts[3])

"""Who is connecting: the Envoy node id and metadata, as istio-proxy sends them.

The node id is `<type>~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local`; the metadata
carries what Istio's agent sets (NAMESPACE, LABELS, SERVICE_ACCOUNT, INTERCEPTION_MODE,
ISTIO_VERSION, INSTANCE_IPS, WORKLOAD_NAME). A Pod of that name in the config wins for labels,
addresses and service account (it is what the registry knows); the metadata fills in for
proxies without one, and always decides interception mode and version.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from envoy.config.core.v3 import base_pb2
from google.protobuf import json_format

from meshpilot.model.proxy import (
    Proxy,
    ProxyType,
    VerifiedIdentity,
    parse_node_id,
    proxy_from_pod,
)
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Locality

__all__ = ["NodeInfo", "parse_node", "proxy_for", "verified_identity"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: str
    type: ProxyType
    ip: str
    pod_name: str
    namespace: str
    dns_domain: str
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str = ""
    interception_mode: str = "REDIRECT"
    istio_version: str = ""
    instance_ips: tuple[str, ...] = ()
    workload_name: str = ""
    locality: Locality = field(default_factory=Locality)
    cluster: str = ""
    cluster_id: str = "Kubernetes"  # node metadata CLUSTER_ID (Istio's default)
    vhds: bool = False  # set by the server (settings.vhds on a Delta stream), not the node
    # Set by the server from the stream's credential (xds/identity.py), never from the node.
    verified: VerifiedIdentity | None = None

    @property
    def id(self) -> str:
        return f"{self.pod_name}.{self.namespace}"


def _text(meta: Mapping[str, Any], key: str) -> str:
    value = meta.get(key)
    return value if isinstance(value, str) else ""


def parse_node(node: base_pb2.Node) -> NodeInfo:
    """ValueError naming the problem when the node id is not Istio's form."""
    parsed = parse_node_id(node.id)
    meta: dict[str, Any] = json_format.MessageToDict(node.metadata) if node.metadata else {}
    raw_labels = meta.get("LABELS")
    labels = {str(k): str(v) for k, v in raw_labels.items()} if isinstance(raw_labels, dict) else {}
    ips = tuple(ip.strip() for ip in _text(meta, "INSTANCE_IPS").split(",") if ip.strip())
    return NodeInfo(
        node_id=node.id,
        type=parsed.type,
        ip=parsed.ip,
        pod_name=parsed.pod_name,
        namespace=_text(meta, "NAMESPACE") or parsed.namespace,
        dns_domain=parsed.dns_domain,
        labels=labels,
        service_account=_text(meta, "SERVICE_ACCOUNT"),
        interception_mode=(_text(meta, "INTERCEPTION_MODE") or "REDIRECT").upper(),
        istio_version=_text(meta, "ISTIO_VERSION"),
        cluster_id=_text(meta, "CLUSTER_ID") or "Kubernetes",
        instance_ips=ips,
        workload_name=_text(meta, "WORKLOAD_NAME"),
        locality=Locality(node.locality.region, node.locality.zone, node.locality.sub_zone),
        cluster=node.cluster,
    )


def proxy_for(push: PushContext, info: NodeInfo) -> Proxy:
    """The Proxy for this node against this push (a Pod's labels may change between pushes)."""
    pod = push.pod(info.namespace, info.pod_name)
    if pod is not None:
        proxy = proxy_from_pod(pod, info.type, push.domain_suffix)
        if not proxy.ip_addresses:
            proxy = replace(proxy, ip_addresses=_addresses(info))
    else:
        proxy = Proxy(
            type=info.type,
            ip_addresses=_addresses(info),
            pod_name=info.pod_name,
            namespace=info.namespace,
            labels=dict(info.labels),
            service_account=info.service_account or "default",
            workload_name=info.workload_name or info.pod_name,
            locality=info.locality,
            dns_domain=info.dns_domain or f"{info.namespace}.svc.{push.domain_suffix}",
        )
    return replace(
        proxy,
        intercept=info.interception_mode != "NONE",
        tproxy=info.interception_mode == "TPROXY",
        istio_version=info.istio_version or proxy.istio_version,
        vhds=info.vhds and info.type is ProxyType.SIDECAR,
        verified=info.verified,
    )


def _addresses(info: NodeInfo) -> tuple[str, ...]:
    ips = list(info.instance_ips)
    if info.ip and info.ip not in ips:
        ips.insert(0, info.ip)
    return tuple(ips)


def verified_identity(
    info: NodeInfo, identities: Sequence[VerifiedIdentity]
) -> VerifiedIdentity | None:
    """The proven identity that matches what the node claims (Istio's
    checkConnectionIdentity): its namespace, and its service account if it names one. None
    (unverified, logged) when the credential proves another workload."""
    for identity in identities:
        if identity.namespace != info.namespace:
            continue
        if info.service_account and identity.service_account != info.service_account:
            continue
        return identity
    if identities:
        claimed = f"ns/{info.namespace}/sa/{info.service_account or '*'}"
        proven = ", ".join(map(str, identities))
        log.warning(
            "ADS: %s claims %s but its credential proves %s: served as unverified",
            info.id,
            claimed,
            proven,
        )
    return None

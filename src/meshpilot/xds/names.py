"""Every Envoy name meshpilot emits, as Istio spells it."""

from __future__ import annotations

__all__ = [
    "BLACKHOLE_CLUSTER",
    "BLACKHOLE_ROUTE",
    "INBOUND_PASSTHROUGH_BIND_IPV4",
    "INBOUND_PASSTHROUGH_CLUSTER",
    "PASSTHROUGH_CLUSTER",
    "PASSTHROUGH_ROUTE",
    "SDS_DEFAULT",
    "SDS_ROOTCA",
    "VIRTUAL_INBOUND",
    "VIRTUAL_OUTBOUND",
    "credential_resource",
    "gateway_http_route_name",
    "gateway_https_route_name",
    "inbound_cluster",
    "inbound_vhost",
    "listener_name",
    "outbound_cluster",
    "parse_cluster_name",
    "sni_name",
    "vhost_name",
]

VIRTUAL_OUTBOUND = "virtualOutbound"
VIRTUAL_INBOUND = "virtualInbound"
VIRTUAL_OUTBOUND_PORT = 15001
VIRTUAL_INBOUND_PORT = 15006
BLACKHOLE_CLUSTER = "BlackHoleCluster"
PASSTHROUGH_CLUSTER = "PassthroughCluster"
INBOUND_PASSTHROUGH_CLUSTER = "InboundPassthroughCluster"
PASSTHROUGH_ROUTE = "allow_any"
BLACKHOLE_ROUTE = "block_all"
INBOUND_PASSTHROUGH_BIND_IPV4 = "127.0.0.6"
INBOUND_PASSTHROUGH_BIND_IPV6 = "::6"
SDS_DEFAULT = "default"
SDS_ROOTCA = "ROOTCA"
SDS_CLUSTER = "sds-grpc"
XDS_CLUSTER = "xds-grpc"
CREDENTIAL_PREFIX = "kubernetes://"
CACERT_SUFFIX = "-cacert"


def outbound_cluster(port: int, subset: str, hostname: str) -> str:
    """`outbound|<port>|<subset>|<host>`: always four fields (Istio's BuildSubsetKey)."""
    return f"outbound|{port}|{subset}|{hostname}"


def inbound_cluster(port: int) -> str:
    return f"inbound|{port}||"


def parse_cluster_name(name: str) -> tuple[str, int, str, str] | None:
    """(direction, port, subset, host) of an Istio cluster name, None if not one."""
    parts = name.split("|")
    if len(parts) != 4 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2], parts[3]


def sni_name(port: int, subset: str, hostname: str) -> str:
    """Istio's mTLS SNI `outbound_.<port>_.<subset>_.<host>`."""
    return f"outbound_.{port}_.{subset}_.{hostname}"


def listener_name(address: str, port: int) -> str:
    return f"{address}_{port}"


def vhost_name(host: str, port: int) -> str:
    """`host:port` as net.JoinHostPort writes it (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def inbound_vhost(port: int) -> str:
    return f"inbound|http|{port}"


def gateway_http_route_name(port: int, bind: str = "") -> str:
    return f"http.{port}" + (f".{bind}" if bind else "")


def gateway_https_route_name(
    port: int, port_name: str, gateway: str, namespace: str, bind: str = ""
) -> str:
    return f"https.{port}.{port_name}.{gateway}.{namespace}" + (f".{bind}" if bind else "")


def credential_resource(credential_name: str, cacert: bool = False) -> str:
    """SDS name of a gateway credential: `kubernetes://<name>` (and `-cacert`)."""
    return CREDENTIAL_PREFIX + credential_name + (CACERT_SUFFIX if cacert else "")

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
    "WASM_FETCH_CLUSTER",
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
# The agent's Wasm module fetcher (agent/wasm_fetch.py), a bootstrap cluster on a local socket:
# http(s) WasmPlugin modules reach Envoy through it.
WASM_FETCH_CLUSTER = "wasm-fetch"
CREDENTIAL_PREFIX = "kubernetes://"
CACERT_SUFFIX = "-cacert"


def outbound_cluster(port: int, subset: str, hostname: str) -> str:
    """`outbound|<port>|<subset>|<host>`: always four fields (Istio's BuildSubsetKey)."""
    return f"outbound|{port}|{subset}|{hostname}"


def inbound_cluster(port: int) -> str:
    return f"inbound|{port}||"


def parse_cluster_name(name: str) -> tuple[str, int, str, str] | None:
    """(direction, port, subset, host) of an Istio cluster name, in either the
    `outbound|port|subset|host` or the SNI `outbound_.port_.subset_.host` form."""
    parts = name.split("|")
    if len(parts) != 4:
        parts = name.split("_.", 3)
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


# --- Route names (appended by the RDS builders) ---

DEFAULT_ROUTE = "default"  # the route of a service without a VirtualService
UNKNOWN_SERVICE_CLUSTER = "UnknownService"  # a destination with an empty host


def trace_operation(host: str, port: int) -> str:
    """Decorator operation of a default route: `<host>:<port>/*` (Istio's TraceOperation)."""
    return f"{host}:{port}/*"


def config_path(
    kind: str, namespace: str, name: str, group: str = "networking.istio.io", version: str = "v1"
) -> str:
    """Provenance under the `istio` metadata key: `/apis/<group>/<version>/namespaces/<ns>/
    <kebab-kind>/<name>`, e.g. `.../virtual-service/reviews`."""
    kebab = "".join(f"-{c.lower()}" if c.isupper() else c for c in kind).lstrip("-")
    return f"/apis/{group}/{version}/namespaces/{namespace}/{kebab}/{name}"


__all__ += ["DEFAULT_ROUTE", "UNKNOWN_SERVICE_CLUSTER", "config_path", "trace_operation"]


# Filter chain names on the sidecar's capture listeners (Istio's pilot/pkg/model/listener.go).
VIRTUAL_OUTBOUND_CATCHALL_TCP = "virtualOutbound-catchall-tcp"
VIRTUAL_OUTBOUND_BLACKHOLE = "virtualOutbound-blackhole"
VIRTUAL_INBOUND_CATCHALL_HTTP = "virtualInbound-catchall-http"
VIRTUAL_INBOUND_BLACKHOLE = "virtualInbound-blackhole"
# The default filter chain of per-port outbound listeners (unmatched traffic).
PASSTHROUGH_FILTER_CHAIN = "PassthroughFilterChain"
# Istio ends HCM stat prefixes with ";" (constants.StatPrefixDelimiter) so that its stats
# tag extraction can find the end of the listener part.
STAT_PREFIX_DELIMITER = ";"


def sniffed_route_name(hostname: str, port: int) -> str:
    """RDS name of a protocol-sniffed service on its own VIP listener: `<host>:<port>`
    (Istio's buildSidecarOutboundHTTPListenerOpts); shared ports use `str(port)`."""
    return f"{hostname}:{port}"


def delimited_stat_prefix(prefix: str) -> str:
    return prefix + STAT_PREFIX_DELIMITER


__all__ += [
    "PASSTHROUGH_FILTER_CHAIN",
    "STAT_PREFIX_DELIMITER",
    "VIRTUAL_INBOUND_BLACKHOLE",
    "VIRTUAL_INBOUND_CATCHALL_HTTP",
    "VIRTUAL_OUTBOUND_BLACKHOLE",
    "VIRTUAL_OUTBOUND_CATCHALL_TCP",
    "delimited_stat_prefix",
    "sniffed_route_name",
]


# --- Gateway TLS and SDS names (appended by the gateway builders) ---

# credentialName prefixes Istio keeps as is (credentials.ToResourceName); others get kubernetes://.
CREDENTIAL_TYPE_PREFIXES = ("kubernetes://", "kubernetes-gateway://", "configmap://")
# `builtin://`: the gateway's own workload certificate (SDS `default` / `ROOTCA`).
BUILTIN_CREDENTIAL_PREFIX = "builtin://"


def credential_sds_name(credential_name: str) -> str:
    """Istio's credentials.ToResourceName for a Gateway/DestinationRule credentialName."""
    if credential_name.startswith(BUILTIN_CREDENTIAL_PREFIX):
        return SDS_DEFAULT
    if credential_name.startswith(CREDENTIAL_TYPE_PREFIXES):
        return credential_name
    return CREDENTIAL_PREFIX + credential_name


def file_cert_resource(cert_path: str, key_path: str) -> str:
    """SDS name the agent serves from mounted files: `file-cert:<cert>~<key>`."""
    return f"file-cert:{cert_path}~{key_path}"


def file_root_resource(ca_path: str) -> str:
    """SDS name of a mounted CA bundle: `file-root:<ca>`."""
    return f"file-root:{ca_path}"


__all__ += [
    "BUILTIN_CREDENTIAL_PREFIX",
    "CREDENTIAL_TYPE_PREFIXES",
    "credential_sds_name",
    "file_cert_resource",
    "file_root_resource",
]

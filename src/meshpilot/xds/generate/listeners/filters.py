"""Network and listener filters shared by the sidecar listener builders."""

from __future__ import annotations

import ipaddress

from envoy.config.core.v3 import address_pb2
from envoy.config.listener.v3 import listener_components_pb2 as lc_pb2
from envoy.extensions.filters.listener.http_inspector.v3 import http_inspector_pb2
from envoy.extensions.filters.listener.original_dst.v3 import original_dst_pb2
from envoy.extensions.filters.listener.original_src.v3 import original_src_pb2
from envoy.extensions.filters.listener.tls_inspector.v3 import tls_inspector_pb2
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from google.protobuf import message

from meshpilot.xds.protos import Filters, pack, u32

TPROXY_MARK = 1337  # istio-iptables' default -t, which its policy route matches

__all__ = [
    "cidr_range",
    "http_inspector",
    "network_filter",
    "original_dst",
    "original_src",
    "simple_tcp_proxy",
    "socket_address",
    "tcp_proxy_filter",
    "tls_inspector",
]


def network_filter(name: str, config: message.Message) -> lc_pb2.Filter:
    return lc_pb2.Filter(name=name, typed_config=pack(config))


def tcp_proxy_filter(proxy: tcp_proxy_pb2.TcpProxy) -> lc_pb2.Filter:
    return network_filter(Filters.TCP_PROXY, proxy)


def simple_tcp_proxy(cluster: str, stat_prefix: str | None = None) -> lc_pb2.Filter:
    """tcp_proxy to one cluster; Istio names the stats after the cluster by default."""
    return tcp_proxy_filter(
        tcp_proxy_pb2.TcpProxy(stat_prefix=stat_prefix or cluster, cluster=cluster)
    )


def _listener_filter(name: str, config: message.Message) -> lc_pb2.ListenerFilter:
    return lc_pb2.ListenerFilter(name=name, typed_config=pack(config))


def original_dst() -> lc_pb2.ListenerFilter:
    return _listener_filter(Filters.ORIGINAL_DST, original_dst_pb2.OriginalDst())


def original_src(mark: int = TPROXY_MARK) -> lc_pb2.ListenerFilter:
    """TPROXY: the upstream connection to the app keeps the caller's address, marked so
    that the app's replies route back to Envoy (Istio's xdsfilters.OriginalSrc)."""
    return _listener_filter(Filters.ORIGINAL_SRC, original_src_pb2.OriginalSrc(mark=mark))


def tls_inspector() -> lc_pb2.ListenerFilter:
    return _listener_filter(Filters.TLS_INSPECTOR, tls_inspector_pb2.TlsInspector())


def http_inspector() -> lc_pb2.ListenerFilter:
    return _listener_filter(Filters.HTTP_INSPECTOR, http_inspector_pb2.HttpInspector())


def socket_address(address: str, port: int) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address=address, port_value=port)
    )


def cidr_range(text: str) -> address_pb2.CidrRange | None:
    """`10.0.0.0/8` or a bare IP (a /32 or /128), as Istio's ConvertAddressToCidr keeps it:
    the address as written, not masked. None when `text` is not an address."""
    try:
        iface = ipaddress.ip_interface(text.strip())
    except ValueError:
        return None
    return address_pb2.CidrRange(
        address_prefix=str(iface.ip), prefix_len=u32(iface.network.prefixlen)
    )

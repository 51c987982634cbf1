"""MergedGateway: the Gateway servers that apply to one gateway proxy, merged per port.

Istio's `PushContext.mergeGateways` and `model.mergeGateways` (pilot/pkg/model/gateway.go):

- A Gateway applies to a proxy when its selector is a subset of the proxy pod's labels, or when
  it has no selector. Gateways in every namespace are considered (PILOT_SCOPE_GATEWAY_TO_NAMESPACE
  is off by default), ordered by creation time, then name, then namespace.
- A server port is translated to the targetPort of the gateway workload's Service port with that
  number (the first match); with no such Service port it is used as is.
- Several servers on one port merge when all are plain-text HTTP (one `http.<targetPort>` route
  configuration), or when all use TLS (told apart by SNI). Anything else on a taken port is
  dropped, as are TLS servers whose hosts repeat on the same port and bind.

No protobuf here (DESIGN): the generators turn this into listeners and routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from meshpilot.config.istio.gateway import Gateway, Server
from meshpilot.config.objects import ConfigObject
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Endpoint, Protocol, Service, parse_protocol
from meshpilot.xds.names import gateway_http_route_name, gateway_https_route_name

__all__ = [
    "DISABLE_PORT_TRANSLATION_LABEL",
    "GatewayServer",
    "MergedGateway",
    "MergedServers",
    "ServerPort",
    "is_http_server",
    "is_https_terminated",
    "is_passthrough",
    "is_tcp_terminated",
    "is_tls_server",
    "merge_gateways",
    "merged_gateway_for",
    "select_gateways",
    "server_protocol",
]

# A Service with this label keeps Gateway ports untranslated (Istio's Knative workaround).
DISABLE_PORT_TRANSLATION_LABEL = "experimental.istio.io/disable-gateway-port-translation"

PASSTHROUGH_MODES = frozenset({"PASSTHROUGH", "AUTO_PASSTHROUGH"})


@dataclass(frozen=True, slots=True)
class ServerPort:
    """A listener-defining port: the translated port number, the protocol as written, the bind."""

    number: int
    protocol: str
    bind: str = ""


@dataclass(eq=False, slots=True)
class GatewayServer:
    """One server of one Gateway, as merged. Compared by identity, like Istio's *Server keys."""

    server: Server
    gateway: ConfigObject[Gateway]
    hosts: tuple[str, ...]  # `./h` -> `<ns>/h`, `*/h` -> `h`, `*/*` -> `*`
    port: int  # the translated (listener) port
    route_name: str  # RDS name; "" for servers without one
    sni_hosts: tuple[str, ...] = ()  # TLS servers: hosts without `ns/`, sorted, unique

    @property
    def gateway_name(self) -> str:
        return f"{self.gateway.namespace}/{self.gateway.name}"

    @property
    def tls_mode(self) -> str:
        return self.server.tls.mode if self.server.tls is not None else ""


@dataclass(slots=True)
class MergedServers:
    servers: list[GatewayServer] = field(default_factory=list)
    route_name: str = ""  # plain-text HTTP servers: `http.<port>`


@dataclass(slots=True)
class MergedGateway:
    server_ports: list[ServerPort] = field(default_factory=list)  # stable order
    merged_servers: dict[ServerPort, MergedServers] = field(default_factory=dict)
    servers_by_route_name: dict[str, list[GatewayServer]] = field(default_factory=dict)
    contains_auto_passthrough: bool = False

    @property
    def auto_passthrough_sni_hosts(self) -> frozenset[str]:
        return frozenset(
            h
            for ms in self.merged_servers.values()
            for s in ms.servers
            if s.tls_mode == "AUTO_PASSTHROUGH"
            for h in s.server.hosts
        )

    def all_servers(self) -> list[GatewayServer]:
        return [s for sp in self.server_ports for s in self.merged_servers[sp].servers]


def server_protocol(server: Server) -> Protocol:
    return parse_protocol(server.port.protocol)


def is_passthrough(server: Server) -> bool:
    return server.tls is not None and server.tls.mode in PASSTHROUGH_MODES


def is_tls_server(server: Server) -> bool:
    """Non-HTTP with TLS settings (termination or passthrough)."""
    return server.tls is not None and not server_protocol(server).is_http


def is_https_terminated(server: Server) -> bool:
    return (
        server_protocol(server) is Protocol.HTTPS
        and server.tls is not None
        and not is_passthrough(server)
    )


def is_http_server(server: Server) -> bool:
    """Plain HTTP, or HTTPS that the gateway terminates: served through an HCM."""
    return server_protocol(server).is_http or is_https_terminated(server)


def is_tcp_terminated(server: Server) -> bool:
    """A TCP/TLS (non-HTTP) server whose TLS the gateway terminates."""
    return is_tls_server(server) and not is_http_server(server) and not is_passthrough(server)


def select_gateways(push: PushContext, proxy: Proxy) -> list[ConfigObject[Gateway]]:
    """Gateways whose selector the proxy's labels satisfy (no selector: every gateway proxy)."""
    selected = [
        gw
        for gw in push.gateways
        if all(proxy.labels.get(k) == v for k, v in gw.model.spec.selector.items())
    ]
    return sorted(
        selected,
        key=lambda g: (g.model.metadata.creation_timestamp or "", g.name, g.namespace),
    )


def sanitize_hosts(hosts: Sequence[str], namespace: str) -> tuple[str, ...]:
    """Istio's sanitizeServerHostNamespace."""
    out = []
    for h in hosts:
        ns, sep, name = h.partition("/")
        if sep and ns == ".":
            h = f"{namespace}/{name}"
        elif sep and ns == "*":
            if name == "*":
                return ("*",)
            h = name
        out.append(h)
    return tuple(out)


def sni_hosts(hosts: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted({h.partition("/")[2] if "/" in h else h for h in hosts}))


def resolve_port(number: int, targets: Sequence[tuple[Service, Endpoint]]) -> int:
    """The targetPort of the first Service port `number` of the gateway workload, else as is
    (resolvePorts with a label-selector Gateway)."""
    for svc, ep in targets:
        if DISABLE_PORT_TRANSLATION_LABEL in svc.labels:
            continue
        if ep.service_port == number:
            return ep.port
    return number


def route_name_for(server: Server, port: int, gateway: ConfigObject[Gateway]) -> str:
    """Istio's gatewayRDSRouteName: `http.<targetPort>`; terminated HTTPS gets
    `https.<serverPort>.<portName>.<gateway>.<namespace>`; others none."""
    if server_protocol(server).is_http:
        return gateway_http_route_name(port, server.bind)
    if is_https_terminated(server):
        return gateway_https_route_name(
            server.port.number, server.port.name, gateway.name, gateway.namespace, server.bind
        )
    return ""


def _check_duplicates(hosts: Sequence[str], bind: str, known: dict[str, str]) -> bool:
    """True if a host is already taken with the same bind; else records the hosts."""
    if any(known.get(h) == bind for h in hosts if h in known):
        return True
    known.update((h, bind) for h in hosts)
    return False


@dataclass(slots=True)
class _Merger:
    out: MergedGateway = field(default_factory=MergedGateway)
    gateway_ports: set[int] = field(default_factory=set)
    plain_text: dict[int, ServerPort] = field(default_factory=dict)
    tls_binds: dict[int, set[str]] = field(default_factory=dict)
    tls_hosts: dict[int, dict[str, str]] = field(default_factory=dict)

    def add(self, gs: GatewayServer) -> None:
        server = gs.server
        if server.tls is not None:
            if _check_duplicates(gs.hosts, server.bind, self.tls_hosts.setdefault(gs.port, {})):
                return  # duplicate SNI hosts on this port and bind
            gs.sni_hosts = sni_hosts(gs.hosts)
            if server.tls.mode == "AUTO_PASSTHROUGH":
                self.out.contains_auto_passthrough = True
        sp = ServerPort(gs.port, server.port.protocol, server.bind)
        if gs.port not in self.gateway_ports:
            self._first_on_port(gs, sp)
        elif gs.port in self.plain_text:
            self._merge_plain_text(gs, sp, self.plain_text[gs.port])
        else:
            self._merge_tls(gs, sp)

    def _new_port(self, sp: ServerPort, gs: GatewayServer, route_name: str = "") -> None:
        self.out.merged_servers[sp] = MergedServers([gs], route_name)
        self.out.server_ports.append(sp)

    def _first_on_port(self, gs: GatewayServer, sp: ServerPort) -> None:
        self.gateway_ports.add(gs.port)
        if not is_tls_server(gs.server):
            self.plain_text[gs.port] = sp
        if is_http_server(gs.server):
            self.out.servers_by_route_name[gs.route_name] = [gs]
        self._new_port(sp, gs, gs.route_name)

    def _merge_plain_text(self, gs: GatewayServer, sp: ServerPort, current: ServerPort) -> None:
        new, existing = server_protocol(gs.server), parse_protocol(current.protocol)
        mergeable = (new.is_http or new is existing) and existing.is_http
        if current.bind == sp.bind and (not mergeable or not gs.route_name):
            return  # conflicting protocols on one port, or a second TCP server
        if current.bind != sp.bind:
            if sp not in self.out.merged_servers:
                self._new_port(sp, gs, gs.route_name)
            else:
                self.out.merged_servers[sp].route_name = gs.route_name
                self.out.merged_servers[sp].servers.append(gs)
        else:
            self.out.merged_servers[current].servers.append(gs)
        self.out.servers_by_route_name.setdefault(gs.route_name, []).append(gs)

    def _merge_tls(self, gs: GatewayServer, sp: ServerPort) -> None:
        if is_http_server(gs.server):
            if not gs.route_name or gs.route_name in self.out.servers_by_route_name:
                return  # HTTPS servers on one port need distinct port names
            self.out.servers_by_route_name[gs.route_name] = [gs]
        binds = self.tls_binds.setdefault(gs.port, set())
        new_bind = sp.bind not in binds
        binds.add(sp.bind)
        if gs.server.tls is None and not new_bind:
            return  # a TLS port cannot also carry a server without TLS
        if sp not in self.out.merged_servers:
            self._new_port(sp, gs)
        else:
            self.out.merged_servers[sp].servers.append(gs)


def merge_gateways(
    gateways: Sequence[ConfigObject[Gateway]], targets: Sequence[tuple[Service, Endpoint]]
) -> MergedGateway:
    merger = _Merger()
    for gw in gateways:
        for server in gw.model.spec.servers:
            hosts = sanitize_hosts(server.hosts, gw.namespace)
            port = resolve_port(server.port.number, targets)
            route_name = route_name_for(server, port, gw)
            merger.add(GatewayServer(server, gw, hosts, port, route_name))
    return merger.out


def merged_gateway_for(push: PushContext, proxy: Proxy) -> MergedGateway | None:
    """The merged gateway of a gateway proxy; None when no Gateway selects it. Replicas of a
    gateway share it: it depends on the pod's labels (selectors) and IPs (target ports)."""
    memo = push.memo.setdefault("merged_gateway", {})
    assert isinstance(memo, dict)
    key = (proxy.namespace, frozenset(proxy.labels.items()), proxy.ip_addresses)
    if key not in memo:
        gateways = select_gateways(push, proxy)
        memo[key] = merge_gateways(gateways, push.service_targets(proxy)) if gateways else None
    found: MergedGateway | None = memo[key]
    return found

"""The outbound walk: from the app's connect() through the source proxy's listener, chain,
route and cluster to an endpoint; the destination's inbound side is in inbound.py."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.explain.chains import Connection, find_listener, match_chain
from meshpilot.explain.cluster import EndpointView, view_cluster
from meshpilot.explain.http_hops import walk_http
from meshpilot.explain.inbound import walk_inbound
from meshpilot.explain.request import ExplainError, Request
from meshpilot.explain.result import Explanation, Outcome
from meshpilot.explain.scene import Scene, Workload
from meshpilot.explain.trail import Trail, network_filter
from meshpilot.xds.output import ProxyConfig

__all__ = ["explain"]

VIRTUAL_OUTBOUND = "virtualOutbound"
# Flags the source proxy sets itself when its upstream connection fails or is closed.
_CONNECTION_FLAGS = frozenset({"UC", "UF", "URX"})


def explain(source: Workload, request: Request, scene: Scene) -> Explanation:
    """Walk `request` from `source`'s proxy to the destination app, hop by hop."""
    if source.config is None:
        raise ExplainError(f"{source.name} runs no proxy: nothing to explain")
    walk = _Outbound(source, request, scene, Trail())
    outcome = walk.run()
    return Explanation(
        source.name,
        source.proxy_type,
        request,
        tuple(walk.trail.hops),
        outcome,
        tuple(walk.notes or ()),
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(slots=True)
class _Outbound:
    source: Workload
    request: Request
    scene: Scene
    trail: Trail
    notes: list[str] = field(default_factory=list)

    @property
    def _config(self) -> ProxyConfig:
        assert self.source.config is not None
        return self.source.config

    def run(self) -> Outcome:
        req = self.request
        if self.source.proxy_type == "router":
            port = self.source.port_map.get(req.port, req.port)
            listener = find_listener(self._config.listeners, "0.0.0.0", port)
            dest_ip: str | None = self.source.ip
            if listener is None:
                return self._refused(port)
        else:
            dest_ip = (
                req.host
                if _is_ip(req.host)
                else self.scene.resolve(req.host, self.source.namespace)
            )
            port = req.port
            bypass = self._capture(dest_ip or "", port)
            if bypass is not None:
                return bypass
            listener = self._virtual_outbound(dest_ip or "", port)
            if listener is None:
                return self._refused(15001)
        return self._listener(listener, dest_ip or "", port)

    def _capture(self, ip: str, port: int) -> Outcome | None:
        ann = self.source.annotations
        excluded_ports = _ints(ann.get("traffic.sidecar.istio.io/excludeOutboundPorts", ""))
        excluded_ranges = _split(ann.get("traffic.sidecar.istio.io/excludeOutboundIPRanges", ""))
        included = ann.get("traffic.sidecar.istio.io/includeOutboundIPRanges", "*") or "*"
        why, key = "", ""
        if port in excluded_ports:
            why, key = f"port {port} is in", "excludeOutboundPorts"
        elif ip and _in_any(ip, excluded_ranges):
            why, key = f"{ip} is in", "excludeOutboundIPRanges"
        elif ip and included != "*" and not _in_any(ip, _split(included)):
            why, key = f"{ip} is outside", "includeOutboundIPRanges"
        annotation = f"traffic.sidecar.istio.io/{key}"
        why = f"{why} {annotation}" if why else ""
        path = ("metadata", "annotations", annotation) if key else ()
        pod = self.scene.index.ref_pod(self.source, path)
        if why:
            self.trail.add("capture", "iptables ISTIO_OUTPUT", f"not captured: {why}", (), (pod,))
            return Outcome(
                True,
                None,
                "",
                f"the app connects to {ip}:{port} directly, bypassing the sidecar",
                destination=f"{ip}:{port}",
            )
        target = f"{ip or self.request.host}:{port}"
        self.trail.add(
            "capture",
            "iptables ISTIO_OUTPUT",
            f"{target} redirected to the sidecar on 15001 (iptables REDIRECT)",
            (f"resolved {self.request.host} to {ip}",)
            if ip and ip != self.request.host
            else ()
            if ip
            else (f"{self.request.host} resolves to an address outside the mesh registry",),
            (pod,),
        )
        return None

    def _virtual_outbound(self, ip: str, port: int) -> listener_pb2.Listener | None:
        listeners = self._config.listeners
        virtual = next((ln for ln in listeners if ln.name == VIRTUAL_OUTBOUND), None)
        target = [ln for ln in listeners if ln.name != VIRTUAL_OUTBOUND]
        found = find_listener(target, ip, port)
        if virtual is not None:
            handed = (
                f"hands the connection to {found.name} (original destination {ip or '?'}:{port})"
                if found
                else f"no listener for {ip or '?'}:{port}: its own chains take it"
            )
            self.trail.add(
                "listener", VIRTUAL_OUTBOUND, f"virtualOutbound (0.0.0.0:15001) {handed}"
            )
        return found or virtual

    def _refused(self, port: int) -> Outcome:
        self.trail.add("listener", "", f"no listener on port {port}: the connection is refused")
        return Outcome(False, None, "", f"no listener on port {port}", dies_at="listener")

    def _listener(
        self, listener: listener_pb2.Listener, ip: str, port: int, conn: Connection | None = None
    ) -> Outcome:
        req = self.request
        sni = req.host if req.is_tls else ""
        alpn = (
            ("http/1.1",) if req.is_http else (("h2", "http/1.1") if req.scheme == "https" else ())
        )
        conn = conn or Connection(
            ip or "0.0.0.0", port, sni, "tls" if req.is_tls else "raw_buffer", alpn, self.source.ip
        )
        if listener.name != VIRTUAL_OUTBOUND:
            sock = listener.address.socket_address
            self.trail.add(
                "listener",
                listener.name,
                f"listener {sock.address}:{sock.port_value} takes the connection",
            )
        choice = match_chain(listener, conn)
        if choice.chain is None:
            self.trail.add(
                "filter_chain",
                listener.name,
                "no filter chain matches: the connection is closed",
                choice.reasons,
            )
            return Outcome(False, None, "", "no filter chain matches", dies_at="filter_chain")
        gateway = self.source.gateways.get(self.request.port, ())
        self.trail.add(
            "filter_chain",
            choice.name or "(unnamed)",
            "the default chain" if choice.is_default else "filter chain matched",
            choice.reasons or ("the only chain",),
            list(gateway),
        )
        terminal = network_filter(choice.chain)
        if isinstance(terminal, hcm_pb2.HttpConnectionManager):
            return walk_http(self, terminal)
        if terminal is None:
            return Outcome(
                False, None, "", "the chain has no terminal filter", dies_at="filter_chain"
            )
        clusters = [(c.name, c.weight) for c in terminal.weighted_clusters.clusters] or [
            (terminal.cluster, 1)
        ]
        details = [f"weight {w} -> {c}" for c, w in clusters] if len(clusters) > 1 else []
        self.trail.add("tcp_proxy", terminal.stat_prefix, f"tcp_proxy to {clusters[0][0]}", details)
        return self.to_cluster(max(clusters, key=lambda c: c[1])[0], http=False)

    def to_cluster(self, name: str, http: bool) -> Outcome:
        """The cluster hop, its endpoints, then the destination's inbound side."""
        if name == "BlackHoleCluster":
            self.trail.add(
                "cluster",
                name,
                "BlackHoleCluster: the mesh is REGISTRY_ONLY and the host is not in the registry",
            )
            return Outcome(
                False,
                502 if http else None,
                name,
                "outboundTrafficPolicy REGISTRY_ONLY: BlackHoleCluster drops it",
                dies_at="cluster",
            )
        if name == "PassthroughCluster":
            self.trail.add(
                "cluster",
                name,
                "PassthroughCluster: forwarded to the original destination (ALLOW_ANY)",
            )
            dest = f"{self.request.host}:{self.request.port}"
            return Outcome(
                True, None, name, "passed through to the original destination", destination=dest
            )
        cluster = next((c for c in self._config.clusters if c.name == name), None)
        if cluster is None:
            self.trail.add("cluster", name, "the route names a cluster the proxy does not have")
            return Outcome(
                False,
                503 if http else None,
                name,
                "cluster not found (NC)",
                dies_at="cluster",
                flags="NC",
            )
        cla = next((e for e in self._config.endpoints if e.cluster_name == name), None)
        view = view_cluster(cluster, cla, self.scene.pods_by_ip)
        dr = self.scene.index.rule_ref(view.config, view.subset)
        self.trail.add(
            "cluster",
            name,
            f"cluster {name}",
            view.details,
            (dr, self.scene.index.service_ref(view.service)),
        )
        healthy = [e for e in view.endpoints if e.health in ("HEALTHY", "UNKNOWN")]
        lines = [_endpoint_text(e) for e in view.endpoints]
        if not healthy:
            self.trail.add("endpoints", name, "no healthy endpoint", lines)
            return Outcome(
                False,
                503 if http else None,
                name,
                "no healthy upstream (UH)",
                dies_at="endpoints",
                flags="UH",
            )
        chosen = healthy[0]
        self.trail.add(
            "endpoints",
            name,
            f"{len(healthy)} healthy endpoint(s); following {chosen.address}:{chosen.port}",
            lines,
        )
        if view.kind in ("STRICT_DNS", "LOGICAL_DNS") or not _is_ip(chosen.address):
            return Outcome(
                True,
                None,
                name,
                "sent to the resolved host",
                destination=f"{chosen.address}:{chosen.port}",
            )
        nxt = self.scene.workload(chosen.address)
        if nxt is not None and nxt.proxy_type == "router" and nxt.config is not None:
            return self._into_gateway(nxt, chosen, view.sni, name, http)
        return walk_inbound(
            self.scene, self.source, self.request if http else None, chosen, name, self.trail
        )

    def _into_gateway(
        self, dest: Workload, ep: EndpointView, sni: str, cluster: str, http: bool
    ) -> Outcome:
        """An egress (or ingress) gateway as the next hop: walk its own config onwards."""
        assert dest.config is not None
        trail = Trail("gateway", self.trail.hops)
        nested = _Outbound(dest, self.request, self.scene, trail, self.notes)
        listener = find_listener(dest.config.listeners, "0.0.0.0", ep.port)
        if listener is None:
            trail.add("listener", "", f"{dest.name} has no listener on {ep.port}: refused")
            why = f"{dest.name} has no listener on port {ep.port}"
            return Outcome(
                False, 503 if http else None, cluster, why, dies_at="listener", flags="UF"
            )
        alpn = ("istio-peer-exchange", "istio") if ep.mtls else (("http/1.1",) if http else ())
        transport = "tls" if sni else "raw_buffer"
        conn = Connection(ep.address, ep.port, sni, transport, alpn, self.source.ip)
        out = nested._listener(listener, ep.address, ep.port, conn)
        # %UPSTREAM_CLUSTER% of the source proxy stays the cluster to the gateway; an answer
        # the gateway gives (its 404, its fault) reaches the source as a response: no flag.
        onwards = f"; {dest.name} sends it to {out.cluster}" if out.cluster else ""
        flags = out.flags if out.flags in _CONNECTION_FLAGS else ""
        return replace(out, cluster=cluster, reason=f"{out.reason}{onwards}", flags=flags)


def _endpoint_text(e: EndpointView) -> str:
    pod = f" pod {e.pod}" if e.pod else ""
    loc = f" locality {e.locality}" if e.locality else ""
    tls = " mTLS" if e.mtls else ""
    return f"{e.address}:{e.port}{pod}{loc} {e.health}{tls}"


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _ints(text: str) -> set[int]:
    return {int(t) for t in _split(text) if t.isdigit()}


def _in_any(ip: str, cidrs: list[str]) -> bool:
    addr = ipaddress.ip_address(ip)
    for cidr in cidrs:
        try:
            if addr in ipaddress.ip_network(cidr, strict=False):
                return True
        except ValueError:
            continue
    return False

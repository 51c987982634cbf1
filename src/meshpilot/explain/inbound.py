"""The destination's side: its capture, the virtualInbound chain its PeerAuthentication mode
leaves for this connection, RBAC (AuthorizationPolicy), JWT, and the app's port."""

from __future__ import annotations

from envoy.config.listener.v3 import listener_components_pb2 as lc
from envoy.config.listener.v3 import listener_pb2
from envoy.config.rbac.v3 import rbac_pb2
from envoy.extensions.filters.http.jwt_authn.v3 import config_pb2 as jwt_pb2
from envoy.extensions.filters.http.rbac.v3 import rbac_pb2 as http_rbac_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.rbac.v3 import rbac_pb2 as net_rbac_pb2

from meshpilot.config.kinds import Kind
from meshpilot.explain.chains import Connection, find_listener, match_chain
from meshpilot.explain.cluster import EndpointView
from meshpilot.explain.http_hops import route_config_of
from meshpilot.explain.rbac import Peer, RbacVerdict, evaluate_rbac
from meshpilot.explain.request import Request
from meshpilot.explain.result import ObjectRef, Outcome
from meshpilot.explain.route_match import match_route, match_vhost
from meshpilot.explain.scene import Scene, Workload
from meshpilot.explain.sources import ObjectIndex
from meshpilot.explain.trail import Trail, network_filter

__all__ = ["walk_inbound"]

HTTP_RBAC = "envoy.filters.http.rbac"
NET_RBAC = "envoy.filters.network.rbac"
JWT = "envoy.filters.http.jwt_authn"
# What the caller's Envoy logs when no inbound chain takes its connection: plaintext is
# accepted by the kernel, then closed (UC); mTLS fails its handshake (UF).
_REFUSED_FLAGS = {False: "UC", True: "UF"}


def walk_inbound(
    scene: Scene,
    source: Workload,
    request: Request | None,
    ep: EndpointView,
    cluster: str,
    outbound: Trail,
) -> Outcome:
    dest = scene.workload(ep.address)
    where = f"{ep.pod or ep.address}:{ep.port}"
    if dest is None or dest.config is None or dest.proxy_type != "sidecar":
        why = "no proxy" if dest is None or dest.config is None else "a gateway"
        return Outcome(
            True, None, cluster, f"reaches {where} ({why} on that side)", destination=where
        )
    trail = Trail("inbound", outbound.hops)
    pod = scene.index.ref_pod(dest)
    excluded = _ints(dest.annotations.get("traffic.sidecar.istio.io/excludeInboundPorts", ""))
    if ep.port in excluded:
        trail.add(
            "capture",
            "iptables ISTIO_INBOUND",
            f"port {ep.port} is in excludeInboundPorts: straight to the app",
            (),
            (pod,),
        )
        return Outcome(
            True, None, cluster, f"delivered to {where}, bypassing its sidecar", destination=where
        )
    trail.add(
        "capture",
        "iptables ISTIO_INBOUND",
        f"{dest.name}: {ep.address}:{ep.port} redirected to its sidecar on 15006",
        (),
        (pod,),
    )
    listener = next((ln for ln in dest.config.listeners if ln.name == "virtualInbound"), None)
    listener = listener or find_listener(dest.config.listeners, ep.address, ep.port)
    if listener is None:
        return Outcome(
            False,
            503 if request else None,
            cluster,
            "the destination proxy has no inbound listener",
            dies_at="inbound_listener",
        )
    alpn = ("istio-peer-exchange", "istio") if ep.mtls else (("http/1.1",) if request else ())
    conn = Connection(ep.address, ep.port, "", "tls" if ep.mtls else "raw_buffer", alpn, source.ip)
    choice = match_chain(listener, conn)
    mode = dest.mtls.for_port(ep.port).value if dest.mtls else "PERMISSIVE"
    pa = tuple(scene.index.of(p) for p in dest.mtls.sources) if dest.mtls else ()
    sent = "mTLS" if ep.mtls else "plaintext"
    if choice.chain is None or choice.chain.name == "virtualInbound-blackhole":
        trail.add(
            "inbound_chain",
            listener.name,
            f"PeerAuthentication {mode} on port {ep.port}: no chain accepts {sent}; "
            "the connection is closed",
            choice.reasons,
            pa,
        )
        return Outcome(
            False,
            503 if request else None,
            cluster,
            f"{dest.name} refuses {sent} on port {ep.port} (PeerAuthentication {mode})",
            dies_at="inbound_chain",
            flags=_REFUSED_FLAGS[ep.mtls],
        )
    tls = "mTLS, peer certificate required" if _is_tls(choice.chain) else "plaintext"
    trail.add(
        "inbound_chain",
        choice.name,
        f"chain {choice.name} ({tls}) accepts {sent}; PeerAuthentication {mode}",
        (*choice.reasons, f"plaintext accepted on port {ep.port}: {_plain(listener, ep, request)}"),
        pa,
    )
    principal = (
        f"spiffe://{scene.trust_domain}/ns/{source.namespace}/sa/{source.service_account}"
        if ep.mtls
        else ""
    )
    peer = Peer(principal, source.ip, ep.port, request)
    for f in choice.chain.filters:
        if f.name == NET_RBAC:
            net = net_rbac_pb2.RBAC()
            f.typed_config.Unpack(net)
            if not net.HasField("rules"):  # shadow (dry-run) rules only
                continue
            denied = _rbac_hop(trail, scene.index, net.rules, peer, NET_RBAC)
            if denied:
                return Outcome(
                    False,
                    503 if request else None,
                    cluster,
                    f"RBAC closes the connection: {denied}",
                    dies_at="rbac",
                    flags="UC",
                )
    terminal = network_filter(choice.chain)
    if isinstance(terminal, hcm_pb2.HttpConnectionManager) and request is not None:
        return _inbound_http(trail, scene.index, dest, terminal, peer, cluster, where)
    trail.add("app", where, f"tcp_proxy to the app on {where}")
    return Outcome(
        True, None, cluster, "reaches the app: the response is the app's", destination=where
    )


def _inbound_http(
    trail: Trail,
    index: ObjectIndex,
    dest: Workload,
    hcm: hcm_pb2.HttpConnectionManager,
    peer: Peer,
    cluster: str,
    where: str,
) -> Outcome:
    assert peer.request is not None and dest.config is not None
    for f in hcm.http_filters:
        if f.name == JWT:
            jwt = jwt_pb2.JwtAuthentication()
            f.typed_config.Unpack(jwt)
            issuers = sorted({p.issuer for p in jwt.providers.values() if p.issuer})
            trail.add(
                "jwt",
                JWT,
                "RequestAuthentication: a JWT, if present, must be valid "
                "(a request without one passes this filter; AuthorizationPolicy may require it)",
                tuple(f"issuer {i}" for i in issuers),
            )
        if f.name == HTTP_RBAC:
            cfg = http_rbac_pb2.RBAC()
            f.typed_config.Unpack(cfg)
            if not cfg.HasField("rules"):  # shadow (dry-run) rules only
                continue
            denied = _rbac_hop(trail, index, cfg.rules, peer, f.name)
            if denied:
                return Outcome(
                    False, 403, cluster, f"RBAC: access denied ({denied})", dies_at="rbac"
                )
    config = route_config_of(hcm, dest.config.routes)
    inbound_cluster = ""
    if config is not None:
        vh = match_vhost(config, peer.request)
        route = match_route(vh.vhost, peer.request).route if vh.vhost else None
        inbound_cluster = route.route.cluster if route is not None else ""
    trail.add("app", inbound_cluster or where, f"to the app on {where}")
    return Outcome(
        True, None, cluster, "reaches the app: the response is the app's", destination=where
    )


def _rbac_hop(trail: Trail, index: ObjectIndex, rules: rbac_pb2.RBAC, peer: Peer, name: str) -> str:
    """Adds the RBAC hop; returns why it denies, or ""."""
    verdict: RbacVerdict = evaluate_rbac(rules, peer)
    names = [verdict.policy] if verdict.policy else sorted(rules.policies)
    refs = [_policy_ref(index, policy) for policy in names]
    note = (
        ("it has JWT-claim conditions, taken as not met without a token",)
        if verdict.unevaluated
        else ()
    )
    state = "allows" if verdict.allowed else "denies"
    trail.add("rbac", name, f"{verdict.action} RBAC {state}: {verdict.reason}", note, refs)
    return "" if verdict.allowed else verdict.reason


def _policy_ref(index: ObjectIndex, policy: str) -> ObjectRef | None:
    """`ns[<ns>]-policy[<name>]-rule[<i>]` → the AuthorizationPolicy and its rule."""
    if not policy.startswith("ns[") or "]-policy[" not in policy:
        return None
    ns = policy[3 : policy.index("]")]
    rest = policy[policy.index("]-policy[") + 9 :]
    name = rest[: rest.index("]")]
    path: tuple[str | int, ...] = ()
    if "-rule[" in rest:
        i = rest[rest.index("-rule[") + 6 : -1]
        path = ("spec", "rules", int(i)) if i.isdigit() else ()
    return index.ref(Kind.AUTHORIZATION_POLICY, ns, name, path)


def _plain(listener: listener_pb2.Listener, ep: EndpointView, request: Request | None) -> str:
    """Whether a plaintext caller (no sidecar, or TLS disabled) would get a chain here."""
    alpn = ("http/1.1",) if request else ()
    chain = match_chain(listener, Connection(ep.address, ep.port, "", "raw_buffer", alpn)).chain
    return "yes" if chain is not None and chain.name != "virtualInbound-blackhole" else "no"


def _is_tls(chain: lc.FilterChain) -> bool:
    return chain.HasField("transport_socket") and str(chain.transport_socket.name).endswith("tls")


def _ints(text: str) -> set[int]:
    return {int(t) for t in text.split(",") if t.strip().isdigit()}

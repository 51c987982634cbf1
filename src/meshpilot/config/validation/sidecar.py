"""Sidecar: workload selector, ingress and egress listeners, outbound traffic policy (Istio's
ValidateSidecar and its helpers)."""

from __future__ import annotations

from meshpilot.config.istio.gateway import ServerTLSSettings
from meshpilot.config.istio.sidecar import (
    IstioEgressListener,
    IstioIngressListener,
    OutboundTrafficPolicy,
    Sidecar,
    SidecarPort,
)
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_enum,
    check_port,
    check_selector,
    fqdn_error,
    is_dns1123_label,
    is_ip,
    protocol_error,
    quoted,
    unix_address_error,
)
from meshpilot.config.validation.destinations import subset_name_error
from meshpilot.config.validation.gateway import check_server_tls
from meshpilot.config.validation.hostnames import namespaced_host_errors
from meshpilot.config.validation.traffic_policy import check_connection_pool

__all__ = ["validate_sidecar"]

SPEC: Path = ("spec",)
CAPTURE_MODES = ("DEFAULT", "IPTABLES", "NONE")
OUTBOUND_MODES = ("REGISTRY_ONLY", "ALLOW_ANY")
_UNIX = "unix://"
_HTTP = ("http", "http2", "http_proxy", "grpc", "grpc-web")
_LOCAL_HOSTS = ("127.0.0.1", "0.0.0.0", "::1", "::", "")


def validate_sidecar(sidecar: Sidecar, p: Problems) -> None:
    spec = sidecar.spec
    if spec.workload_selector is not None:
        check_selector(
            p, (*SPEC, "workloadSelector", "labels"), spec.workload_selector.labels, "Sidecar"
        )
    if not (
        spec.egress or spec.ingress or spec.outbound_traffic_policy or spec.inbound_connection_pool
    ):
        p.error(SPEC, "sidecar: empty configuration provided")
        return
    ports: set[int] = set()
    for index, listener in enumerate(spec.ingress):
        _check_ingress(p, (*SPEC, "ingress", index), listener, ports)
    if spec.inbound_connection_pool is not None:
        where = (*SPEC, "inboundConnectionPool")
        check_connection_pool(p, where, spec.inbound_connection_pool)
    _check_egress(p, sidecar)
    if spec.outbound_traffic_policy is not None:
        _check_outbound(p, (*SPEC, "outboundTrafficPolicy"), spec.outbound_traffic_policy)


def _check_port(p: Problems, path: Path, port: SidecarPort, *, egress: bool) -> None:
    if port.name and not is_dns1123_label(port.name):
        p.error((*path, "name"), f"invalid port name {quoted(port.name)}")
    p.add((*path, "protocol"), protocol_error(port.protocol))
    if port.target_port > 0:
        p.error((*path, "targetPort"), "targetPort has no impact on Sidecars")
    if port.number == 0 and egress:
        return  # a unix domain socket listener; its bind is checked by the caller
    check_port(p, (*path, "number"), port.number)


def _check_ingress(
    p: Problems, path: Path, listener: IstioIngressListener, ports: set[int]
) -> None:
    _check_port(p, (*path, "port"), listener.port, egress=False)
    if listener.bind and not is_ip(listener.bind):
        p.error((*path, "bind"), f"{listener.bind} is not a valid IP")
    if listener.port.number in ports:
        p.error((*path, "port", "number"), "sidecar: ports on IP bound listeners must be unique")
    ports.add(listener.port.number)
    if listener.capture_mode:
        check_enum(p, (*path, "captureMode"), listener.capture_mode, CAPTURE_MODES)
    if listener.default_endpoint:
        p.add((*path, "defaultEndpoint"), _default_endpoint_error(listener.default_endpoint))
    if listener.tls is not None:
        _check_ingress_tls(p, (*path, "tls"), listener.tls)
    if listener.connection_pool is not None:
        where = (*path, "connectionPool")
        pool = listener.connection_pool
        check_connection_pool(p, where, pool)
        protocol = listener.port.protocol
        if pool is not None and pool.http is not None and protocol.lower() not in _HTTP:
            p.warning(
                (*where, "http"),
                f"HTTP connection pool settings on port {listener.port.number}, whose protocol "
                f"{quoted(protocol)} is not HTTP; only the TCP settings apply",
            )


def _default_endpoint_error(endpoint: str) -> str | None:
    if endpoint.startswith(_UNIX):
        return unix_address_error(endpoint.removeprefix(_UNIX))
    host, colon, port = endpoint.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not colon or host not in _LOCAL_HOSTS:
        return (
            "sidecar: defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, "
            "[::1]:<port>, [::]:<port>, unix://<path> or unset"
        )
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"sidecar: defaultEndpoint port {quoted(port)} must be a number in 1..65535"
    return None


def _check_ingress_tls(p: Problems, path: Path, tls: ServerTLSSettings) -> None:
    for field, value in (
        ("subjectAltNames", tls.subject_alt_names),
        ("httpsRedirect", tls.https_redirect),
        ("credentialName", tls.credential_name),
    ):
        if value:
            p.error((*path, field), f"sidecar: {field} is not supported in ingress tls")
    if tls.mode in ("ISTIO_MUTUAL", "AUTO_PASSTHROUGH"):
        p.error((*path, "mode"), f"cannot set mode to {tls.mode} in sidecar ingress tls")
    check_server_tls(p, path, tls)


def _check_egress(p: Problems, sidecar: Sidecar) -> None:
    listeners = sidecar.spec.egress
    ports: set[int] = set()
    sockets: set[str] = set()
    for index, listener in enumerate(listeners):
        where = (*SPEC, "egress", index)
        if listener.port is None:
            if index != len(listeners) - 1:
                p.error(where, "sidecar: the egress listener with empty port should be the last")
        else:
            _check_egress_port(p, where, listener, ports, sockets)
        _check_egress_hosts(p, where, listener, sidecar.metadata.namespace or "default")


def _check_egress_port(
    p: Problems, path: Path, listener: IstioEgressListener, ports: set[int], sockets: set[str]
) -> None:
    port, bind = listener.port, listener.bind
    assert port is not None
    _check_port(p, (*path, "port"), port, egress=True)
    if listener.capture_mode:
        check_enum(p, (*path, "captureMode"), listener.capture_mode, CAPTURE_MODES)
    if port.number == 0:
        if not bind.startswith(_UNIX):
            p.error(
                (*path, "bind"), "sidecar: ports with 0 value must have a unix domain socket bind"
            )
        else:
            p.add((*path, "bind"), unix_address_error(bind.removeprefix(_UNIX)))
        if listener.capture_mode not in ("", "DEFAULT", "NONE"):
            p.error(
                (*path, "captureMode"), "sidecar: captureMode must be DEFAULT/NONE for unix sockets"
            )
        if bind in sockets:
            p.error(
                (*path, "bind"), "sidecar: unix domain socket values for listeners must be unique"
            )
        sockets.add(bind)
        return
    if bind and not is_ip(bind):
        p.error((*path, "bind"), f"{bind} is not a valid IP")
    if port.number in ports:
        p.error((*path, "port", "number"), "sidecar: ports on IP bound listeners must be unique")
    ports.add(port.number)


def _check_egress_hosts(
    p: Problems, path: Path, listener: IstioEgressListener, namespace: str
) -> None:
    if not listener.hosts:
        p.error((*path, "hosts"), "sidecar: egress listener must contain at least one host")
    seen: dict[str, set[str]] = {}
    for index, host in enumerate(listener.hosts):
        where = (*path, "hosts", index)
        for message in namespaced_host_errors(host, gateway=False):
            p.error(where, message)
        ns, slash, name = host.partition("/")
        if not slash:
            continue
        names = seen.setdefault(namespace if ns == "." else ns, set())
        if name in names or "*" in names or (name == "*" and names):
            p.warning(where, f"duplicated egress host: {host}")
        names.add(name)
    if "*" in seen.get("*", set()) and len(seen) > 1:
        p.warning((*path, "hosts"), "`*/*` selects every service; no other hosts are needed")


def _check_outbound(p: Problems, path: Path, policy: OutboundTrafficPolicy) -> None:
    check_enum(p, (*path, "mode"), policy.mode, OUTBOUND_MODES)
    if policy.egress_proxy is None:
        return
    where = (*path, "egressProxy")
    if policy.mode != "ALLOW_ANY":
        p.error(where, "sidecar: egressProxy must be set only with ALLOW_ANY outbound traffic mode")
        return
    proxy = policy.egress_proxy
    p.add((*where, "host"), fqdn_error(proxy.host))
    if proxy.port is None:
        p.error((*where, "port"), "sidecar: egressProxy port is required")
    else:
        check_port(p, (*where, "port", "number"), proxy.port.number)
    if proxy.subset:
        p.add((*where, "subset"), subset_name_error(proxy.subset))

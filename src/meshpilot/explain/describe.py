"""`meshpilot explain --pod`: what `istioctl x describe pod` prints, and what users found it
missing: the pod's services and ports, the DestinationRule subsets it belongs to, the
VirtualServices that route to it with each weight (mesh and gateways), and its mTLS mode
per port (PeerAuthentication, port-level settings included)."""

from __future__ import annotations

from typing import Any

from meshpilot.config.hosts import host_matches
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.explain.sources import ObjectIndex
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.proxy import ProxyType, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Service

__all__ = ["describe_pod"]


def describe_pod(push: PushContext, pod: ConfigObject[Pod]) -> str:
    index = ObjectIndex(push.by_key)
    labels = pod.labels
    lines = [f"Pod: {pod.name}.{pod.namespace} ({index.of(pod)})"]
    mtls = peer_authn(push).for_workload(pod.namespace, labels)
    services = [
        s
        for s in push.registry.services
        if s.namespace == pod.namespace
        and s.selector
        and all(labels.get(k) == v for k, v in s.selector.items())
    ]
    if not services:
        lines.append("   no Service selects this pod")
    proxy = proxy_from_pod(pod, ProxyType.SIDECAR, push.domain_suffix)
    for svc in services:
        lines.append(f"Service: {svc.hostname}")
        for port in svc.ports:
            target = port.target_port or port.port
            lines.append(
                f"   Port: {port.name} {port.port}/{port.protocol} targets pod port {target}; "
                f"mTLS {mtls.for_port(target).value}"
            )
        bound = push.destination_rule(proxy, svc)
        if bound is not None:
            lines.extend(_destination_rule(index, bound.obj, labels))
        lines.extend(_virtual_services(push, index, svc, labels))
    sources = ", ".join(str(index.of(p)) for p in mtls.sources) or "none (mesh default)"
    lines.append(f"PeerAuthentication: {mtls.mode.value} (from {sources})")
    for number, mode in sorted(mtls.per_port.items()):
        lines.append(f"   port {number}: {mode.value} (portLevelMtls)")
    return "\n".join(lines)


def _destination_rule(
    index: ObjectIndex, dr: ConfigObject[Any], labels: dict[str, str]
) -> list[str]:
    out = [f"   DestinationRule: {index.of(dr)}"]
    for i, subset in enumerate(dr.model.spec.subsets or []):
        if all(labels.get(k) == v for k, v in subset.labels.items()):
            out.append(
                f"      matching subset: {subset.name} ({index.of(dr, ('spec', 'subsets', i))})"
            )
    policy = dr.model.spec.traffic_policy
    if policy is not None and policy.tls is not None:
        out.append(f"      TLS: {policy.tls.mode}")
    return out


def _virtual_services(
    push: PushContext, index: ObjectIndex, svc: Service, labels: dict[str, str]
) -> list[str]:
    out: list[str] = []
    short = svc.hostname.split(".")[0]
    for vs in push.of_kind(Kind.VIRTUAL_SERVICE):
        spec = vs.model.spec
        if not any(_same_host(h, svc, vs.namespace) for h in [*spec.hosts, *_dest_hosts(spec)]):
            continue
        gateways = [g for g in spec.gateways if g != "mesh"]
        where = f" via gateways {', '.join(gateways)}" if gateways else ""
        out.append(f"   VirtualService: {index.of(vs)}{where}")
        for name in gateways:
            out.extend(_exposure(index, name, vs.namespace, list(spec.hosts)))
        for i, route in enumerate(spec.http):
            dests = [
                d for d in route.route or [] if _same_host(d.destination.host, svc, vs.namespace)
            ]
            if not dests:
                continue
            total = sum(d.weight for d in route.route) or 100
            parts = [
                f"{d.destination.subset or short} {100 * (d.weight or total) / total:g}%"
                for d in dests
            ]
            cond = "when matched" if route.match else "otherwise"
            name = f" {route.name}" if route.name else ""
            out.append(f"      http[{i}]{name} {cond}: {', '.join(parts)}")
    return out


def _exposure(index: ObjectIndex, ref: str, namespace: str, hosts: list[str]) -> list[str]:
    """The Gateway servers a VirtualService is bound to: how the pod is exposed."""
    ns, _, name = ref.rpartition("/")
    gw = index.get(Kind.GATEWAY, ns or namespace, name)
    if gw is None:
        return [f"      exposed on Gateway {ref}: no such Gateway (IST0101)"]
    out = []
    for i, server in enumerate(gw.model.spec.servers or []):
        shared = [h for h in hosts if any(_host_in(h, s) for s in server.hosts)]
        if shared:
            tls = _tls_text(server)
            port = f"{server.port.number}/{server.port.protocol}"
            refs = index.of(gw, ("spec", "servers", i))
            out.append(f"      exposed on {port}{tls} as {', '.join(shared)} ({refs})")
    return out


def _tls_text(server: Any) -> str:
    if server.tls is None:
        return ""
    if server.tls.https_redirect:
        return " (redirects to HTTPS)"
    protocol = str(server.port.protocol).upper()
    return f" TLS {server.tls.mode}" if protocol in ("HTTPS", "TLS") else ""


def _host_in(host: str, server_host: str) -> bool:
    """A Gateway server host (`ns/host`, `*/host`, `*.suffix`) covers `host`."""
    pattern = server_host.split("/", 1)[-1]
    return pattern == "*" or host_matches(pattern, host) or host_matches(host, pattern)


def _dest_hosts(spec: Any) -> list[str]:
    return [d.destination.host for r in spec.http for d in (r.route or [])]


def _same_host(host: str, svc: Service, namespace: str) -> bool:
    if "." not in host:
        host = f"{host}.{namespace}.svc.cluster.local"
    return host_matches(host, svc.hostname) if "*" in host else host == svc.hostname

"""The scene from a PushContext: each workload's config is generated when the walk first
reaches it (the source always; a destination only when traffic gets there)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.explain.request import ExplainError
from meshpilot.explain.result import ObjectRef
from meshpilot.explain.scene import Scene, Workload
from meshpilot.explain.sources import ObjectIndex
from meshpilot.model.indexes.authn import peer_authn
from meshpilot.model.pod_proxy_type import AmbiguousProxyTypeError, infer_proxy_type
from meshpilot.model.proxy import ProxyType, as_verified, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.registry.workloads import tls_mode_from_labels
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.output import ProxyConfig

__all__ = ["ConfigSource", "build_scene", "generated", "workload_of"]


def _has_proxy(pod: ConfigObject[Pod], kind: ProxyType) -> bool:
    return kind is ProxyType.ROUTER or tls_mode_from_labels(pod.labels) == "istio"


# Where a proxy's config comes from: generated here (offline), or fetched (live).
ConfigSource = Callable[[ConfigObject[Pod], ProxyType], ProxyConfig]


def generated(push: PushContext) -> ConfigSource:
    def config_for(pod: ConfigObject[Pod], kind: ProxyType) -> ProxyConfig:
        proxy = as_verified(proxy_from_pod(pod, kind, push.domain_suffix))
        return generate_proxy_config(push, proxy)

    return config_for


def workload_of(
    push: PushContext,
    pod: ConfigObject[Pod],
    kind: ProxyType | None = None,
    config_for: ConfigSource | None = None,
) -> Workload:
    """One pod as the walk sees it, with its proxy's config (generated unless given)."""
    try:
        kind = kind or infer_proxy_type(pod)
    except AmbiguousProxyTypeError as exc:
        raise ExplainError(str(exc)) from exc
    proxy = proxy_from_pod(pod, kind, push.domain_suffix)
    source = config_for or generated(push)
    config = source(pod, kind) if _has_proxy(pod, kind) else None
    index = ObjectIndex(push.by_key)
    return Workload(
        name=f"{pod.name}.{pod.namespace}",
        namespace=pod.namespace,
        ip=proxy.ip_addresses[0] if proxy.ip_addresses else "",
        service_account=proxy.service_account,
        proxy_type=str(kind) if config is not None else "",
        config=config,
        annotations=dict(pod.model.metadata.annotations),
        port_map=_port_map(push, pod) if kind is ProxyType.ROUTER else {},
        gateways=_gateways(push, index, pod) if kind is ProxyType.ROUTER else {},
        mtls=peer_authn(push).for_workload(pod.namespace, pod.labels),
    )


def build_scene(push: PushContext, config_for: ConfigSource | None = None) -> Scene:
    pods = cast(Sequence[ConfigObject[Pod]], push.of_kind(Kind.POD))
    by_ip: dict[str, ConfigObject[Pod]] = {}
    for pod in pods:
        if pod.model.status.pod_ip:
            by_ip.setdefault(pod.model.status.pod_ip, pod)
    memo: dict[str, Workload | None] = {}

    def workload(ip: str) -> Workload | None:
        if ip not in memo:
            pod = by_ip.get(ip)
            memo[ip] = workload_of(push, pod, None, config_for) if pod is not None else None
        return memo[ip]

    def resolve(host: str, namespace: str) -> str | None:
        suffix = push.domain_suffix
        names = [
            host,
            f"{host}.{namespace}.svc.{suffix}",
            f"{host}.svc.{suffix}",
            f"{host}.{suffix}",
        ]
        for name in names:
            for svc in push.registry.services_for_host(name):
                if svc.vip:
                    return svc.vip
        return None

    return Scene(
        index=ObjectIndex(push.by_key),
        pods_by_ip={ip: f"{p.name}.{p.namespace}" for ip, p in by_ip.items()},
        resolve=resolve,
        workload=workload,
    )


def _port_map(push: PushContext, pod: ConfigObject[Pod]) -> dict[int, int]:
    """Service port → target port for the services selecting the gateway pod."""
    out: dict[int, int] = {}
    for svc in push.registry.services:
        selector = svc.selector
        if svc.namespace != pod.namespace or not selector:
            continue
        if all(pod.labels.get(k) == v for k, v in selector.items()):
            for port in svc.ports:
                out.setdefault(port.port, port.target_port or port.port)
    return out


def _gateways(
    push: PushContext, index: ObjectIndex, pod: ConfigObject[Pod]
) -> dict[int, tuple[ObjectRef, ...]]:
    out: dict[int, list[ObjectRef]] = {}
    for gw in push.gateways:
        spec: Any = gw.model.spec
        selector = dict(spec.selector or {})
        if not all(pod.labels.get(k) == v for k, v in selector.items()):
            continue
        for i, server in enumerate(spec.servers or []):
            out.setdefault(server.port.number, []).append(index.of(gw, ("spec", "servers", i)))
    return {port: tuple(refs) for port, refs in out.items()}

"""The proxies of a mesh, grouped into classes that receive the same configuration.

A gateway proxy is a Pod selected by a Gateway's (non-empty) selector. A sidecar is any
other Pod that carries the injection marks (`security.istio.io/tlsMode` label or
`sidecar.istio.io/status` annotation), or every other Pod when no Pod carries them
(universal mode files often omit them); `sidecar.istio.io/inject: "false"` opts a Pod out.

Pods with the same type, namespace, labels and service account are one class: the same
Sidecar resource, Gateways, services and policies select them, so one translation stands
for all (the Istio SidecarScope idea applied to a preview).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from meshpilot.config.kinds import Kind
from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.inject.policy import injection_override
from meshpilot.model.proxy import ProxyType, as_verified, proxy_from_pod
from meshpilot.model.push_context import PushContext
from meshpilot.model.relevance import ALL_TYPES
from meshpilot.xds.generate import generate_proxy_config, generator
from meshpilot.xds.output import ProxyConfig
from meshpilot.xds.protos import TypeUrl

__all__ = ["ClassKey", "ProxyClass", "Translation", "proxy_classes", "translate_class"]

_TLS_MODE_LABEL = "security.istio.io/tlsMode"
_STATUS_ANNOTATION = "sidecar.istio.io/status"

_SECTIONS = {
    "cds": ("clusters", TypeUrl.CLUSTER),
    "eds": ("endpoints", TypeUrl.ENDPOINT),
    "lds": ("listeners", TypeUrl.LISTENER),
    "rds": ("routes", TypeUrl.ROUTE),
    "sds": ("secrets", TypeUrl.SECRET),
    "ecds": ("extension_configs", TypeUrl.EXTENSION_CONFIG),  # WasmPlugins, EXTENSION_CONFIG
}
ClassKey = tuple[str, str, tuple[tuple[str, str], ...], str]
# section (listeners, routes, ...) → resource name → config_dump form
Translation = dict[str, dict[str, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ProxyClass:
    key: ClassKey
    proxy_type: ProxyType
    pods: tuple[ConfigObject[Pod], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"{p.name}.{p.namespace}" for p in self.pods)


def _is_gateway_pod(pod: ConfigObject[Pod], push: PushContext) -> bool:
    labels = pod.labels
    return any(
        gw.model.spec.selector
        and all(labels.get(k) == v for k, v in gw.model.spec.selector.items())
        for gw in push.gateways
    )


def _marked(pod: ConfigObject[Pod]) -> bool:
    return _TLS_MODE_LABEL in pod.labels or _STATUS_ANNOTATION in pod.model.metadata.annotations


def _opted_out(pod: ConfigObject[Pod]) -> bool:
    meta = pod.model.metadata
    return injection_override(meta.labels, meta.annotations) is False


def proxy_classes(push: PushContext) -> dict[ClassKey, ProxyClass]:
    pods = cast(Sequence[ConfigObject[Pod]], push.of_kind(Kind.POD))
    gateways = [p for p in pods if _is_gateway_pod(p, push)]
    others = [p for p in pods if p not in gateways and not _opted_out(p)]
    if any(_marked(p) for p in others):
        others = [p for p in others if _marked(p)]
    grouped: dict[ClassKey, list[ConfigObject[Pod]]] = {}
    for proxy_type, members in ((ProxyType.ROUTER, gateways), (ProxyType.SIDECAR, others)):
        for pod in members:
            key: ClassKey = (
                str(proxy_type),
                pod.namespace,
                tuple(sorted(pod.labels.items())),
                pod.model.service_account_name,
            )
            grouped.setdefault(key, []).append(pod)
    return {
        key: ProxyClass(key, ProxyType(key[0]), tuple(sorted(members, key=lambda p: p.key)))
        for key, members in sorted(grouped.items())
    }


def translate_class(
    push: PushContext, klass: ProxyClass, types: frozenset[str] = ALL_TYPES
) -> Translation:
    """The configuration of the class's first Pod, by section and resource name. With only
    some xDS types (the ones a change can affect, model/relevance.py): CDS, LDS and RDS are
    generated whole (every resource, not only those a listener names), both sides alike;
    EDS and SDS need the names the other types subscribe to, so they mean a full run."""
    # As served over a verified stream: a change to its secrets shows in the preview.
    proxy = as_verified(proxy_from_pod(klass.pods[0], klass.proxy_type, push.domain_suffix))
    if types & {"eds", "sds"}:
        types = ALL_TYPES
    if types == ALL_TYPES:
        config = generate_proxy_config(push, proxy)
    else:
        config = ProxyConfig()
        for xds_type in types:
            section, type_url = _SECTIONS[xds_type]
            setattr(config, section, generator(type_url, proxy.type)(push, proxy, None))
    wanted = {_SECTIONS[t][0] for t in types}
    return {
        section: {_name(r): r for r in resources}
        for section, resources in config.to_dict().items()
        if section in wanted
    }


def _name(resource: dict[str, Any]) -> str:
    return str(resource.get("name") or resource.get("cluster_name") or "")

"""Which proxy a pod runs, sidecar or router (gateway), read from the pod as Istio writes it.

Istio runs a gateway's proxy as `pilot-agent proxy router` and a sidecar's as `proxy sidecar`
(the container args); gateway pods carry `istio: ingressgateway|egressgateway`, the
`inject.istio.io/templates: gateway` annotation of gateway injection, or the Gateway API's
`gateway.networking.k8s.io/gateway-name` label. A pod whose signs disagree is ambiguous: the
caller must say which (`--type`), rather than get one silently.
"""

from __future__ import annotations

from meshpilot.config.kube.pod import Pod
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import ProxyType

__all__ = ["AmbiguousProxyTypeError", "infer_proxy_type"]

_GATEWAY_ISTIO_LABELS = ("ingressgateway", "egressgateway")
_GATEWAY_API_LABEL = "gateway.networking.k8s.io/gateway-name"
_TEMPLATES_ANNOTATION = "inject.istio.io/templates"


class AmbiguousProxyTypeError(MeshpilotError):
    """The pod shows signs of both a sidecar and a gateway."""


def infer_proxy_type(pod: ConfigObject[Pod]) -> ProxyType:
    """router or sidecar from the pod's signs; sidecar when it shows none."""
    signs: dict[ProxyType, list[str]] = {ProxyType.SIDECAR: [], ProxyType.ROUTER: []}
    for container in [*pod.model.spec.containers, *pod.model.spec.init_containers]:
        extra = container.model_extra or {}
        words = [str(w) for w in (*(extra.get("command") or ()), *(extra.get("args") or ()))]
        for index, word in enumerate(words[:-1]):
            if word == "proxy" and words[index + 1] in (ProxyType.SIDECAR, ProxyType.ROUTER):
                kind = ProxyType(words[index + 1])
                signs[kind].append(f"its container {container.name} runs `proxy {kind}`")
    labels, annotations = pod.labels, pod.model.metadata.annotations
    if labels.get("istio") in _GATEWAY_ISTIO_LABELS:
        signs[ProxyType.ROUTER].append(f"it has the label istio={labels['istio']}")
    if _GATEWAY_API_LABEL in labels:
        signs[ProxyType.ROUTER].append(f"it has the label {_GATEWAY_API_LABEL}")
    if annotations.get(_TEMPLATES_ANNOTATION) == "gateway":
        signs[ProxyType.ROUTER].append(f"it has the annotation {_TEMPLATES_ANNOTATION}=gateway")
    if signs[ProxyType.SIDECAR] and signs[ProxyType.ROUTER]:
        reasons = "; ".join(signs[ProxyType.SIDECAR] + signs[ProxyType.ROUTER])
        raise AmbiguousProxyTypeError(
            f"cannot tell whether Pod {pod.namespace}/{pod.name} runs a sidecar or a gateway "
            f"({reasons}); say which with --type sidecar or --type router"
        )
    return ProxyType.ROUTER if signs[ProxyType.ROUTER] else ProxyType.SIDECAR

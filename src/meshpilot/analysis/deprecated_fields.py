"""IST0002 (Deprecated, Warning): fields Istio deprecated, in the objects and the installed
IstioOperators (the check `istioctl install` suggests before an upgrade, with IST0135 for
deprecated annotations in annotations.py).

    VirtualService  http[].fault.delay.percent    use percentage
                    (http[].mirrorPercent: IST0133, a schema warning, as Istio reports it)
    Sidecar         outboundTrafficPolicy.egressProxy
    IstioOperator   meshConfig.defaultConfig.tracing (and the mesh ConfigMap's)
                                                  use the Telemetry API
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.istio.sidecar import Sidecar
from meshpilot.config.istio.virtual_service import VirtualService
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.install.spec import IstioOperator
from meshpilot.model.push_context import PushContext

__all__ = ["check_deprecated_fields"]

_TRACING = "defaultConfig.tracing is deprecated; configure tracing with the Telemetry API"


def _deprecated(obj: ConfigObject[Any], path: tuple[str | int, ...], text: str) -> Diagnostic:
    return finding(obj, path, f"Deprecated: {text}", code="IST0002")


def _virtual_service(obj: ConfigObject[Any], vs: VirtualService) -> Iterator[Diagnostic]:
    for i, route in enumerate(vs.spec.http):
        delay = route.fault.delay if route.fault is not None else None
        if delay is not None and delay.percent is not None:
            path = ("spec", "http", i, "fault", "delay", "percent")
            yield _deprecated(obj, path, "fault.delay.percent is deprecated; use percentage")


def _sidecar(obj: ConfigObject[Any], sidecar: Sidecar) -> Iterator[Diagnostic]:
    policy = sidecar.spec.outbound_traffic_policy
    if policy is not None and policy.egress_proxy is not None:
        path = ("spec", "outboundTrafficPolicy", "egressProxy")
        yield _deprecated(obj, path, "outboundTrafficPolicy.egressProxy is deprecated")


def _operator(obj: ConfigObject[Any], operator: IstioOperator) -> Iterator[Diagnostic]:
    if operator.spec.mesh_config.default_config.tracing is not None:
        path = ("spec", "meshConfig", "defaultConfig", "tracing")
        yield _deprecated(obj, path, f"meshConfig.{_TRACING}")


def check_deprecated_fields(push: PushContext) -> Iterator[Diagnostic]:
    for obj in push.of_kind(Kind.VIRTUAL_SERVICE):
        if isinstance(obj.model, VirtualService):
            yield from _virtual_service(obj, obj.model)
    for obj in push.of_kind(Kind.SIDECAR):
        if isinstance(obj.model, Sidecar):
            yield from _sidecar(obj, obj.model)
    for obj in push.of_kind(Kind.ISTIO_OPERATOR):
        if isinstance(obj.model, IstioOperator):
            yield from _operator(obj, obj.model)

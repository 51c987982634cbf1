"""Telemetry providers that do nothing: a name meshConfig.extensionProviders does not define
(or that meshpilot cannot build for that section), and a tracing provider whose collector is
not a mesh service (no spans leave the proxies). Both would otherwise fail silently."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from meshpilot.analysis.findings import finding, quoted
from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kinds import Kind
from meshpilot.config.mesh_providers import ExtensionProvider
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = ["check_telemetry_providers"]

_TRACERS = ("zipkin", "datadog", "opentelemetry")


def _tracer(provider: ExtensionProvider) -> Any:
    return next((getattr(provider, k) for k in _TRACERS if getattr(provider, k)), None)


def _collector_found(push: PushContext, service: str, port: int) -> bool:
    namespace, _, host = service.rpartition("/")
    found = [s for s in push.registry.services_for_host(host) if namespace in ("", s.namespace)]
    return len(found) == 1 and any(p.port == port for p in found[0].ports)


_NOT_DEFINED = "is not {} provider of meshConfig.extensionProviders"


def _problem(push: PushContext, section: str, name: str) -> str | None:
    provider = {p.name: p for p in push.mesh.extension_providers}.get(name)
    if section == "metrics":
        if name == "prometheus":
            return None
        return f"metrics provider {quoted(name)} is not built by meshpilot (only prometheus)"
    if section == "accessLogging":
        builtin = name == "envoy" and provider is None
        if builtin or (provider is not None and provider.envoy_file_access_log is not None):
            return None
        return f"access log provider {quoted(name)} " + _NOT_DEFINED.format("an envoyFileAccessLog")
    tracer = _tracer(provider) if provider is not None else None
    if tracer is None:
        kinds = "a zipkin, datadog or opentelemetry"
        return f"tracing provider {quoted(name)} " + _NOT_DEFINED.format(kinds)
    if not _collector_found(push, tracer.service, tracer.port):
        return (
            f"tracing provider {quoted(name)}: collector {tracer.service}:{tracer.port} is "
            "not a mesh service (one namespace, that port): no spans are sent"
        )
    return None


def _check(push: PushContext, telemetry: ConfigObject[Any]) -> Iterator[Diagnostic]:
    spec = telemetry.model.spec
    for section, entries in (
        ("tracing", spec.tracing),
        ("accessLogging", spec.access_logging),
        ("metrics", spec.metrics),
    ):
        for index, entry in enumerate(entries):
            for p_index, provider in enumerate(entry.providers):
                message = _problem(push, section, provider.name)
                if message is not None:
                    path = ("spec", section, index, "providers", p_index, "name")
                    yield finding(telemetry, path, message, code="MP0013")


def check_telemetry_providers(push: PushContext) -> Iterator[Diagnostic]:
    for telemetry in push.of_kind(Kind.TELEMETRY):
        yield from _check(push, telemetry)

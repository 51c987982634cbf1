"""The HTTP connection manager's tracing, as istiod's configureTracing builds it.

Telemetry tracing (or `defaultProviders.tracing`) picks an extension provider (zipkin,
datadog, opentelemetry) whose collector is a mesh service (`ns/host` or a host found in one
namespace) reached through its outbound cluster. Without Telemetry, `enableTracing` turns
on the legacy settings of `defaultConfig.tracing`: its zipkin or datadog address, when it
names a mesh service, becomes the provider. Sampling: Telemetry's randomSamplingPercentage,
else defaultConfig.tracing.sampling, else 1% (PILOT_TRACE_SAMPLING's default). Zipkin uses
B3 headers (x-b3-traceid, x-b3-spanid, x-b3-parentspanid, x-b3-sampled) with 128-bit ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias

from envoy.config.core.v3 import grpc_service_pb2, http_service_pb2, http_uri_pb2
from envoy.config.trace.v3 import datadog_pb2, http_tracer_pb2, opentelemetry_pb2, zipkin_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.type.tracing.v3 import custom_tag_pb2
from envoy.type.v3 import percent_pb2

from meshpilot.config.istio.telemetry import CustomTag
from meshpilot.config.mesh_providers import ExtensionProvider
from meshpilot.config.mesh_telemetry import MeshCustomTag, TracingProvider
from meshpilot.model.indexes.telemetry import TracingChoice
from meshpilot.model.proxy import Proxy, ProxyType
from meshpilot.model.push_context import PushContext
from meshpilot.xds.generate.telemetry.tags import istio_tags, user_tag
from meshpilot.xds.names import outbound_cluster
from meshpilot.xds.protos import boolean, duration, pack, u32

__all__ = ["HcmTracing", "collector", "configure_default_sampling", "hcm_tracing"]

_Tracing: TypeAlias = hcm_pb2.HttpConnectionManager.Tracing
DEFAULT_SAMPLING = 1.0
# The control plane's PILOT_TRACE_SAMPLING (values.pilot.traceSampling): a setting of the
# process, as in istiod, set once by discovery before it generates anything.
_default_sampling = DEFAULT_SAMPLING
ZIPKIN_PATH = "/api/v2/spans"
DEFAULT_ZIPKIN_ADDRESS = "zipkin.istio-system:9411"
# Envoy requires an HTTP collector timeout; Istio leaves it to the user, 5 s is ours.
OTLP_TIMEOUT = 5_000_000_000


@dataclass(frozen=True, slots=True)
class HcmTracing:
    tracing: _Tracing | None = None
    use_request_id_for_trace_sampling: bool = True


def collector(push: PushContext, proxy: Proxy, service: str, port: int) -> tuple[str, str] | None:
    """(hostname, outbound cluster) of a provider's `service` (Istio's LookupCluster), when
    the proxy has that cluster: Envoy rejects a tracer whose cluster it does not know."""
    namespace, _, host = service.rpartition("/")
    found = push.registry.services_for_host(host)
    if namespace:
        found = tuple(s for s in found if s.namespace == namespace)
    if len(found) != 1 or all(p.port != port for p in found[0].ports):
        return None
    if push.proxy_scope(proxy).service(found[0].hostname) is None:
        return None
    return found[0].hostname, outbound_cluster(port, "", found[0].hostname)


def _service_name(proxy: Proxy) -> str:
    """The span's service: the proxy's node cluster, `<canonical name>.<namespace>`."""
    labels = proxy.labels
    name = (
        labels.get("service.istio.io/canonical-name")
        or labels.get("app.kubernetes.io/name")
        or labels.get("app")
        or proxy.workload_name
        or proxy.pod_name
    )
    return f"{name}.{proxy.namespace}"


def _provider(
    push: PushContext, proxy: Proxy, kind: str, spec: TracingProvider
) -> http_tracer_pb2.Tracing.Http | None:
    found = collector(push, proxy, spec.service, spec.port)
    if found is None:
        return None
    hostname, cluster = found
    if kind == "zipkin":
        config = pack(
            zipkin_pb2.ZipkinConfig(
                collector_cluster=cluster,
                collector_endpoint=spec.path or ZIPKIN_PATH,
                collector_hostname=hostname,
                collector_endpoint_version=zipkin_pb2.ZipkinConfig.HTTP_JSON,
                trace_id_128bit=True,
                shared_span_context=boolean(False),
                trace_context_option=zipkin_pb2.ZipkinConfig.USE_B3,
            )
        )
        return http_tracer_pb2.Tracing.Http(name="envoy.tracers.zipkin", typed_config=config)
    if kind == "datadog":
        config = pack(
            datadog_pb2.DatadogConfig(
                collector_cluster=cluster,
                service_name=_service_name(proxy),
                collector_hostname=hostname,
            )
        )
        return http_tracer_pb2.Tracing.Http(name="envoy.tracers.datadog", typed_config=config)
    otel = opentelemetry_pb2.OpenTelemetryConfig(service_name=_service_name(proxy))
    if spec.http is not None:
        uri = http_uri_pb2.HttpUri(
            uri=f"{hostname}/{spec.http.path.lstrip('/')}",
            cluster=cluster,
            timeout=duration(spec.http.timeout or OTLP_TIMEOUT),
        )
        otel.http_service.CopyFrom(http_service_pb2.HttpService(http_uri=uri))
    else:
        otel.grpc_service.CopyFrom(
            grpc_service_pb2.GrpcService(
                envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(
                    cluster_name=cluster, authority=hostname
                )
            )
        )
    return http_tracer_pb2.Tracing.Http(name="envoy.tracers.opentelemetry", typed_config=pack(otel))


def _from_extension(
    push: PushContext, proxy: Proxy, provider: ExtensionProvider
) -> tuple[http_tracer_pb2.Tracing.Http | None, int]:
    for kind in ("zipkin", "datadog", "opentelemetry"):
        spec: TracingProvider | None = getattr(provider, kind)
        if spec is not None:
            return _provider(push, proxy, kind, spec), spec.max_tag_length
    return None, 0


def _legacy_addresses(push: PushContext) -> list[tuple[str, str]]:
    """(tracer, `host:port`) from defaultConfig.tracing; Istio's default tracer is zipkin
    at zipkin.istio-system:9411 when no tracer address is set."""
    legacy = push.mesh.default_config.tracing
    found = [
        (kind, address.address)
        for kind in ("zipkin", "datadog")
        if legacy is not None and (address := getattr(legacy, kind)) is not None and address.address
    ]
    return found or [("zipkin", DEFAULT_ZIPKIN_ADDRESS)]


def _legacy_provider(push: PushContext, proxy: Proxy) -> http_tracer_pb2.Tracing.Http | None:
    """The legacy tracer address as a mesh service (`host` may be short: `zipkin.ns`)."""
    for kind, address in _legacy_addresses(push):
        host, _, port = address.rpartition(":")
        for candidate in (host, f"{host}.svc.{push.domain_suffix}", f"{host}.{push.domain_suffix}"):
            spec = TracingProvider(service=candidate, port=int(port) if port.isdigit() else 0)
            built = _provider(push, proxy, kind, spec)
            if built is not None:
                return built
    return None


def configure_default_sampling(percent: float) -> None:
    """The percent of requests traced where neither Telemetry nor the mesh's
    defaultConfig.tracing.sampling says (Istio's PILOT_TRACE_SAMPLING)."""
    global _default_sampling
    if not 0.0 <= percent <= 100.0:
        raise ValueError(f"trace sampling {percent:g}: give a percent from 0 to 100")
    _default_sampling = percent


def _sampling(push: PushContext) -> float:
    legacy = push.mesh.default_config.tracing
    if legacy is None or legacy.sampling == 0.0:
        return _default_sampling
    return legacy.sampling if legacy.sampling <= 100.0 else _default_sampling


def _base(
    push: PushContext, proxy: Proxy, provider: http_tracer_pb2.Tracing.Http | None, sampling: float
) -> _Tracing:
    out = _Tracing(
        client_sampling=percent_pb2.Percent(value=100.0),
        random_sampling=percent_pb2.Percent(value=sampling),
        overall_sampling=percent_pb2.Percent(value=100.0),
    )
    if provider is not None:
        out.provider.CopyFrom(provider)
        if proxy.type is ProxyType.ROUTER:
            out.spawn_upstream_span.CopyFrom(boolean(True))
    legacy = push.mesh.default_config.tracing
    if (
        legacy is not None
        and legacy.max_path_tag_length
        and not out.HasField("max_path_tag_length")
    ):
        out.max_path_tag_length.CopyFrom(u32(legacy.max_path_tag_length))
    return out


def _tags(
    push: PushContext,
    proxy: Proxy,
    enable_istio_tags: bool,
    tags: Mapping[str, CustomTag | MeshCustomTag],
) -> list[custom_tag_pb2.CustomTag]:
    out = list(istio_tags(push, proxy)) if enable_istio_tags else []
    out.extend(t for name, tag in tags.items() if (t := user_tag(name, tag)) is not None)
    return sorted(out, key=lambda t: t.tag)


def hcm_tracing(push: PushContext, proxy: Proxy, choice: TracingChoice | None) -> HcmTracing:
    """The tracing of one HCM of `proxy` in the direction `choice` was computed for."""
    legacy = push.mesh.default_config.tracing
    if choice is None:
        if not push.mesh.enable_tracing:
            return HcmTracing()
        out = _base(push, proxy, _legacy_provider(push, proxy), _sampling(push))
        istio = (
            legacy.enable_istio_tags if legacy and legacy.enable_istio_tags is not None else True
        )
        out.custom_tags.extend(_tags(push, proxy, istio, legacy.custom_tags if legacy else {}))
        return HcmTracing(out)
    if choice.disabled:
        return HcmTracing(None, choice.use_request_id_for_trace_sampling)
    providers = {p.name: p for p in push.mesh.extension_providers}
    provider, max_tag = None, 0
    extension = providers.get(choice.provider or "")
    if extension is not None:
        provider, max_tag = _from_extension(push, proxy, extension)
        if provider is None:
            return HcmTracing(None, choice.use_request_id_for_trace_sampling)
    sampling = choice.sampling if choice.sampling is not None else _sampling(push)
    out = _base(push, proxy, provider, sampling)
    if max_tag:
        out.max_path_tag_length.CopyFrom(u32(max_tag))
    tags: Mapping[str, CustomTag | MeshCustomTag] = choice.custom_tags or (
        legacy.custom_tags if legacy else {}
    )
    out.custom_tags.extend(_tags(push, proxy, choice.enable_istio_tags, tags))
    return HcmTracing(out, choice.use_request_id_for_trace_sampling)

"""Istio's standard HTTP metrics from stock Envoy: a stats access logger per HCM, peers
exchanged in headers.

The mechanism (chosen by measurement, see the report of issue 23): Envoy's
`envoy.access_loggers.stats` counts every request into `istio_requests_total` and the
duration and size histograms, with Istio's labels as dynamic tags, exported on 15090 by
Envoy itself (as `envoy_istio_*`: stock Envoy prefixes stats outside a registered custom
namespace). A proxy's own facts are literals; the peer's come in `x-istio-peer-*` headers:
clients add theirs to requests, servers to responses, and each side moves the other's into
dynamic metadata (`istio.peer`) and removes them, so apps and external clients never see
them. Principals come from the verified peer certificate, not from headers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.common.mutation_rules.v3 import mutation_rules_pb2
from envoy.config.core.v3 import base_pb2
from envoy.extensions.access_loggers.stats.v3 import stats_pb2
from envoy.extensions.filters.http.header_mutation.v3 import header_mutation_pb2
from envoy.extensions.filters.http.header_to_metadata.v3 import header_to_metadata_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import wrappers_pb2

from meshpilot.config.istio.telemetry import MetricsOverrides
from meshpilot.model.indexes.telemetry import MetricsChoice, Mode
from meshpilot.model.proxy import Proxy
from meshpilot.registry.model import Service
from meshpilot.xds.protos import pack

__all__ = [
    "PEER_FIELDS",
    "STATS_LOGGER",
    "STAT_PREFIX",
    "UNKNOWN",
    "Workload",
    "labels_for",
    "make_stat",
    "metrics_filters",
    "metrics_logger",
    "overridden",
    "workload_of",
]

STATS_LOGGER = "envoy.access_loggers.stats"
HEADER_TO_METADATA = "envoy.filters.http.header_to_metadata"
HEADER_MUTATION = "envoy.filters.http.header_mutation"
PEER_NAMESPACE = "istio.peer"
UNKNOWN = "unknown"
# Envoy requires a prefix: istio + requests_total = istio_requests_total on /stats.
STAT_PREFIX = "istio"
CLUSTER_ID = "Kubernetes"  # Istio's cluster id when none is configured
# The peer facts exchanged in `x-istio-peer-<field>` headers.
PEER_FIELDS = (
    "workload",
    "namespace",
    "app",
    "version",
    "canonical-service",
    "canonical-revision",
    "service",
    "service-name",
    "service-namespace",
)
_Config = stats_pb2.Config
# Istio's metric enum -> the name after STAT_PREFIX (TCP metrics are not built yet).
METRICS = {
    "REQUEST_COUNT": "requests_total",
    "REQUEST_DURATION": "request_duration_milliseconds",
    "REQUEST_SIZE": "request_bytes",
    "RESPONSE_SIZE": "response_bytes",
}


@dataclass(frozen=True, slots=True)
class Workload:
    """One side's facts, as Istio's labels spell them."""

    workload: str
    namespace: str
    app: str
    version: str
    canonical_service: str
    canonical_revision: str
    service: str = UNKNOWN
    service_name: str = UNKNOWN
    service_namespace: str = UNKNOWN

    def field(self, name: str) -> str:
        return str(getattr(self, name.replace("-", "_")))


def workload_of(proxy: Proxy, service: Service | None = None) -> Workload:
    labels = proxy.labels
    app = labels.get("app") or labels.get("app.kubernetes.io/name") or UNKNOWN
    version = labels.get("version") or labels.get("app.kubernetes.io/version") or UNKNOWN
    name = proxy.workload_name or proxy.pod_name
    return Workload(
        workload=name,
        namespace=proxy.namespace,
        app=app,
        version=version,
        canonical_service=labels.get("service.istio.io/canonical-name")
        or labels.get("app")
        or name,
        canonical_revision=labels.get("service.istio.io/canonical-revision")
        or labels.get("version")
        or "latest",
        service=service.hostname if service else UNKNOWN,
        service_name=(service.kube_name or service.hostname.split(".")[0]) if service else UNKNOWN,
        service_namespace=service.namespace if service else UNKNOWN,
    )


def _peer(name: str) -> str:
    return f"%DYNAMIC_METADATA({PEER_NAMESPACE}:{name})%"


def _headers_to_metadata(request: bool) -> hcm_pb2.HttpFilter:
    rules = [
        header_to_metadata_pb2.Config.Rule(
            header=f"x-istio-peer-{name}",
            on_header_present=header_to_metadata_pb2.Config.KeyValuePair(
                metadata_namespace=PEER_NAMESPACE, key=name
            ),
            on_header_missing=header_to_metadata_pb2.Config.KeyValuePair(
                metadata_namespace=PEER_NAMESPACE, key=name, value=UNKNOWN
            ),
            remove=True,
        )
        for name in PEER_FIELDS
    ]
    config = (
        header_to_metadata_pb2.Config(request_rules=rules)
        if request
        else header_to_metadata_pb2.Config(response_rules=rules)
    )
    return hcm_pb2.HttpFilter(name=HEADER_TO_METADATA, typed_config=pack(config))


def _add_own(own: Workload, request: bool) -> hcm_pb2.HttpFilter:
    mutations = [
        mutation_rules_pb2.HeaderMutation(
            append=base_pb2.HeaderValueOption(
                header=base_pb2.HeaderValue(key=f"x-istio-peer-{name}", value=own.field(name)),
                append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
            )
        )
        for name in PEER_FIELDS
    ]
    rules = header_mutation_pb2.Mutations()
    (rules.request_mutations if request else rules.response_mutations).extend(mutations)
    return hcm_pb2.HttpFilter(
        name=HEADER_MUTATION, typed_config=pack(header_mutation_pb2.HeaderMutation(mutations=rules))
    )


def metrics_filters(own: Workload, mode: Mode) -> list[hcm_pb2.HttpFilter]:
    """The peer exchange, before the router: a client sends its facts with the request and
    reads the server's from the response; a server the other way round."""
    client = mode is Mode.CLIENT
    return [_headers_to_metadata(request=not client), _add_own(own, request=client)]


def labels_for(
    own: Workload,
    principal: str,
    mode: Mode,
    security: str,
    peer: Callable[[str], str] = _peer,
    protocol: str = "http",
) -> dict[str, str]:
    """Istio's labels: `own` facts on our side, `peer(field)` on the other (HTTP: the
    exchanged headers' dynamic metadata)."""

    def side(is_own: bool, name: str) -> str:
        return own.field(name) if is_own else peer(name)

    client = mode is Mode.CLIENT
    out = {
        "reporter": "source" if client else "destination",
        "source_workload": side(client, "workload"),
        "source_canonical_service": side(client, "canonical-service"),
        "source_canonical_revision": side(client, "canonical-revision"),
        "source_workload_namespace": side(client, "namespace"),
        "source_principal": principal if client else "%DOWNSTREAM_PEER_URI_SAN%",
        "source_app": side(client, "app"),
        "source_version": side(client, "version"),
        "source_cluster": CLUSTER_ID,
        "destination_workload": side(not client, "workload"),
        "destination_workload_namespace": side(not client, "namespace"),
        "destination_principal": "%UPSTREAM_PEER_URI_SAN%" if client else principal,
        "destination_app": side(not client, "app"),
        "destination_version": side(not client, "version"),
        "destination_service": side(not client, "service"),
        "destination_service_name": side(not client, "service-name"),
        "destination_service_namespace": side(not client, "service-namespace"),
        "destination_canonical_service": side(not client, "canonical-service"),
        "destination_canonical_revision": side(not client, "canonical-revision"),
        "destination_cluster": CLUSTER_ID,
        "request_protocol": protocol,
        "response_code": "%RESPONSE_CODE%",
        "grpc_response_status": "%GRPC_STATUS_NUMBER%",
        "response_flags": "%RESPONSE_FLAGS%",
        "connection_security_policy": security,
    }
    if protocol == "tcp":
        del out["response_code"], out["grpc_response_status"]
    return out


def overridden(
    labels: dict[str, str], metric: str, overrides: tuple[MetricsOverrides, ...]
) -> dict[str, str] | None:
    """Telemetry overrides for one metric: None when disabled; tags removed or set (an
    UPSERT value is a CEL expression, as in Istio)."""
    out = dict(labels)
    for override in overrides:
        match = override.match
        if match is not None and match.metric not in ("", "ALL_METRICS", metric):
            continue
        if match is not None and match.custom_metric:
            continue
        if override.disabled:
            return None
        for tag, change in override.tag_overrides.items():
            if change.operation == "REMOVE":
                out.pop(tag, None)
            else:
                out[tag] = f"%CEL({change.value})%"
    return out


def make_stat(name: str, labels: dict[str, str]) -> stats_pb2.Config.Stat:
    return _Config.Stat(
        name=name, tags=[_Config.Tag(name=k, value_format=v) for k, v in labels.items()]
    )


def metrics_logger(
    own: Workload, principal: str, mode: Mode, security: str, choice: MetricsChoice
) -> accesslog_pb2.AccessLog | None:
    """The stats logger of one HCM; None when the overrides disable every metric.
    `security` is the connection_security_policy of the chain (mutual_tls, none; the
    source reporter says unknown, as Istio's)."""
    base = labels_for(own, principal, mode, security)
    config = _Config(stat_prefix=STAT_PREFIX)
    for metric, name in METRICS.items():
        labels = overridden(base, metric, choice.overrides)
        if labels is None:
            continue
        stat = make_stat(name, labels)
        if metric == "REQUEST_COUNT":
            config.counters.append(
                _Config.Counter(stat=stat, value_fixed=wrappers_pb2.UInt64Value(value=1))
            )
            continue
        unit = (
            _Config.Histogram.Milliseconds
            if metric == "REQUEST_DURATION"
            else _Config.Histogram.Bytes
        )
        value = {"REQUEST_DURATION": "%DURATION%", "REQUEST_SIZE": "%BYTES_RECEIVED%"}.get(
            metric, "%BYTES_SENT%"
        )
        config.histograms.append(_Config.Histogram(stat=stat, unit=unit, value_format=value))
    if not config.counters and not config.histograms:
        return None
    return accesslog_pb2.AccessLog(name=STATS_LOGGER, typed_config=pack(config))

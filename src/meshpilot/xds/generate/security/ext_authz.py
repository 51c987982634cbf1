"""`meshConfig.extensionProviders` → Envoy ext_authz configs, as Istio's authz builder makes
them (pilot/pkg/security/authz/builder/extauthz.go).

A provider resolves to the HTTP filter config (and, for gRPC, the network filter config too)
or to the reason it cannot be used: not defined, neither envoyExtAuthzHttp nor
envoyExtAuthzGrpc, a port out of 1..65535, a service no registry knows, a bad statusOnError
or pathPrefix. The caller then denies what the CUSTOM policies match (fail closed).

Each config calls the authorizer only for requests that a CUSTOM policy of its provider
matched: the RBAC filter in front of it records the policy name in its dynamic metadata under
`istio_ext_authz_shadow_effective_policy_id`, and `filter_enabled_metadata` looks for the
`istio-ext-authz-<provider>` prefix there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2, config_source_pb2, grpc_service_pb2, http_uri_pb2
from envoy.extensions.filters.http.ext_authz.v3 import ext_authz_pb2 as http_pb2
from envoy.extensions.filters.network.ext_authz.v3 import ext_authz_pb2 as network_pb2
from envoy.type.matcher.v3 import metadata_pb2, string_pb2, value_pb2
from envoy.type.v3 import http_status_pb2

from meshpilot.config.mesh_providers import BodyInCheck, ExtAuthzGrpc, ExtAuthzHttp
from meshpilot.model.push_context import PushContext
from meshpilot.xds.names import outbound_cluster
from meshpilot.xds.protos import duration

__all__ = [
    "EXT_AUTHZ_POLICY_PREFIX",
    "SHADOW_STAT_PREFIX",
    "ResolvedProvider",
    "resolve_provider",
]

EXT_AUTHZ_POLICY_PREFIX = "istio-ext-authz"
SHADOW_STAT_PREFIX = "istio_ext_authz_"
_EFFECTIVE_POLICY_KEY = f"{SHADOW_STAT_PREFIX}shadow_effective_policy_id"
_DEFAULT_TIMEOUT_NS = 600 * 1_000_000_000  # Istio's placeholder; a DestinationRule can lower it
_STATUS_CODES = frozenset(http_status_pb2.StatusCode.values()) - {0}


@dataclass(frozen=True, slots=True)
class ResolvedProvider:
    """One provider: its filter configs, or `error` saying why it cannot be used."""

    name: str
    http: http_pb2.ExtAuthz | None = None
    network: network_pb2.ExtAuthz | None = None
    error: str = ""

    def cache_key(self) -> tuple[str, bytes, bytes, str]:
        http = self.http.SerializeToString(deterministic=True) if self.http else b""
        net = self.network.SerializeToString(deterministic=True) if self.network else b""
        return (self.name, http, net, self.error)


def resolve_provider(push: PushContext, name: str) -> ResolvedProvider:
    found = [p for p in push.mesh.extension_providers if p.name == name]
    if not found:
        known = sorted(p.name for p in push.mesh.extension_providers)
        return ResolvedProvider(
            name,
            error=f"extension provider {name!r} not found in meshConfig.extensionProviders "
            f"(available: {', '.join(known) or 'none'})",
        )
    if len(found) > 1:
        return ResolvedProvider(name, error=f"extension provider {name!r} is defined twice")
    provider = found[0]
    try:
        if provider.envoy_ext_authz_http is not None:
            return _http(push, name, provider.envoy_ext_authz_http)
        if provider.envoy_ext_authz_grpc is not None:
            return _grpc(push, name, provider.envoy_ext_authz_grpc)
    except _ProviderError as exc:
        return ResolvedProvider(name, error=f"extension provider {name!r}: {exc}")
    return ResolvedProvider(
        name,
        error=f"extension provider {name!r} is not envoyExtAuthzHttp or envoyExtAuthzGrpc",
    )


class _ProviderError(Exception):
    pass


def _http(push: PushContext, name: str, config: ExtAuthzHttp) -> ResolvedProvider:
    hostname, cluster = _service(push, config.service, config.port)
    status = _status(config.status_on_error)
    if config.path_prefix and not config.path_prefix.startswith("/"):
        raise _ProviderError(f"pathPrefix must begin with '/', found {config.path_prefix!r}")
    timeout = config.timeout if config.timeout is not None else _DEFAULT_TIMEOUT_NS
    service = http_pb2.HttpService(
        path_prefix=config.path_prefix,
        server_uri=http_uri_pb2.HttpUri(
            uri=f"http://{hostname}", cluster=cluster, timeout=duration(timeout)
        ),
    )
    if config.include_additional_headers_in_check:
        service.authorization_request.headers_to_add.extend(
            base_pb2.HeaderValue(key=key, value=value)
            for key, value in sorted(config.include_additional_headers_in_check.items())
        )
    response = service.authorization_response
    for target, headers in (
        (response.allowed_upstream_headers, config.headers_to_upstream_on_allow),
        (response.allowed_client_headers, config.headers_to_downstream_on_deny),
        (response.allowed_client_headers_on_success, config.headers_to_downstream_on_allow),
    ):
        if headers:
            target.CopyFrom(_headers(headers))
    http = http_pb2.ExtAuthz(
        http_service=service,
        failure_mode_allow=config.fail_open,
        transport_api_version=config_source_pb2.V3,
        filter_enabled_metadata=_enabled(name),
    )
    allowed = config.include_request_headers_in_check or config.include_headers_in_check
    if allowed:
        http.allowed_headers.CopyFrom(_headers(allowed))
    _common(http, status, config.include_request_body_in_check)
    return ResolvedProvider(name, http=http)


def _grpc(push: PushContext, name: str, config: ExtAuthzGrpc) -> ResolvedProvider:
    hostname, cluster = _service(push, config.service, config.port)
    status = _status(config.status_on_error)
    grpc = grpc_service_pb2.GrpcService(
        envoy_grpc=grpc_service_pb2.GrpcService.EnvoyGrpc(cluster_name=cluster, authority=hostname)
    )
    if config.timeout is not None:
        grpc.timeout.CopyFrom(duration(config.timeout))
    http = http_pb2.ExtAuthz(
        grpc_service=grpc,
        failure_mode_allow=config.fail_open,
        transport_api_version=config_source_pb2.V3,
        filter_enabled_metadata=_enabled(name),
    )
    _common(http, status, config.include_request_body_in_check)
    network = network_pb2.ExtAuthz(
        stat_prefix="tcp.",
        grpc_service=grpc,
        failure_mode_allow=config.fail_open,
        transport_api_version=config_source_pb2.V3,
        filter_enabled_metadata=_enabled(name, network=True),
    )
    return ResolvedProvider(name, http=http, network=network)


def _common(http: http_pb2.ExtAuthz, status: int | None, body: BodyInCheck | None) -> None:
    if status is not None:
        http.status_on_error.code = status
    if body is not None:
        http.with_request_body.CopyFrom(
            http_pb2.BufferSettings(
                max_request_bytes=body.max_request_bytes,
                allow_partial_message=body.allow_partial_message,
                pack_as_bytes=body.pack_as_bytes,
            )
        )


def _service(push: PushContext, service: str, port: int) -> tuple[str, str]:
    """`<host>` or `<namespace>/<host>` → (hostname, `outbound|<port>||<hostname>`)."""
    if not 1 <= port <= 65535:
        raise _ProviderError(f"port must be in the range [1, 65535], found: {port}")
    if not service:
        raise _ProviderError("service must not be empty")
    namespace, _, hostname = service.rpartition("/")
    found = [
        svc
        for svc in push.registry.services_for_host(hostname)
        if not namespace or svc.namespace == namespace
    ]
    if not found:
        raise _ProviderError(f"could not find service {service} in the service registry")
    return hostname, outbound_cluster(port, "", hostname)


def _status(text: str) -> int | None:
    if not text:
        return None
    try:
        code = int(text)
    except ValueError:
        raise _ProviderError(f"invalid statusOnError {text!r}: not a number") from None
    if code not in _STATUS_CODES:
        raise _ProviderError(f"unsupported statusOnError {text}: not an HTTP status code")
    return code


def _headers(names: Sequence[str]) -> string_pb2.ListStringMatcher:
    """Header names, `prefix*` and `*suffix` too, matched ignoring case."""
    patterns = []
    for name in names:
        if name.startswith("*"):
            pattern = string_pb2.StringMatcher(suffix=name[1:], ignore_case=True)
        elif name.endswith("*"):
            pattern = string_pb2.StringMatcher(prefix=name[:-1], ignore_case=True)
        else:
            pattern = string_pb2.StringMatcher(exact=name, ignore_case=True)
        patterns.append(pattern)
    return string_pb2.ListStringMatcher(patterns=patterns)


def _enabled(provider: str, *, network: bool = False) -> metadata_pb2.MetadataMatcher:
    rbac = "envoy.filters.network.rbac" if network else "envoy.filters.http.rbac"
    return metadata_pb2.MetadataMatcher(
        filter=rbac,
        path=[metadata_pb2.MetadataMatcher.PathSegment(key=_EFFECTIVE_POLICY_KEY)],
        value=value_pb2.ValueMatcher(
            string_match=string_pb2.StringMatcher(prefix=f"{EXT_AUTHZ_POLICY_PREFIX}-{provider}")
        ),
    )

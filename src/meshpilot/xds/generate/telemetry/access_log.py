"""Envoy access loggers from the mesh config and the Telemetry API, as istiod builds them.

`meshConfig.accessLogFile` gives a file logger (`/dev/stdout` included) in the mesh's
encoding: TEXT with `accessLogFormat` or Istio's default format, JSON with the format's
labels or Istio's default labels. Telemetry providers are the extension providers of kind
`envoyFileAccessLog`, plus the built-in `envoy` (stdout in the mesh's format); a
Telemetry filter becomes a CEL extension filter (Envoy's `envoy.access_loggers.
extension_filters.cel`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from envoy.config.accesslog.v3 import accesslog_pb2
from envoy.config.core.v3 import base_pb2, extension_pb2, substitution_format_string_pb2
from envoy.extensions.access_loggers.file.v3 import file_pb2
from envoy.extensions.access_loggers.filters.cel.v3 import cel_pb2
from envoy.extensions.access_loggers.stream.v3 import stream_pb2
from envoy.extensions.formatter.req_without_query.v3 import req_without_query_pb2
from google.protobuf import struct_pb2

from meshpilot.config.mesh import MeshConfig
from meshpilot.config.mesh_telemetry import FileAccessLogProvider
from meshpilot.model.indexes.telemetry import LogChoice
from meshpilot.xds.protos import pack

__all__ = [
    "DEFAULT_JSON_LABELS",
    "DEFAULT_TEXT_FORMAT",
    "FILE_ACCESS_LOG",
    "AccessLogs",
    "access_logs",
]

FILE_ACCESS_LOG = "envoy.access_loggers.file"
CEL_FILTER = "envoy.access_loggers.extension_filters.cel"
BUILTIN_PROVIDER = "envoy"
DEV_STDOUT = "/dev/stdout"
DEV_STDERR = "/dev/stderr"
STDOUT_ACCESS_LOG = "envoy.access_loggers.stdout"
STDERR_ACCESS_LOG = "envoy.access_loggers.stderr"

DEFAULT_TEXT_FORMAT = (
    '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" '
    "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "
    '"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% '
    '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" '
    '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% '
    "%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% "
    "%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n"
)

DEFAULT_JSON_LABELS: Mapping[str, str] = {
    "start_time": "%START_TIME%",
    "route_name": "%ROUTE_NAME%",
    "method": "%REQ(:METHOD)%",
    "path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
    "protocol": "%PROTOCOL%",
    "response_code": "%RESPONSE_CODE%",
    "response_flags": "%RESPONSE_FLAGS%",
    "response_code_details": "%RESPONSE_CODE_DETAILS%",
    "connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%",
    "bytes_received": "%BYTES_RECEIVED%",
    "bytes_sent": "%BYTES_SENT%",
    "duration": "%DURATION%",
    "upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
    "x_forwarded_for": "%REQ(X-FORWARDED-FOR)%",
    "user_agent": "%REQ(USER-AGENT)%",
    "request_id": "%REQ(X-REQUEST-ID)%",
    "authority": "%REQ(:AUTHORITY)%",
    "upstream_host": "%UPSTREAM_HOST%",
    "upstream_cluster": "%UPSTREAM_CLUSTER_RAW%",
    "upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%",
    "downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
    "downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
    "requested_server_name": "%REQUESTED_SERVER_NAME%",
    "upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
}

_AccessLog: TypeAlias = accesslog_pb2.AccessLog


@dataclass(frozen=True, slots=True)
class AccessLogs:
    """What one direction of one proxy logs: on HCMs and tcp_proxies (`filters`) and on the
    listener itself (`listener`, connections no filter chain took: response flag NR)."""

    filters: tuple[_AccessLog, ...] = ()
    listener: tuple[_AccessLog, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.filters and not self.listener


def _with_newline(text: str) -> str:
    """Istio ends every text format with a newline (if missing)."""
    return text if text.endswith("\n") else text + "\n"


def _formatters(text: str) -> list[extension_pb2.TypedExtensionConfig]:
    if "%REQ_WITHOUT_QUERY" not in text:
        return []
    return [
        extension_pb2.TypedExtensionConfig(
            name="envoy.formatter.req_without_query",
            typed_config=pack(req_without_query_pb2.ReqWithoutQuery()),
        )
    ]


def _text(
    text: str, omit_empty: bool = False
) -> substitution_format_string_pb2.SubstitutionFormatString:
    text = _with_newline(text) if text else DEFAULT_TEXT_FORMAT
    return substitution_format_string_pb2.SubstitutionFormatString(
        text_format_source=base_pb2.DataSource(inline_string=text),
        omit_empty_values=omit_empty,
        formatters=_formatters(text),
    )


def _json(
    labels: Mapping[str, Any], omit_empty: bool = False
) -> substitution_format_string_pb2.SubstitutionFormatString:
    labels = labels or DEFAULT_JSON_LABELS
    fields = struct_pb2.Struct()
    fields.update(dict(labels))
    return substitution_format_string_pb2.SubstitutionFormatString(
        json_format=fields,
        json_format_options=substitution_format_string_pb2.JsonFormatOptions(sort_properties=False),
        omit_empty_values=omit_empty,
        formatters=_formatters(json.dumps(dict(labels))),
    )


def _file_log(
    path: str, log_format: substitution_format_string_pb2.SubstitutionFormatString
) -> _AccessLog:
    """A file logger; /dev/stdout and /dev/stderr become Envoy's stream loggers, which write
    to the descriptors Envoy inherited: reopening /dev/stdout by path fails when Envoy runs
    as the proxy user and its stdout is a file or pipe the agent (root) owns."""
    if path in (DEV_STDOUT, DEV_STDERR):
        stream = stream_pb2.StdoutAccessLog if path == DEV_STDOUT else stream_pb2.StderrAccessLog
        name = STDOUT_ACCESS_LOG if path == DEV_STDOUT else STDERR_ACCESS_LOG
        return _AccessLog(name=name, typed_config=pack(stream(log_format=log_format)))
    return _AccessLog(
        name=FILE_ACCESS_LOG,
        typed_config=pack(file_pb2.FileAccessLog(path=path, log_format=log_format)),
    )


def mesh_file_log(path: str, mesh: MeshConfig) -> _AccessLog:
    """Istio's FileAccessLogFromMeshConfig; an accessLogFormat that is not a JSON object
    under JSON encoding falls back to the default labels (istiod logs it and does the same)."""
    if mesh.access_log_encoding == "JSON":
        labels: Any = {}
        if mesh.access_log_format:
            try:
                labels = json.loads(mesh.access_log_format)
            except ValueError:
                labels = {}
        return _file_log(path, _json(labels if isinstance(labels, dict) else {}))
    return _file_log(path, _text(mesh.access_log_format))


def _provider_log(provider: FileAccessLogProvider, name: str, mesh: MeshConfig) -> _AccessLog:
    if name == BUILTIN_PROVIDER and provider.log_format is None and not provider.omit_empty_values:
        return mesh_file_log(provider.path or DEV_STDOUT, mesh)
    path, fmt = provider.path or DEV_STDOUT, provider.log_format
    if fmt is not None and fmt.labels is not None:
        return _file_log(path, _json(fmt.labels, provider.omit_empty_values))
    return _file_log(path, _text(fmt.text if fmt else "", provider.omit_empty_values))


def _cel(expression: str) -> accesslog_pb2.AccessLogFilter:
    return accesslog_pb2.AccessLogFilter(
        extension_filter=accesslog_pb2.ExtensionFilter(
            name=CEL_FILTER, typed_config=pack(cel_pb2.ExpressionFilter(expression=expression))
        )
    )


def _no_route_filter() -> accesslog_pb2.AccessLogFilter:
    """Listener logs only connections that found no filter chain (Istio's NR filter)."""
    return accesslog_pb2.AccessLogFilter(
        response_flag_filter=accesslog_pb2.ResponseFlagFilter(flags=["NR"])
    )


def _and(*filters: accesslog_pb2.AccessLogFilter | None) -> accesslog_pb2.AccessLogFilter | None:
    present = [f for f in filters if f is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return accesslog_pb2.AccessLogFilter(and_filter=accesslog_pb2.AndFilter(filters=present))


def _filtered(log: _AccessLog, extra: accesslog_pb2.AccessLogFilter | None) -> _AccessLog:
    out = _AccessLog()
    out.CopyFrom(log)
    combined = _and(extra, log.filter if log.HasField("filter") else None)
    if combined is not None:
        out.filter.CopyFrom(combined)
    return out


def _telemetry_logs(choices: tuple[LogChoice, ...], mesh: MeshConfig) -> list[_AccessLog]:
    providers = {p.name: p for p in mesh.extension_providers}
    out = []
    for choice in choices:
        provider = providers.get(choice.provider)
        if provider is None and choice.provider == BUILTIN_PROVIDER:
            log = mesh_file_log(DEV_STDOUT, mesh)
        elif provider is not None and provider.envoy_file_access_log is not None:
            log = _provider_log(provider.envoy_file_access_log, choice.provider, mesh)
        else:
            continue  # unknown provider, or one that logs elsewhere (ALS): nothing to build
        out.append(_filtered(log, _cel(choice.filter) if choice.filter else None))
    return out


def access_logs(choices: tuple[LogChoice, ...] | None, mesh: MeshConfig) -> AccessLogs:
    """The loggers for one direction: from Telemetry when it applies (`choices` not None),
    else from meshConfig.accessLogFile."""
    if choices is None:
        if not mesh.access_log_file:
            return AccessLogs()
        log = mesh_file_log(mesh.access_log_file, mesh)
        return AccessLogs((log,), (_filtered(log, _no_route_filter()),))
    logs = _telemetry_logs(choices, mesh)
    return AccessLogs(tuple(logs), tuple(_filtered(log, _no_route_filter()) for log in logs))

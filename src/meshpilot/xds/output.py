"""A proxy's whole configuration, and its config_dump-like JSON form (stable ordering)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import extension_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.transport_sockets.tls.v3 import secret_pb2
from google.protobuf import json_format, message

__all__ = ["REDACTED", "ProxyConfig", "message_to_dict", "resources_to_dicts"]

REDACTED = "[redacted]"  # what Envoy's config_dump shows for private keys


@dataclass(slots=True)
class ProxyConfig:
    listeners: list[listener_pb2.Listener] = field(default_factory=list)
    routes: list[route_pb2.RouteConfiguration] = field(default_factory=list)
    clusters: list[cluster_pb2.Cluster] = field(default_factory=list)
    endpoints: list[endpoint_pb2.ClusterLoadAssignment] = field(default_factory=list)
    secrets: list[secret_pb2.Secret] = field(default_factory=list)
    # ECDS: shown only when there are any, so outputs without extensions keep their shape.
    extension_configs: list[extension_pb2.TypedExtensionConfig] = field(default_factory=list)

    SECTIONS = ("listeners", "routes", "clusters", "endpoints", "secrets")

    def to_dict(self, redact: bool = True) -> dict[str, list[dict[str, Any]]]:
        """The translate output: each section a list of resources sorted by name."""
        out = {name: resources_to_dicts(getattr(self, name)) for name in self.SECTIONS}
        if redact:
            for secret in out["secrets"]:
                _redact_secret(secret)
        if self.extension_configs:
            out["extension_configs"] = resources_to_dicts(self.extension_configs)
        return out


def message_to_dict(msg: message.Message) -> dict[str, Any]:
    """config_dump's JSON form (snake_case, `@type` on Any) as plain dicts."""
    result: dict[str, Any] = json.loads(
        json_format.MessageToJson(msg, preserving_proto_field_name=True)
    )
    return result


def _name(msg: Any) -> str:
    return str(getattr(msg, "name", "") or getattr(msg, "cluster_name", ""))


def resources_to_dicts(resources: Iterable[message.Message]) -> list[dict[str, Any]]:
    return [message_to_dict(r) for r in sorted(resources, key=_name)]


def _redact_secret(secret: dict[str, Any]) -> None:
    tls = secret.get("tls_certificate")
    if tls and "private_key" in tls:
        tls["private_key"] = {"inline_string": REDACTED}
    generic = secret.get("generic_secret")
    if generic and "secret" in generic:
        generic["secret"] = {"inline_string": REDACTED}

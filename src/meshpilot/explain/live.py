"""Inputs for a live explain: a proxy's config from an Envoy config dump (Envoy's admin
`/config_dump`, or the control plane's `/debug/config_dump`), and the objects with their
file and line from the control plane's `/debug/configz`. Pure: the CLI fetches the JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from google.protobuf import json_format, message

from meshpilot.config.loader import LoadResult, load_documents
from meshpilot.config.yaml_source import RawDocument
from meshpilot.explain.request import ExplainError
from meshpilot.proxyinfo.dump import ConfigDump
from meshpilot.xds.output import ProxyConfig

__all__ = ["objects_from_configz", "proxy_config_from_dump"]

M = TypeVar("M", bound=message.Message)


def _register_types() -> None:
    """The typed configs meshpilot emits, so that `Any` fields of a dump can be read."""
    import meshpilot.xds.generate.clusters
    import meshpilot.xds.generate.gateway
    import meshpilot.xds.generate.listeners
    import meshpilot.xds.generate.routes.vhds
    import meshpilot.xds.generate.security.rbac  # noqa: F401


def _parse(items: list[dict[str, Any]], make: Callable[[], M], what: str) -> list[M]:
    out: list[M] = []
    for item in items:
        body = {k: v for k, v in item.items() if k != "@type"}
        msg = make()
        try:
            json_format.ParseDict(body, msg, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            name = body.get("name") or body.get("cluster_name") or "?"
            raise ExplainError(f"config dump: {what} {name} cannot be read: {exc}") from exc
        out.append(msg)
    return out


def proxy_config_from_dump(raw: Any, origin: str) -> ProxyConfig:
    """Listeners, routes, clusters and endpoints of a config dump (secrets are not needed)."""
    _register_types()
    try:
        dump = ConfigDump.parse(raw, origin)
    except Exception as exc:  # ConfigDumpError: not a dump at all
        raise ExplainError(str(exc)) from exc
    return ProxyConfig(
        listeners=_parse(dump.listeners(), listener_pb2.Listener, "listener"),
        routes=_parse(dump.routes(), route_pb2.RouteConfiguration, "route configuration"),
        clusters=_parse(dump.clusters(), cluster_pb2.Cluster, "cluster"),
        endpoints=_parse(dump.endpoints(), endpoint_pb2.ClusterLoadAssignment, "endpoints"),
    )


def objects_from_configz(configz: Any) -> LoadResult:
    """The control plane's objects, each with the file and line it was read from there."""
    if not isinstance(configz, dict) or not isinstance(configz.get("objects"), list):
        raise ExplainError("the control plane's /debug/configz has no 'objects' list")
    docs = [
        RawDocument(str(o.get("file", "")), int(o.get("line", 0)), o["object"], {})
        for o in configz["objects"]
        if isinstance(o, dict) and isinstance(o.get("object"), dict)
    ]
    return load_documents(docs)

"""An EnvoyFilter patch value as the typed Envoy message its applyTo names (Istio's
BuildXDSObjectFromStruct): JSON field names or proto names, `@type` for every Any.

The message types an `@type` names are imported on first use (the modules of its proto
package), so a Lua or any other filter shipped with the Envoy protos resolves without a
list of known filters here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import extension_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2, route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from google.protobuf import descriptor_pool, json_format, message, message_factory

__all__ = ["MESSAGE_TYPES", "PatchValueError", "message_class", "parse_value"]

MESSAGE_TYPES: dict[str, type[message.Message]] = {
    "LISTENER": listener_pb2.Listener,
    "FILTER_CHAIN": listener_components_pb2.FilterChain,
    "NETWORK_FILTER": listener_components_pb2.Filter,
    "HTTP_FILTER": hcm_pb2.HttpFilter,
    "ROUTE_CONFIGURATION": route_pb2.RouteConfiguration,
    "VIRTUAL_HOST": route_components_pb2.VirtualHost,
    "HTTP_ROUTE": route_components_pb2.Route,
    "CLUSTER": cluster_pb2.Cluster,
    "EXTENSION_CONFIG": extension_pb2.TypedExtensionConfig,
    "BOOTSTRAP": bootstrap_pb2.Bootstrap,
    "LISTENER_FILTER": listener_components_pb2.ListenerFilter,
}
_TYPE_PREFIX = "type.googleapis.com/"
_imported: set[str] = set()


class PatchValueError(ValueError):
    """The value is not a valid message of the type its applyTo names."""


def parse_value(apply_to: str, value: dict[str, Any] | None) -> message.Message:
    """The patch value as a message of `apply_to`'s type; PatchValueError naming the type
    and what does not fit."""
    cls = MESSAGE_TYPES.get(apply_to)
    if cls is None:
        raise PatchValueError(f"applyTo {apply_to} has no Envoy message type")
    out = cls()
    if value is None:
        return out
    for type_url in _type_urls(value):
        _import_type(type_url)
    try:
        json_format.ParseDict(value, out)
    except Exception as exc:  # json_format raises many kinds on odd input; all mean "invalid"
        detail = str(exc).split("\n")[0]
        raise PatchValueError(
            f"value is not a valid {cls.DESCRIPTOR.full_name}: {detail}"
        ) from None
    return out


def _type_urls(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        found = value.get("@type")
        if isinstance(found, str):
            yield found
        for item in value.values():
            yield from _type_urls(item)
    elif isinstance(value, list):
        for item in value:
            yield from _type_urls(item)


def _import_type(type_url: str) -> None:
    """Import the proto modules of the package that defines the type `type_url` names."""
    full_name = type_url.removeprefix(_TYPE_PREFIX).rpartition("/")[2]
    package = full_name.rpartition(".")[0]
    if not package or package in _imported:
        return
    _imported.add(package)
    if message_class(full_name) is not None:
        return
    try:
        module = importlib.import_module(package)
    except ImportError:
        return  # json_format then names the unknown type
    for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
        if info.name.endswith("_pb2"):
            try:
                importlib.import_module(f"{package}.{info.name}")
            except ImportError:
                continue


def message_class(full_name: str) -> type[message.Message] | None:
    """The message class of a proto type already imported, else None."""
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    except KeyError:
        return None
    cls: type[message.Message] = message_factory.GetMessageClass(descriptor)
    return cls

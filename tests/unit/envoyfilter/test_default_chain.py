"""The default filter chain of a listener is patched like its other chains (Istio patches
it too): an outbound listener whose match-all HTTP chain is the default gets the filter."""

from __future__ import annotations

from typing import Any

from envoy.config.listener.v3 import listener_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.xds.patch.listeners import patch_listener
from meshpilot.xds.patch.selection import ConfigPatch
from meshpilot.xds.patch.values import parse_value
from meshpilot.xds.protos import pack

_HCM = "envoy.filters.network.http_connection_manager"
_CORS = {
    "name": "envoy.filters.http.cors",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"},
}


def _listener() -> listener_pb2.Listener:
    hcm = hcm_pb2.HttpConnectionManager(stat_prefix="s")
    hcm.http_filters.add(name="envoy.filters.http.router", typed_config=pack(router_pb2.Router()))
    listener = listener_pb2.Listener(name="0.0.0.0_8000")
    listener.address.socket_address.port_value = 8000
    listener.default_filter_chain.filters.add(name=_HCM, typed_config=pack(hcm))
    return listener


def _patch(apply_to: str, operation: str, value: dict[str, Any] | None) -> ConfigPatch:
    return ConfigPatch(
        namespace="default",
        name="f",
        index=0,
        apply_to=apply_to,
        operation=operation,
        context="SIDECAR_OUTBOUND",
        listener={"portNumber": 8000},
        route_configuration=None,
        cluster=None,
        value=parse_value(apply_to, value) if value is not None else None,
        location="",
    )


def test_http_filter_patches_reach_the_default_chain() -> None:
    listener = _listener()
    assert patch_listener(
        listener, _patch("HTTP_FILTER", "INSERT_FIRST", _CORS), "SIDECAR_OUTBOUND"
    )
    hcm = hcm_pb2.HttpConnectionManager()
    listener.default_filter_chain.filters[0].typed_config.Unpack(hcm)
    assert [f.name for f in hcm.http_filters] == [
        "envoy.filters.http.cors",
        "envoy.filters.http.router",
    ]


def test_filter_chain_merge_and_remove_reach_the_default_chain() -> None:
    listener = _listener()
    merge = _patch("FILTER_CHAIN", "MERGE", {"transport_socket_connect_timeout": "3s"})
    assert patch_listener(listener, merge, "SIDECAR_OUTBOUND")
    assert listener.default_filter_chain.transport_socket_connect_timeout.seconds == 3
    assert patch_listener(listener, _patch("FILTER_CHAIN", "REMOVE", None), "SIDECAR_OUTBOUND")
    assert not listener.HasField("default_filter_chain")


def test_a_patch_of_another_context_leaves_it() -> None:
    listener = _listener()
    patch = _patch("HTTP_FILTER", "INSERT_FIRST", _CORS)
    assert not patch_listener(listener, patch, "SIDECAR_INBOUND")

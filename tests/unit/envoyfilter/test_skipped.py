"""A patch Envoy would reject is skipped and reported naming the EnvoyFilter and the patch
index; the rest of the configuration, other patches of the filter included, is served and
accepted by the real Envoy."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.envoy.validate import validate_config
from meshpilot.xds.patch import patch_problems
from tests.unit.envoyfilter.helpers import PRODUCTPAGE, config, proxy, push_with

_HEAD = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: mixed, namespace: default}
spec:
  workloadSelector: {labels: {app: productpage}}
  configPatches:
"""
_ZERO_TIMEOUT = """\
  - applyTo: CLUSTER
    match: {cluster: {service: reviews.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 0s}}
"""
_GOOD_TIMEOUT = """\
  - applyTo: CLUSTER
    match: {cluster: {service: details.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 2s}}
"""
_LUA = """\
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_OUTBOUND
      listener:
        portNumber: 9080
        filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}
    patch:
      operation: %s
      value:
        name: envoy.filters.http.lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          inline_code: "function envoy_on_request(h) h:headers():add('x-lua', '1') end"
"""


def _http_filters(cfg: object, name: str) -> list[str]:
    (listener,) = [lst for lst in cfg.listeners if lst.name == name]  # type: ignore[attr-defined]
    hcm = hcm_pb2.HttpConnectionManager()
    listener.filter_chains[0].filters[0].typed_config.Unpack(hcm)
    return [f.name for f in hcm.http_filters]


@pytest.mark.envoy
def test_a_patch_envoy_would_reject_is_skipped_and_the_rest_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    push = push_with(tmp_path, _HEAD + _ZERO_TIMEOUT + _GOOD_TIMEOUT + _LUA % "ADD")
    with caplog.at_level(logging.WARNING, "meshpilot.xds.patch"):
        cfg = config(push, PRODUCTPAGE)
    timeouts = {c.name: c.connect_timeout.ToJsonString() for c in cfg.clusters}
    assert timeouts["outbound|9080||reviews.default.svc.cluster.local"] == "10s"  # skipped
    assert timeouts["outbound|9080||details.default.svc.cluster.local"] == "2s"  # applied
    # ADD puts the Lua filter after the router: Envoy would reject the listener.
    assert _http_filters(cfg, "0.0.0.0_9080")[-1] == "envoy.filters.http.router"
    problems = [str(p) for p in patch_problems(push)]
    assert any(
        p.startswith("EnvoyFilter default/mixed (")
        and "configPatches[0] skipped: Envoy would reject the patched Cluster "
        "'outbound|9080||reviews.default.svc.cluster.local': connect_timeout: must be "
        "greater than 0s"
        in p
        for p in problems
    ), problems
    assert any(
        "configPatches[2] skipped: Envoy would reject the patched Listener '0.0.0.0_9080': "
        "terminal filter envoy.filters.http.router must be the last filter in a http filter "
        "chain" in p
        for p in problems
    ), problems
    assert not any("configPatches[1]" in p for p in problems)
    assert any("configPatches[0] skipped" in r.getMessage() for r in caplog.records)
    validate_config(cfg, node_id=proxy(push, PRODUCTPAGE).node_id)


@pytest.mark.envoy
def test_insert_first_puts_the_lua_filter_first_and_envoy_accepts_it(tmp_path: Path) -> None:
    push = push_with(tmp_path, _HEAD + _LUA % "INSERT_FIRST")
    cfg = config(push, PRODUCTPAGE)
    assert _http_filters(cfg, "0.0.0.0_9080")[0] == "envoy.filters.http.lua"
    assert patch_problems(push) == []
    validate_config(cfg, node_id=proxy(push, PRODUCTPAGE).node_id)


def test_an_added_cluster_whose_name_is_taken_is_skipped(tmp_path: Path) -> None:
    text = (
        _HEAD
        + """\
  - applyTo: CLUSTER
    patch:
      operation: ADD
      value: {name: "outbound|9080||details.default.svc.cluster.local", connect_timeout: 1s}
  - applyTo: CLUSTER
    patch: {operation: ADD, value: {name: extra, connect_timeout: 1s}}
"""
    )
    push = push_with(tmp_path, text)
    names = [c.name for c in config(push, PRODUCTPAGE).clusters]
    assert names.count("outbound|9080||details.default.svc.cluster.local") == 1
    assert names.count("extra") == 1
    assert [str(p).split(") ", 1)[1] for p in patch_problems(push)] == [
        "configPatches[0] skipped: the proxy already has a cluster named "
        "'outbound|9080||details.default.svc.cluster.local'"
    ]

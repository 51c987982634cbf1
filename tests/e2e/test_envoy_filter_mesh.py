"""EnvoyFilter on the live demo mesh (netns pods, real Envoys, `meshpilot discovery` over
watched files): the seed's Lua filter inserted before the router of reviews' inbound
sidecar adds a header the app sees; a MERGE changes the connect timeout of a cluster of the
client's sidecar, as Envoy's /config_dump shows. Removing the file undoes both; no Envoy
NACKs anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for

from meshpilot.demo.mesh import DemoMesh

pytestmark = pytest.mark.envoy

LUA = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: reviews-lua, namespace: default}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_INBOUND
      listener:
        portNumber: 9080
        filterChain:
          filter:
            name: envoy.filters.network.http_connection_manager
            subFilter: {name: envoy.filters.http.router}
    patch:
      operation: INSERT_BEFORE
      value:
        name: envoy.lua
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          inlineCode: |
            function envoy_on_request(request_handle)
              request_handle:headers():add("x-lua", "added-by-lua")
            end
"""
TIMEOUT = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ratings-timeout, namespace: default}
spec:
  workloadSelector: {labels: {app: client}}
  configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: ratings.default.svc.cluster.local}}
    patch: {operation: MERGE, value: {connect_timeout: 1.25s}}
"""
RATINGS = "outbound|9080||ratings.default.svc.cluster.local"


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


@pytest.fixture(autouse=True)
def _no_nacks(mesh: DemoMesh) -> Iterator[None]:
    yield
    assert_no_nacks(mesh)


def _seen_header(mesh: DemoMesh) -> str:
    status, line = mesh.get("client", "http://reviews:9080/header?name=x-lua")
    assert status == 200, line
    return line.rpartition(" x-lua=")[2]


def test_the_lua_filter_adds_a_header_the_app_sees(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    assert _seen_header(mesh) == ""
    mesh.workspace.config.write("envoyfilter-lua.yaml", LUA)
    try:
        # Both reviews pods' sidecars updated: every request of a row sees the header.
        wait_for(lambda: _seen_in_a_row(mesh, "added-by-lua"), "the Lua header", timeout=20)
    finally:
        mesh.workspace.config.remove("envoyfilter-lua.yaml")
    wait_for(lambda: _seen_in_a_row(mesh, ""), "the Lua filter gone", timeout=20)


def _seen_in_a_row(mesh: DemoMesh, value: str, times: int = 8) -> bool:
    return all(_seen_header(mesh) == value for _ in range(times))


def _connect_timeout(mesh: DemoMesh) -> str | None:
    status, body = mesh.admin("client", "/config_dump?resource=dynamic_active_clusters")
    assert status == 200, body[:200]
    dump: dict[str, Any] = json.loads(body)
    for entry in dump["configs"]:
        cluster = entry["cluster"]
        if cluster["name"] == RATINGS:
            return str(cluster["connect_timeout"])
    return None


def test_a_merge_changes_a_clusters_connect_timeout_in_envoy(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    before = _connect_timeout(mesh)
    assert before is not None and before != "1.250s"
    mesh.workspace.config.write("envoyfilter-timeout.yaml", TIMEOUT)
    try:
        wait_for(lambda: _connect_timeout(mesh) == "1.250s", "the merged timeout", timeout=20)
        status, line = mesh.get("client", "http://ratings:9080/")
        assert status == 200, line  # the patched cluster still carries traffic
    finally:
        mesh.workspace.config.remove("envoyfilter-timeout.yaml")
    wait_for(lambda: _connect_timeout(mesh) == before, "the generated timeout back", timeout=20)

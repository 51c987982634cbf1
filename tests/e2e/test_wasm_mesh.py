"""WasmPlugin and ECDS on the live demo mesh (netns pods, real Envoys running the V8 Wasm
runtime, `meshpilot discovery` over watched files): a proxy-wasm module built in the test
from WAT adds a request header the app sees, on reviews' inbound sidecar (SERVER) or on the
client's outbound one (CLIENT); a plugin whose match misses changes nothing; proxy-status
shows ECDS SYNCED and Envoy's config dump holds the served extension config. An EnvoyFilter
EXTENSION_CONFIG (a Lua filter) is served over ECDS too. No Envoy NACKs anything."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.live_mesh import assert_no_nacks, running_mesh, wait_for
from tests.wasm_module import HEADER, build_module

from meshpilot.demo.mesh import DemoMesh
from meshpilot.proxyinfo.status import read_syncz

pytestmark = pytest.mark.envoy

NAME, VALUE = HEADER
PLUGIN = """\
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: add-header, namespace: default}}
spec:
  selector: {{matchLabels: {{app: {app}}}}}
  url: file://{module}
  phase: STATS
  pluginConfig: {{greeting: hello}}
  match: [{{mode: {mode}}}]
"""
LUA_BY_ECDS = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: reviews-lua-ecds, namespace: default}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
  - applyTo: EXTENSION_CONFIG
    patch:
      operation: ADD
      value:
        name: default.lua-ecds
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          default_source_code:
            inline_string: |
              function envoy_on_request(handle)
                handle:headers():add("x-lua", "by-ecds")
              end
  - applyTo: HTTP_FILTER
    match:
      context: SIDECAR_INBOUND
      listener:
        filterChain:
          filter:
            name: envoy.filters.network.http_connection_manager
            subFilter: {name: envoy.filters.http.router}
    patch:
      operation: INSERT_BEFORE
      value:
        name: default.lua-ecds
        config_discovery:
          config_source: {ads: {}, initial_fetch_timeout: 0s}
          type_urls: [type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua]
"""
ECDS_NAME = "extensions.istio.io/wasmplugin/default.add-header"


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


@pytest.fixture(scope="module")
def module() -> Iterator[Path]:
    # Envoy runs as the proxy's uid 1337: the module's folder must be readable by it
    # (pytest's tmp folders are private to root).
    folder = Path(tempfile.mkdtemp(prefix="meshpilot-wasm-"))
    folder.chmod(0o755)
    try:
        path = build_module(folder / "add_header.wasm")
        path.chmod(0o644)
        yield path
    finally:
        shutil.rmtree(folder)


@pytest.fixture(autouse=True)
def _no_nacks(mesh: DemoMesh) -> Iterator[None]:
    yield
    assert_no_nacks(mesh)


def _seen(mesh: DemoMesh, header: str = NAME) -> str:
    status, line = mesh.get("client", f"http://reviews:9080/header?name={header}")
    assert status == 200, line
    return line.rpartition(f" {header}=")[2]


def _in_a_row(mesh: DemoMesh, value: str, header: str = NAME, times: int = 8) -> bool:
    # Both reviews pods' sidecars updated: every request of a row sees it.
    return all(_seen(mesh, header) == value for _ in range(times))


def _pods(mesh: DemoMesh, app: str) -> list[str]:
    """The pods of `app` (reviews-v1, reviews-v2; client, not client-locked)."""
    return [p for p in mesh.pods if re.fullmatch(rf"{app}(-v\d+.*)?", p)]


def _ecds_dump(mesh: DemoMesh, pod: str) -> list[str]:
    status, body = mesh.admin(pod, "/config_dump?resource=ecds_filters")
    assert status == 200, body[:200]
    configs = json.loads(body).get("configs", [])
    return sorted(c["ecds_filter"]["name"] for c in configs)


def _ecds_status(mesh: DemoMesh, app: str) -> set[str]:
    assert mesh.control is not None
    syncs = read_syncz(mesh.control.url)
    pods = _pods(mesh, app)
    return {s.status("ecds") for s in syncs if s.proxy.split(".")[0] in pods}


@pytest.mark.parametrize(("app", "mode"), [("reviews", "SERVER"), ("client", "CLIENT")])
def test_a_wasm_module_adds_a_header_the_app_sees(
    mesh: DemoMesh, module: Path, app: str, mode: str
) -> None:
    assert mesh.workspace is not None
    assert _seen(mesh) == ""
    mesh.workspace.config.write("wasm.yaml", PLUGIN.format(app=app, module=module, mode=mode))
    try:
        wait_for(lambda: _in_a_row(mesh, VALUE), "the Wasm header", timeout=30)
        for pod in _pods(mesh, app):
            assert _ecds_dump(mesh, pod) == [ECDS_NAME]
        assert _ecds_status(mesh, app) == {"SYNCED"}
    finally:
        mesh.workspace.config.remove("wasm.yaml")
    wait_for(lambda: _in_a_row(mesh, ""), "the Wasm filter gone", timeout=30)


def test_a_plugin_whose_mode_misses_changes_nothing(mesh: DemoMesh, module: Path) -> None:
    assert mesh.workspace is not None
    # CLIENT on reviews: its outbound listeners get it, the inbound path the client uses not.
    mesh.workspace.config.write(
        "wasm.yaml", PLUGIN.format(app="reviews", module=module, mode="CLIENT")
    )
    try:
        wait_for(lambda: _ecds_status(mesh, "reviews") == {"SYNCED"}, "ECDS sent", timeout=30)
        assert _in_a_row(mesh, "")
    finally:
        mesh.workspace.config.remove("wasm.yaml")


def test_an_envoy_filter_extension_config_is_served_over_ecds(mesh: DemoMesh) -> None:
    assert mesh.workspace is not None
    mesh.workspace.config.write("lua-ecds.yaml", LUA_BY_ECDS)
    try:
        wait_for(lambda: _in_a_row(mesh, "by-ecds", "x-lua"), "the Lua header", timeout=30)
        for pod in _pods(mesh, "reviews"):
            # An earlier test's plugin leaves Envoy's ECDS dump once Envoy lets go of it.
            wait_for(
                lambda pod=pod: _ecds_dump(mesh, pod) == ["default.lua-ecds"],
                f"only the Lua extension config on {pod}",
                timeout=30,
            )
    finally:
        mesh.workspace.config.remove("lua-ecds.yaml")
    wait_for(lambda: _in_a_row(mesh, "", "x-lua"), "the Lua filter gone", timeout=30)

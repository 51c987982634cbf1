"""`meshpilot discovery --vhds` serving a real Envoy on Delta xDS: the sidecar's route config
comes as a head with `vhds` and its virtual hosts by VHDS; requests route through them; a
VirtualService edit reroutes traffic by re-sending only the changed virtual host. The
fixtures of test_ads_envoy.py fail the test on any NACK (Envoy's or the control plane's)."""

from __future__ import annotations

import ast
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.ads_harness import http_get, istio_metadata, wait_for
from tests.e2e.ads_mesh import (
    ROUTING,
    Backend,
    DiscoveryFactory,
    EnvoyFactory,
    Mesh,
    _handler,
    write,
)
from tests.e2e.test_ads_envoy import start_discovery, start_envoy

from meshpilot.runtime.ports import free_port

__all__ = ["start_discovery", "start_envoy"]  # the fixtures, with their NACK checks

pytestmark = pytest.mark.envoy

# A second service on the same port (a second virtual host), served by the v2-b backend.
API = """\
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: default}}
spec:
  clusterIP: 10.96.100.2
  selector: {{app: api}}
  ports: [{{name: http, port: {port}, targetPort: {port}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: api-1, namespace: default, labels: {{app: api}}}}
status: {{podIP: 127.0.0.4}}
"""


EXTRA = """\
apiVersion: v1
kind: Service
metadata: {{name: extra, namespace: default}}
spec:
  clusterIP: 10.96.100.3
  selector: {{app: extra}}
  ports: [{{name: http, port: {port}, targetPort: {port}}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: extra-1, namespace: default, labels: {{app: extra}}}}
status: {{podIP: 127.0.0.2}}
"""


@pytest.fixture
def vhds_mesh(
    tmp_path: Path, start_discovery: DiscoveryFactory, start_envoy: EnvoyFactory
) -> Iterator[Mesh]:
    mesh = Mesh(tmp_path, start_discovery, start_envoy)
    write(mesh.dir / "api.yaml", API.format(port=mesh.port))
    mesh.discovery = start_discovery([mesh.dir], extra_args=("--vhds",))
    node = "sidecar~127.0.0.1~client.default~default.svc.cluster.local"
    metadata = istio_metadata("default", {"app": "client"}, interception="NONE")
    mesh.envoy = start_envoy("client", node, metadata, discovery=mesh.discovery, delta=True)
    mesh.envoy.wait_live()
    yield mesh
    mesh.stop()


def _call(mesh: Mesh, host: str) -> tuple[int, str]:
    return http_get(f"http://127.0.0.1:{mesh.port}/", {"Host": host}, timeout=2)


def _route_config(dump: dict[str, Any], name: str) -> dict[str, Any]:
    for config in dump["configs"]:
        if config["@type"].endswith("RoutesConfigDump"):
            for entry in config.get("dynamic_route_configs", []):
                if entry["route_config"]["name"] == name:
                    return dict(entry["route_config"])
    raise AssertionError(f"Envoy has no route config {name}")


def _vhds_sent(log: str) -> list[tuple[list[str], str]]:
    """(names sent, removed) of every VHDS response in the control plane's debug log."""
    found = re.findall(r"ADS: \S+ vhds sent (\[.*?\]) removed (\[.*?\])", log)
    return [(ast.literal_eval(sent), removed) for sent, removed in found]


def test_virtual_hosts_by_vhds_route_and_a_vs_edit_resends_only_its_host(
    vhds_mesh: Mesh,
) -> None:
    mesh, port = vhds_mesh, vhds_mesh.port
    web_vh = f"{port}/web.default.svc.cluster.local:{port}"
    api_vh = f"{port}/api.default.svc.cluster.local:{port}"
    mesh.wait_answer("v1")
    api = f"api.default.svc.cluster.local:{port}"
    assert _call(mesh, api) == (200, "v2-b")

    config = _route_config(mesh.envoy.config_dump(), str(port))
    assert "vhds" in config, "Envoy got the route config with vhds"
    names = {vh["name"] for vh in config["virtual_hosts"]}
    assert {web_vh, api_vh, "allow_any"} <= names, names
    first = _vhds_sent(mesh.discovery.log.read_text())
    assert first and set(first[0][0]) >= {web_vh, api_vh}

    before = {t: mesh.discovery.pushes(t) for t in ("cds", "eds", "lds", "rds", "vhds")}
    write(mesh.dir / "routing.yaml", ROUTING.format(subset="v2"))
    took = mesh.wait_answer("v2", timeout=5)
    assert took < 2, f"rerouted after {took:.2f}s"
    assert _call(mesh, api) == (200, "v2-b"), "the other virtual host still routes"
    time.sleep(0.5)
    after = {t: mesh.discovery.pushes(t) for t in before}
    sent = {t: after[t] - before[t] for t in before}
    assert sent == {"cds": 0, "eds": 0, "lds": 0, "rds": 0, "vhds": 1}, sent
    last = _vhds_sent(mesh.discovery.log.read_text())[-1]
    assert last == ([web_vh], "[]"), f"the VS change re-sent only {web_vh}: {last}"

    # A virtual host removed by VHDS leaves Envoy's table (its service is gone).
    (mesh.dir / "api.yaml").unlink()

    def api_gone() -> bool:
        names = {vh["name"] for vh in _route_config(mesh.envoy.config_dump(), str(port))[
            "virtual_hosts"]}  # fmt: skip
        return api_vh not in names and web_vh in names

    wait_for(api_gone, f"{api_vh} removed from Envoy's route table", 5)
    assert mesh.call() == (200, "v2")


def test_a_new_port_gets_its_route_config_and_virtual_hosts(vhds_mesh: Mesh) -> None:
    """A new listener's route config (a new VHDS subscription, which names nothing) gets its
    virtual hosts unasked, and the listener serves."""
    mesh = vhds_mesh
    mesh.wait_answer("v1")
    port = free_port()
    backend = Backend(("127.0.0.2", port), _handler(b"extra"))
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    try:
        write(mesh.dir / "extra.yaml", EXTRA.format(port=port))
        host = f"extra.default.svc.cluster.local:{port}"

        def served() -> bool:
            reply = http_get(f"http://127.0.0.1:{port}/", {"Host": host}, timeout=2)
            return reply == (200, "extra")

        wait_for(served, "the new port's virtual host routes", 10)
        config = _route_config(mesh.envoy.config_dump(), str(port))
        assert f"{port}/{host}" in {vh["name"] for vh in config["virtual_hosts"]}
    finally:
        backend.shutdown()
        backend.server_close()

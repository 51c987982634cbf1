"""The demo's pods come from injection: each workload is a Pod object injected as a cluster
would inject it and started by `meshpilot run`'s runner (istio-init's capture, the
istio-proxy container's agent on the control plane's socket), not by hand."""

from __future__ import annotations

import http.cookiejar
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.live_mesh import running_mesh

from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.topology import EGRESS_POD, INGRESS_POD


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh(ui=True)


def test_every_pod_is_an_injected_pod_started_by_the_runner(mesh: DemoMesh) -> None:
    injected = {name for name, running in mesh.running.items() if running.item.injected}
    assert set(mesh.running) == set(mesh.pods)
    assert injected == set(mesh.pods) - {"httpbin"}  # the external server is outside the mesh
    client = mesh.running["client"]
    assert [c.name for c in client.plan.init_containers] == ["istio-init"]
    assert [c.name for c in client.plan.containers] == ["client", "istio-proxy"]
    for gateway in (INGRESS_POD, EGRESS_POD):  # the gateway template: no capture, a router
        plan = mesh.running[gateway].plan
        assert plan.init_containers == () and plan.containers[0].argv[1:3] == ("proxy", "router")
    agent = next(p for p in mesh.pods["client"].processes if p.role == "istio-proxy")
    argv = Path(f"/proc/{agent.popen.pid}/cmdline").read_bytes().split(b"\0")
    assert b"--discovery-address" in argv
    assert argv[argv.index(b"--discovery-address") + 1].startswith(b"unix:")
    assert b"istiod.istio-system.svc:15012" not in argv


def test_injected_pods_serve_the_mesh(mesh: DemoMesh) -> None:
    status, line = mesh.get("client", "http://reviews:9080/")
    assert status == 200
    assert line.endswith("caller=spiffe://cluster.local/ns/default/sa/client"), line


def test_the_web_ui_shows_the_demo_mesh(mesh: DemoMesh) -> None:
    """`meshpilot demo` brings the web UI up beside the mesh: log in with the generated
    admin password, and the mesh page lists the demo's proxies, all in sync."""
    ui = mesh.web_ui
    assert ui is not None
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar)
    )
    form = urllib.parse.urlencode(
        {"username": "admin", "password": ui.password_file.read_text().strip()}
    ).encode()
    login = urllib.request.Request(ui.url + "login", data=form, headers={"Origin": ui.url[:-1]})
    with opener.open(login, timeout=10) as reply:
        assert reply.status == 200  # after the redirect to the applications page
    with opener.open(ui.url + "mesh", timeout=10) as reply:
        page = reply.read().decode()
    for name in ("client.default", "reviews-v2.default", "istio-ingressgateway"):
        assert name in page, name
    assert "SYNCED" in page and "NACKED" not in page

"""The demo's pods come from injection: each workload is a Pod object injected as a cluster
would inject it and started by `meshpilot run`'s runner (istio-init's capture, the
istio-proxy container's agent on the control plane's socket), not by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.live_mesh import running_mesh
from tests.e2e.ui_harness import chromium, login, shot

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


def test_the_web_ui_shows_the_demo_mesh_and_explains_a_request(
    mesh: DemoMesh, tmp_path: Path
) -> None:
    """`meshpilot demo` brings the web UI up beside the mesh: in a real browser, log in with the
    generated admin password; the mesh page lists the demo's proxies in sync, and the request
    path of client -> reviews for user jason ends at reviews v2."""
    ui = mesh.web_ui
    assert ui is not None
    url = ui.url.rstrip("/")
    with chromium(tmp_path) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(20_000)
        login(page, url, "admin", ui.password_file.read_text().strip())
        page.get_by_role("link", name="Mesh", exact=True).click()
        page.wait_for_url(url + "/mesh")
        for proxy in ("client.default", "productpage-v1.default", "reviews-v2.default"):
            cells = page.get_by_role("row", name=proxy).locator("td").all_inner_texts()
            assert cells[0] == proxy and cells[2:6] == ["SYNCED"] * 4, cells
        shot(page, "demo-mesh-1280-light")
        page.get_by_role("link", name="Request path").click()
        page.get_by_label("Source pod (POD.NAMESPACE)").fill("client.default")
        page.get_by_label("URL").fill("http://reviews:9080/")
        page.get_by_label("Headers (one a line)").fill("end-user: jason")
        page.get_by_role("button", name="Explain").click()
        verdict = page.locator("#verdict").inner_text()
        assert "outbound|9080|v2|reviews.default.svc.cluster.local" in verdict, verdict
        shot(page, "demo-explain-1280-light")
        page.close()

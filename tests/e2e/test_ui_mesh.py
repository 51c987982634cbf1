"""The UI's mesh pages in a real browser against a real control plane with a real Envoy
connected (the proxy-info mesh: `meshpilot discovery`, a sidecar agent for client.default):
the proxies with their xDS sync state per type, one proxy's listeners, routes, clusters,
endpoints and certificates, and a request's path explained, as `gitops serve --discovery`
shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.ads_harness import DiscoveryProcess, wait_for
from tests.e2e.ads_mesh import APP, write
from tests.e2e.agent_harness import agent_factory, http_get
from tests.e2e.test_proxy_info import PROXY, ROUTING, WEB, ProxyMesh, _synced
from tests.e2e.ui_harness import ADMIN_PASSWORD, Served, chromium, gitops_serve, login, shot
from tests.e2e.workload_sds import WorkloadSds

from meshpilot.agent.options import sds_socket_path
from meshpilot.runtime.ports import free_port

pytestmark = pytest.mark.envoy


# The client pod as a mesh workload (its sidecar label), so a request can be explained from it.
CLIENT = "labels: {app: client}"
MESH_CLIENT = "labels: {app: client, security.istio.io/tlsMode: istio}"
# A DestinationRule for a host no service has: the analyzer's IST0174 on the mesh page.
GHOST = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ghost, namespace: default}
spec:
  host: ghost.default.svc.cluster.local
"""


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[ProxyMesh]:
    """The proxy-info mesh (tests/e2e/test_proxy_info.py) with a real Envoy for client."""
    port = free_port()
    config = tmp_path / "config"
    config.mkdir()
    app = APP.format(port=port)
    assert CLIENT in app
    write(config / "app.yaml", app.replace(CLIENT, MESH_CLIENT))
    write(config / "routing.yaml", ROUTING)
    write(config / "ghost.yaml", GHOST)
    discovery = DiscoveryProcess([config], tmp_path)
    agents = agent_factory(tmp_path, drain=1.0)
    start_agent = next(agents)
    sds: WorkloadSds | None = None
    try:
        discovery.start()
        agent = start_agent(
            "sidecar", "--pod", PROXY, "--interception-mode", "NONE", "--label", "app=client",
            discovery_port=discovery.xds_port,
        )  # fmt: skip
        socket = sds_socket_path(agent.work_dir)
        wait_for(lambda: socket.parent.is_dir(), "the agent's SDS socket directory")
        sds = WorkloadSds(socket).start()
        ready = (200, "LIVE\n")
        wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready") == ready, "Envoy LIVE", 30)
        wait_for(lambda: _synced(discovery), "every xDS type ACKed", 20)
        yield ProxyMesh(port, discovery, agent, sds)
    finally:
        agents.close()
        if sds is not None:
            sds.stop()
        status = discovery.stop()
    assert status == 0, f"discovery exited {status}:\n{discovery.log.read_text()[-3000:]}"


@pytest.fixture
def served(mesh: ProxyMesh, tmp_path: Path) -> Iterator[Served]:
    with gitops_serve(tmp_path / "gitops", ("--discovery", mesh.discovery_url)) as served:
        yield served


def test_mesh_pages_show_proxy_status_and_config(
    mesh: ProxyMesh,
    served: Served,
    tmp_path: Path,
) -> None:
    with chromium(tmp_path) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(20_000)
        login(page, served.url, "admin", ADMIN_PASSWORD)
        page.get_by_role("link", name="Mesh", exact=True).click()
        page.wait_for_url(served.url + "/mesh")
        row = page.get_by_role("row", name=PROXY)
        cells = row.locator("td").all_inner_texts()
        # proxy, cluster, CDS, LDS, EDS, RDS, version: every type ACKed by the real Envoy
        assert cells[0] == PROXY and cells[2:6] == ["SYNCED"] * 4, cells
        findings = page.locator("table.findings").inner_text()
        assert "IST0174" in findings and "DestinationRule default/ghost" in findings, findings
        assert "ghost.yaml:1" in findings
        shot(page, "mesh-1280-light")

        page.get_by_role("link", name=PROXY).click()
        page.wait_for_url(served.url + "/mesh/proxies/" + PROXY)
        assert "Source: control plane" in page.inner_text("main")
        for section in ("Listeners", "Routes", "Clusters", "Endpoints", "Certificates"):
            assert page.get_by_role("heading", name=section).is_visible(), section
        clusters = page.locator("#clusters").inner_text()
        assert WEB in clusters and "v1" in clusters and "v2" in clusters
        routes = page.locator("#routes").inner_text()
        assert WEB.split(".")[0] in routes
        xds = page.locator("table.xds").inner_text()
        assert "LDS" in xds and "SYNCED" in xds
        shot(page, "mesh-proxy-1280-light")

        # The request path: from the client's sidecar to web, subset v1 by the VirtualService.
        page.get_by_role("link", name="Request path").click()
        page.get_by_label("Source pod (POD.NAMESPACE)").fill(PROXY)
        page.get_by_label("URL").fill(f"http://{WEB}:{mesh.port}/")
        page.get_by_role("button", name="Explain").click()
        verdict = page.locator("#verdict").inner_text()
        assert f"outbound|{mesh.port}|v1|{WEB}" in verdict, verdict
        hops = page.locator("ol.hops").inner_text()
        assert "VirtualService default/web" in hops and "DestinationRule default/web" in hops
        assert page.get_by_role("img", name="the request's path").is_visible()
        shot(page, "mesh-explain-1280-light")
        page.goto(served.url + "/mesh/explain?from=nope.default&url=http://web/")
        assert "nope.default: no Pod named 'nope'" in page.get_by_role("alert").inner_text()

        # An unknown proxy: the control plane's answer, not a traceback.
        page.goto(served.url + "/mesh/proxies/nope.default")
        assert "unknown proxy nope.default" in page.get_by_role("alert").inner_text()
        page.close()

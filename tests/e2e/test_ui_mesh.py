"""The UI's mesh pages in a real browser against a real control plane with a real Envoy
connected (the proxy-info mesh: `meshpilot discovery`, a sidecar agent for client.default):
the proxies with their xDS sync state per type, then one proxy's listeners, routes,
clusters, endpoints and certificates, as `gitops serve --discovery` shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.e2e.test_proxy_info import PROXY, WEB, ProxyMesh, mesh  # noqa: F401 (the fixture)
from tests.e2e.ui_harness import ADMIN_PASSWORD, Served, chromium, gitops_serve, login, shot

pytestmark = pytest.mark.envoy


@pytest.fixture
def served(mesh: ProxyMesh, tmp_path: Path) -> Iterator[Served]:  # noqa: F811
    with gitops_serve(tmp_path / "gitops", ("--discovery", mesh.discovery_url)) as served:
        yield served


def test_mesh_pages_show_proxy_status_and_config(
    mesh: ProxyMesh,  # noqa: F811
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

        # An unknown proxy: the control plane's answer, not a traceback.
        page.goto(served.url + "/mesh/proxies/nope.default")
        assert "unknown proxy nope.default" in page.get_by_role("alert").inner_text()
        page.close()

"""VHDS (opt-in `--vhds`): Delta sidecars get route config heads and virtual hosts apart, and
a VirtualService change sends only the virtual hosts it changed. Envoy itself: tests/e2e."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.config.route.v3 import route_pb2
from envoy.service.discovery.v3 import discovery_pb2

from meshpilot.config.loader import load_text
from meshpilot.model.push_context import build_push_context
from meshpilot.settings import Settings
from meshpilot.xds.generate import generate_proxy_config, generator
from meshpilot.xds.generate.routes.vhds import merge_virtual_hosts, route_config_of
from meshpilot.xds.protos import TypeUrl
from meshpilot.xds.server import DiscoveryServer
from tests.conftest import proxy_for
from tests.unit.xds_server.test_server import Harness, Stream

APP = """apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.20
  selector: {app: web}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec:
  clusterIP: 10.96.0.21
  selector: {app: api}
  ports: [{name: http, port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
status: {podIP: 10.0.0.9}
"""
VS = """---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  http:
  - timeout: TIMEOUT
    route:
    - destination: {host: web.default.svc.cluster.local}
"""


def _vs(timeout: str) -> str:
    return VS.replace("TIMEOUT", timeout)


WEB_VH = "8080/web.default.svc.cluster.local:8080"
API_VH = "8080/api.default.svc.cluster.local:8080"


def _vhds_harness(tmp: Path) -> Harness:
    (tmp / "app.yaml").write_text(APP + _vs("3s"))
    h = Harness(tmp)
    h.edit(APP + _vs("3s"))
    h.store.load()
    h.server = DiscoveryServer(h.store, Settings(debounce_after=0.02, debounce_max=1, vhds=True))
    return h


def _run_vhds(tmp: Path, scenario: object) -> None:
    async def main() -> None:
        async with _vhds_harness(tmp) as h:
            await scenario(h)  # type: ignore[operator]

    asyncio.run(asyncio.wait_for(main(), timeout=20))


async def _ack(s: Stream, type_url: str, nonce: str) -> None:
    s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=type_url, response_nonce=nonce))


def test_vs_change_sends_only_the_changed_virtual_host(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream(delta=True)
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.ROUTE,
                                                   resource_names_subscribe=["8080"]))  # fmt: skip
        rds = await s.recv()
        (head,) = [route_pb2.RouteConfiguration.FromString(r.resource.value) for r in rds.resources]
        assert head.name == "8080" and head.HasField("vhds")
        assert head.vhds.config_source.HasField("ads")
        assert [vh.name for vh in head.virtual_hosts] == ["allow_any"]
        await _ack(s, TypeUrl.ROUTE, rds.nonce)
        # As Envoy does: the VHDS subscription names the route config.
        s.send(discovery_pb2.DeltaDiscoveryRequest(type_url=TypeUrl.VIRTUAL_HOST,
                                                   resource_names_subscribe=["8080"]))  # fmt: skip
        vhds = await s.recv()
        assert vhds.type_url == TypeUrl.VIRTUAL_HOST
        assert sorted(r.name for r in vhds.resources) == [API_VH, WEB_VH]
        assert not vhds.removed_resources
        for r in vhds.resources:
            assert rc.VirtualHost.FromString(r.resource.value).name == r.name
        await _ack(s, TypeUrl.VIRTUAL_HOST, vhds.nonce)

        h.edit(APP + _vs("5s"))
        pushed = await s.recv()
        assert pushed.type_url == TypeUrl.VIRTUAL_HOST, "the route config head is unchanged"
        assert [r.name for r in pushed.resources] == [WEB_VH]
        (vh,) = [rc.VirtualHost.FromString(r.resource.value) for r in pushed.resources]
        assert vh.routes[0].route.timeout.seconds == 5
        await _ack(s, TypeUrl.VIRTUAL_HOST, pushed.nonce)

        h.edit(APP.split("---\n")[0] + "---\n" + APP.split("---\n")[2] + _vs("5s"))
        gone = await s.recv()
        assert gone.type_url == TypeUrl.VIRTUAL_HOST and not gone.resources
        assert list(gone.removed_resources) == [API_VH]
        assert h.server.metrics.pushes.get("rds") == 1, "only the first route config head"
        s.close()

    _run_vhds(tmp_path, scenario)


def test_sotw_proxies_keep_whole_route_configs(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        s = h.stream()
        s.send(discovery_pb2.DiscoveryRequest(type_url=TypeUrl.ROUTE, resource_names=["8080"]))
        rds = await s.recv()
        (config,) = [route_pb2.RouteConfiguration.FromString(r.value) for r in rds.resources]
        assert not config.HasField("vhds")
        names = {vh.name for vh in config.virtual_hosts}
        assert "web.default.svc.cluster.local:8080" in names
        s.close()

    _run_vhds(tmp_path, scenario)


def test_heads_and_virtual_hosts_merge_into_the_whole_route_config() -> None:
    loaded = load_text(APP + _vs("3s"))
    push = build_push_context(loaded.objects, loaded.mesh)
    proxy = proxy_for(push, "client.default")
    whole = generator(TypeUrl.ROUTE, proxy.type)(push, proxy, ["8080"])
    served = replace(proxy, vhds=True)
    (head,) = generator(TypeUrl.ROUTE, proxy.type)(push, served, ["8080"])
    vhosts = generator(TypeUrl.VIRTUAL_HOST, proxy.type)(push, served, ["8080"])
    merged = merge_virtual_hosts(head, vhosts)
    for vh in merged.virtual_hosts:
        if "/" in vh.name:
            vh.name = vh.name.split("/", 1)[1]
    assert sorted(merged.virtual_hosts, key=lambda v: v.name) == sorted(
        whole[0].virtual_hosts, key=lambda v: v.name
    )
    # Views (config_dump, proxy-config) show the whole table for a proxy served by VHDS.
    assert generate_proxy_config(push, served).to_dict() == (
        generate_proxy_config(push, proxy).to_dict()
    )
    # On-demand names (`<route config>/<host>`) resolve to their route config.
    assert route_config_of("8080/web.default.svc.cluster.local") == "8080"
    assert route_config_of("8080") == "8080"

"""The DNS name table discovery serves a sidecar's agent (Istio's NDS): over the gRPC
port, fetched with the agent's own client, built from the proxy's Sidecar scope."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from meshpilot.agent.name_table_client import NameTableClient
from meshpilot.model.name_table import NameInfo, NameTableError, build_name_table
from meshpilot.registry.model import Resolution, Service
from meshpilot.runtime.ports import free_port
from meshpilot.settings import Settings
from meshpilot.store import FileStore
from meshpilot.xds.server import DiscoveryServer

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.5
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: hidden, namespace: private}
spec:
  clusterIP: 10.96.0.9
  ports: [{name: http, port: 80}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.test]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.7}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.example.test]
  addresses: [192.0.2.10]
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild, namespace: default}
spec:
  hosts: ["*.wild.test"]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: NONE
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: v1
kind: Pod
metadata: {name: app-1, namespace: default, labels: {app: app}}
spec:
  containers: [{name: app, image: app}]
status: {podIP: 10.1.0.4}
"""


def fetch(tmp: Path, proxy_id: str, auto_allocate: bool) -> dict[str, NameInfo]:
    (tmp / "mesh.yaml").write_text(MESH)
    store = FileStore([tmp])
    store.load()

    async def main() -> dict[str, NameInfo]:
        server = DiscoveryServer(store, Settings())
        port = await server.start("127.0.0.1", 0)
        try:
            client = NameTableClient(f"127.0.0.1:{port}", proxy_id, auto_allocate=auto_allocate)
            return await client.fetch()
        finally:
            await server.stop(0)

    return asyncio.run(main())


def test_table_of_a_pod_with_auto_allocation(tmp_path: Path) -> None:
    table = fetch(tmp_path, "app-1.default", auto_allocate=True)
    assert table["reviews.default.svc.cluster.local"] == NameInfo(
        ("10.96.0.5",), "Kubernetes", "reviews", "default"
    )
    assert table["db.example.test"] == NameInfo(("192.0.2.10",), "External")
    v4, v6 = table["api.example.test"].ips
    assert v4.startswith("240.240.") and v6.startswith("2001:2::f0f0:")
    # Wildcards are never answered; the Sidecar hides the other namespace.
    assert set(table) == {
        "reviews.default.svc.cluster.local",
        "db.example.test",
        "api.example.test",
    }


def test_without_auto_allocation_hosts_without_addresses_are_left_out(tmp_path: Path) -> None:
    table = fetch(tmp_path, "app-1.default", auto_allocate=False)
    assert "api.example.test" not in table and "db.example.test" in table


def test_unknown_proxy_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = r"NOT_FOUND: no connected proxy and no Pod 'ghost\.x'"
    with pytest.raises(NameTableError, match=missing):
        fetch(tmp_path, "ghost.x", auto_allocate=True)


def _entry(host: str, namespace: str = "default", **kw: Any) -> Service:
    return Service(hostname=host, namespace=namespace, ports=(), **kw)


def test_allocation_is_stable_and_skips_passthrough_and_dot_zero() -> None:
    services = [_entry(f"h{i}.test") for i in range(300)]
    services.append(_entry("none.test", resolution=Resolution.PASSTHROUGH))
    first = build_name_table(services, auto_allocate=True)
    again = build_name_table(list(reversed(services)), auto_allocate=True)
    assert first == again
    assert "none.test" not in first
    v4s = [info.ips[0] for info in first.values()]
    assert len(set(v4s)) == 300
    assert not any(ip.endswith((".0", ".255")) for ip in v4s)


def test_keep_moves_to_the_next_replica_when_one_does_not_answer(tmp_path: Path) -> None:
    """`--discovery-address dead,live`: the agent's DNS proxy gets its table from the
    replica that answers."""
    (tmp_path / "mesh.yaml").write_text(MESH)
    store = FileStore([tmp_path])
    store.load()
    dead = free_port()  # nothing listens there

    async def main() -> dict[str, NameInfo]:
        server = DiscoveryServer(store, Settings())
        port = await server.start("127.0.0.1", 0)
        tables: list[dict[str, NameInfo]] = []
        address = f"127.0.0.1:{dead},127.0.0.1:{port}"
        client = NameTableClient(address, "app-1.default", auto_allocate=False)
        keeper = asyncio.create_task(client.keep(lambda t: tables.append(dict(t)), 0.2))
        try:
            for _ in range(100):
                if tables:
                    return tables[0]
                await asyncio.sleep(0.05)
            raise AssertionError("no table from the live replica")
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            await server.stop(0)

    assert "reviews.default.svc.cluster.local" in asyncio.run(main())

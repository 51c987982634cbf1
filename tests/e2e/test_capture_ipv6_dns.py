"""Dual-stack capture and DNS capture, proved through a real sidecar: `meshpilot discovery`,
the agent (`meshpilot proxy sidecar --dns-capture --dns-auto-allocate`) and its Envoy in
pod `app`, whose network namespace also gets an IPv6 address; pod `peer` (IPv6 too) runs
a TCP listener, an HTTP server and the upstream DNS server `app`'s resolv.conf names.

`app` has `meshpilot iptables --dual-stack --redirect-dns -i '*'` capture; Envoy's listeners
are IPv6 (the proxy's address is `app`'s IPv6 one). The app resolves the ServiceEntry host
`api.example.test` (no addresses: auto-allocated) through the agent's DNS proxy and reaches
it through Envoy over IPv6.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

import pytest
from tests.e2e.agent_harness import wait_for
from tests.e2e.capture_sidecar import ENV, envoy_stat_sum, running_discovery, start_agent
from tests.e2e.netns_probe import PYTHON, host_support_or_fail, running_cluster

from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.runtime.netns import write_netns_etc
from meshpilot.runtime.pod import Pod, PodSpec, RunAs, pod_proxy_user

APP_USER = RunAs(1000, 1000)

ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", int(sys.argv[1])))
s.listen(16)
while True:
    conn, peer = s.accept()
    conn.sendall(f"peer from={peer[0]}\n".encode())
    conn.close()
"""

CONNECT = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
    print(s.makefile().readline().strip())
"""

RESOLVE = r"""
import socket, sys
family = {"4": socket.AF_INET, "6": socket.AF_INET6}[sys.argv[2]]
print(socket.getaddrinfo(sys.argv[1], 80, family, socket.SOCK_STREAM)[0][4][0])
"""

HTTP_GET = r"""
import http.client, json, sys
conn = http.client.HTTPConnection(sys.argv[1], 80, timeout=5)
conn.request("GET", "/hello.txt", headers={"Host": sys.argv[2]})
r = conn.getresponse()
print(json.dumps({"status": r.status, "body": r.read().decode(), "headers": dict(r.getheaders())}))
"""

# The peer's DNS server: meshpilot's own DNS proxy, answering one name, as the pod's
# upstream nameserver (the agent forwards what is not a mesh name to it).
UPSTREAM_DNS = r"""
import asyncio
from meshpilot.agent.dns_proxy import DnsOptions, DnsProxy
from meshpilot.model.name_table import NameInfo
async def main():
    proxy = DnsProxy(DnsOptions(namespace="x", hosts=("::",), port=53))
    proxy.update({"www.upstream.test": NameInfo(("192.0.2.7", "2001:db8::7"))})
    await proxy.start()
    await asyncio.Event().wait()
asyncio.run(main())
"""

MESH = """\
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: api, namespace: default}}
spec:
  hosts: [api.example.test]
  location: MESH_EXTERNAL
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: "{peer}", ports: {{http: 8080}}}}]
"""


@pytest.fixture(scope="module", autouse=True)
def _host_support() -> None:
    host_support_or_fail()


@dataclass(frozen=True)
class Mesh:
    app: Pod
    peer: Pod
    app_v6: str
    peer_v6: str


def _add_ipv6(pod: Pod, address: str) -> None:
    """An address on the pod's link and a default route (a VIP such as 2001:2::f0f0:x is
    routed before capture redirects it, as in a Kubernetes pod)."""
    for argv in (
        ["ip", "-6", "addr", "add", f"{address}/64", "dev", "eth0", "nodad"],
        ["ip", "-6", "route", "add", "default", "dev", "eth0"],
    ):
        result = pod.exec(argv)
        assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    prefix = IPv6Address(f"fd00:{os.getpid() % 0xFFFF:x}:{os.urandom(2).hex()}::")
    app_v6, peer_v6 = str(prefix + 2), str(prefix + 3)
    with running_cluster() as cluster, running_discovery(MESH.format(peer=peer_v6)) as xds:
        assert cluster.bridge is not None
        base = cluster.bridge.subnet.network_address
        app_ip, peer_ip = str(base + 10), str(base + 11)
        user = pod_proxy_user(IPv4Address(app_ip))
        capture = config_from_flags(
            CaptureFlags(
                dual_stack=True,
                istio_service_cidr="*",
                proxy_uid=str(user.uid),
                proxy_gid=str(user.gid),
                redirect_dns=True,
                dns_servers=peer_v6,
            )
        )
        peer = cluster.add_pod(PodSpec(name="peer", ip=peer_ip))
        app = cluster.add_pod(PodSpec(name="app", ip=app_ip, capture=capture))
        _add_ipv6(peer, peer_v6)
        _add_ipv6(app, app_v6)
        write_netns_etc(app.netns, {"resolv.conf": f"nameserver {peer_v6}\n"})
        site = peer.workdir / "site"
        site.mkdir()
        (site / "hello.txt").write_text("hello from peer\n")
        peer.spawn("echo", [PYTHON, "-c", ECHO, "9000"])
        peer.spawn("http", [PYTHON, "-m", "http.server", "8080", "--bind", "::", "-d", str(site)])
        peer.spawn("dns", [sys.executable, "-c", UPSTREAM_DNS], env=ENV)
        for port in (9000, 8080):
            peer.wait_listening(port)
        start_agent(
            app, app_v6, xds, user, "--dns-capture", "--dns-auto-allocate",
            "--stats-inclusion-prefix", "cluster.PassthroughCluster",
        )  # fmt: skip
        # The agent has its name table once discovery knows the pod (its Envoy connected).
        wait_for(lambda: _resolves(app, "api.example.test"), "the name table", 20)
        yield Mesh(app, peer, app_v6, peer_v6)


def _resolves(pod: Pod, name: str) -> bool:
    result = pod.exec([PYTHON, "-c", RESOLVE, name, "4"], run_as=APP_USER)
    return result.returncode == 0


def _run(pod: Pod, program: str, *args: str, run_as: RunAs | None = APP_USER) -> str:
    result = pod.exec([PYTHON, "-c", program, *args], run_as=run_as, timeout=20)
    assert result.returncode == 0, f"{result.stderr[-1500:]}\n(agent log: {pod.workdir})"
    return result.stdout.strip()


def _passthrough_connections(pod: Pod) -> int:
    # Istio's alt_stat_name: `cluster.PassthroughCluster;.upstream_cx_total`
    return envoy_stat_sum(pod, "cluster.PassthroughCluster;", "upstream_cx_total")


def test_ipv6_outbound_from_the_app_goes_through_envoy(mesh: Mesh) -> None:
    before = _passthrough_connections(mesh.app)
    answer = _run(mesh.app, CONNECT, mesh.peer_v6, "9000")
    assert answer == f"peer from={mesh.app_v6}"
    assert _passthrough_connections(mesh.app) == before + 1


def test_ipv6_from_the_proxy_user_is_not_captured(mesh: Mesh) -> None:
    user = mesh.app.proxy_user
    before = _passthrough_connections(mesh.app)
    assert _run(mesh.app, CONNECT, mesh.peer_v6, "9000", run_as=user).startswith("peer from=")
    assert _passthrough_connections(mesh.app) == before


def test_inbound_passthrough_address_is_on_lo(mesh: Mesh) -> None:
    addresses = mesh.app.exec(["ip", "-6", "-o", "addr", "show", "dev", "lo"]).stdout
    assert "::6/128" in addresses


def test_the_app_resolves_a_service_entry_host_through_the_agent(mesh: Mesh) -> None:
    v4 = _run(mesh.app, RESOLVE, "api.example.test", "4")
    v6 = _run(mesh.app, RESOLVE, "api.example.test", "6")
    assert v4.startswith("240.240.") and v6.startswith("2001:2::f0f0:")


def test_other_names_are_forwarded_to_the_pods_nameserver(mesh: Mesh) -> None:
    assert _run(mesh.app, RESOLVE, "www.upstream.test", "6") == "2001:db8::7"


def test_the_app_reaches_the_service_entry_host_through_envoy(mesh: Mesh) -> None:
    vip = _run(mesh.app, RESOLVE, "api.example.test", "6")
    reply = json.loads(
        wait_for(
            lambda: _ok(_run(mesh.app, HTTP_GET, vip, "api.example.test")),
            "a 200 from api.example.test through Envoy",
            20,
        )
    )
    assert reply["body"] == "hello from peer\n"
    assert "x-envoy-upstream-service-time" in {k.lower() for k in reply["headers"]}


def _ok(text: str) -> str | None:
    return text if json.loads(text)["status"] == 200 else None

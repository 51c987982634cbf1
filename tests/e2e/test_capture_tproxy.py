"""TPROXY interception through a real sidecar: `meshpilot iptables -m TPROXY` in pod `app`
(mangle rules, marks, the fwmark policy route), the agent with `--interception-mode TPROXY`
(Envoy as root in the proxy group, transparent listeners, original_src on virtualInbound).

A connection from pod `peer` to the app lands on Envoy's virtualInbound and reaches the app
with the peer's own address as its source, which REDIRECT mode cannot keep (the app would
see 127.0.0.6)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv4Address

import pytest
from tests.e2e.capture_sidecar import envoy_stat_sum, running_discovery, start_agent
from tests.e2e.netns_probe import PYTHON, host_support_or_fail, running_cluster

from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.runtime.pod import Pod, PodSpec, RunAs, pod_proxy_user

APP_USER = RunAs(1000, 1000)

# An HTTP app answering with the address each request came from.
SOURCE_ECHO = r"""
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"app from={self.client_address[0]}\n".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("0.0.0.0", int(sys.argv[1])), Handler).serve_forever()
"""

GET = r"""
import http.client, sys
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)
conn.request("GET", "/")
r = conn.getresponse()
print(r.status, r.read().decode().strip(), r.getheader("server"))
"""

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  selector: {app: app}
  ports: [{name: tcp-echo, port: 8080}]
"""


@pytest.fixture(scope="module", autouse=True)
def _host_support() -> None:
    host_support_or_fail()


@dataclass(frozen=True)
class Pods:
    app: Pod
    peer: Pod


@pytest.fixture(scope="module")
def pods() -> Iterator[Pods]:
    with running_cluster() as cluster, running_discovery(MESH) as xds:
        assert cluster.bridge is not None
        base = cluster.bridge.subnet.network_address
        app_ip, peer_ip = str(base + 20), str(base + 21)
        user = pod_proxy_user(IPv4Address(app_ip))
        # Envoy runs as root in TPROXY mode (as Istio runs it): its group lets it out.
        capture = config_from_flags(
            CaptureFlags(
                istio_inbound_interception_mode="TPROXY",
                istio_inbound_ports="*",
                istio_local_exclude_ports="15090,15020,15021",
                proxy_uid=str(user.uid),
                proxy_gid=str(user.gid),
            )
        )
        peer = cluster.add_pod(PodSpec(name="peer", ip=peer_ip))
        app = cluster.add_pod(PodSpec(name="app", ip=app_ip, capture=capture))
        app.spawn("echo", [PYTHON, "-c", SOURCE_ECHO, "8080"], APP_USER)
        app.wait_listening(8080)
        start_agent(
            app, app_ip, xds, user, "--interception-mode", "TPROXY",
            "--stats-inclusion-prefix", "cluster.InboundPassthroughCluster",
        )  # fmt: skip
        yield Pods(app, peer)


def _inbound_connections(pod: Pod) -> int:
    return envoy_stat_sum(pod, "cluster.InboundPassthroughCluster", "upstream_cx_total")


def test_inbound_goes_through_envoy_and_keeps_the_callers_address(pods: Pods) -> None:
    before = _inbound_connections(pods.app)
    result = pods.peer.exec([PYTHON, "-c", GET, str(pods.app.ip), "8080"])
    assert result.returncode == 0, result.stderr
    # Envoy answered (its `server: istio-envoy`), the app saw the peer, not 127.0.0.6.
    assert result.stdout.strip() == f"200 app from={pods.peer.ip} istio-envoy"
    assert _inbound_connections(pods.app) == before + 1


def test_policy_route_and_marks_are_in_place(pods: Pods) -> None:
    rules = pods.app.exec(["ip", "rule", "show"]).stdout
    assert "fwmark 0x539 lookup 133" in rules
    routes = pods.app.exec(["ip", "route", "show", "table", "133"]).stdout
    assert routes.startswith("local default dev lo")

"""PeerAuthentication DISABLE on a port whose protocol is sniffed (no name, no appProtocol):
plaintext that is not HTTP still reaches the app through the sidecar's inbound listener.

The plaintext HTTP chain matches transport `raw_buffer`; Envoy picks the most specific
transport first and never falls back from it, so the TCP chain must match `raw_buffer` too."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address

import pytest
from tests.e2e.capture_sidecar import envoy_stat_sum, running_discovery, start_agent
from tests.e2e.netns_probe import PYTHON, host_support_or_fail, running_cluster

from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.runtime.pod import Pod, PodSpec, RunAs, pod_proxy_user

APP_USER = RunAs(1000, 1000)

# A line protocol: the client speaks first with something that is not HTTP.
ECHO = r"""
import socketserver, sys
class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(b"echo " + self.rfile.readline())
socketserver.TCPServer(("0.0.0.0", int(sys.argv[1])), Echo).serve_forever()
"""

SEND = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
    s.sendall(b"\x00\x01 not http\n")
    print(s.makefile("rb").readline().decode().strip())
"""

MESH = """\
apiVersion: v1
kind: Service
metadata: {name: app, namespace: default}
spec:
  selector: {app: app}
  ports: [{port: 9000}]
"""


@pytest.fixture(scope="module", autouse=True)
def _host_support() -> None:
    host_support_or_fail()


@pytest.fixture(scope="module")
def pods() -> Iterator[tuple[Pod, Pod]]:
    with running_cluster() as cluster, running_discovery(MESH) as xds:
        assert cluster.bridge is not None
        base = cluster.bridge.subnet.network_address
        app_ip, peer_ip = str(base + 30), str(base + 31)
        user = pod_proxy_user(IPv4Address(app_ip))
        capture = config_from_flags(
            CaptureFlags(
                istio_inbound_ports="*",
                istio_local_exclude_ports="15090,15020,15021",
                proxy_uid=str(user.uid),
                proxy_gid=str(user.gid),
            )
        )
        peer = cluster.add_pod(PodSpec(name="peer", ip=peer_ip))
        app = cluster.add_pod(PodSpec(name="app", ip=app_ip, capture=capture))
        app.spawn("echo", [PYTHON, "-c", ECHO, "9000"], APP_USER)
        app.wait_listening(9000)
        start_agent(app, app_ip, xds, user, "--stats-inclusion-prefix", "listener")
        yield app, peer


def test_plaintext_tcp_on_a_sniffed_port_reaches_the_app(pods: tuple[Pod, Pod]) -> None:
    app, peer = pods
    result = peer.exec([PYTHON, "-c", SEND, str(app.ip), "9000"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "echo \x00\x01 not http"
    # Through Envoy, not around it: no connection was refused for want of a filter chain.
    assert envoy_stat_sum(app, "listener", "no_filter_chain_match") == 0

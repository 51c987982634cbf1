"""What `meshpilot run` starts for the injected containers: the agent pointed at the control
plane's socket with the pod's own proxy user, istio-init letting exactly that user out."""

from __future__ import annotations

from pathlib import Path

from meshpilot.runtime.pod import RunAs
from meshpilot.runtime.run.access import MESHPILOT_ARGV, MeshAccess, agent_argv, capture_argv

ACCESS = MeshAccess(Path("/run/cp/secure.sock"), Path("/ca/root-cert.pem"), Path("/ca"))
USER = RunAs(183762946, 1337)


def test_agent_reaches_the_control_plane_socket_not_istiod() -> None:
    injected = ["meshpilot", "proxy", "sidecar", "--discovery-address",
                "istiod.istio-system.svc:15012", "--ca-address=istiod.istio-system.svc:15012",
                "--root-cert", "/pod/volumes/istiod-ca-cert/root-cert.pem", "--no-tls",
                "--ip", "10.0.0.5", "--proxy-uid", "1337"]  # fmt: skip
    argv = agent_argv(injected, ACCESS, USER, Path("/tmp/mprun-x/1"))
    assert argv[: len(MESHPILOT_ARGV)] == list(MESHPILOT_ARGV)
    assert argv[len(MESHPILOT_ARGV) :] == [
        "proxy", "sidecar", "--root-cert", "/pod/volumes/istiod-ca-cert/root-cert.pem",
        "--ip", "10.0.0.5",
        "--discovery-address", "unix:/run/cp/secure.sock", "--tls",
        "--run-as-proxy-uid", "--proxy-uid", "183762946", "--proxy-gid", "1337",
        "--work-dir", "/tmp/mprun-x/1",
    ]  # fmt: skip


def test_capture_lets_the_pods_own_proxy_user_through() -> None:
    injected = ["meshpilot", "iptables", "-p", "15001", "-z", "15006", "-u", "1337",
                "-m", "REDIRECT", "-x", "", "-d", "15090,15021,15020"]  # fmt: skip
    argv = capture_argv(injected, USER)
    assert argv[len(MESHPILOT_ARGV) :] == [
        "iptables", "-p", "15001", "-z", "15006", "-m", "REDIRECT", "-x", "",
        "-d", "15090,15021,15020", "-u", "183762946", "-g", "1337",
    ]  # fmt: skip

"""Tiny TCP listener and client run inside pods (as `python3 -c` programs), and the check
every netns test starts with.

The listener answers every connection with one line, `<label>:<port> orig=<ip>:<port>`,
where `orig` is the connection's original destination (SO_ORIGINAL_DST), i.e. what Envoy's
original_dst listener filter would read after an iptables REDIRECT.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from meshpilot.runtime.cluster import Cluster, ClusterConfig
from meshpilot.runtime.commands import HostSupportError, require_host_support
from meshpilot.runtime.netns import list_links, list_netns
from meshpilot.runtime.pod import Pod, RunAs

# The probes use the standard library only; the system interpreter is readable by the
# unprivileged users they run as (a virtualenv under /root may not be).
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

LISTENER = r"""
import selectors, socket, struct, sys
label, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
sel = selectors.DefaultSelector()
for port in ports:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(16)
    sel.register(s, selectors.EVENT_READ, port)
while True:
    for key, _ in sel.select():
        conn, _ = key.fileobj.accept()
        try:
            raw = conn.getsockopt(socket.SOL_IP, 80, 16)  # SO_ORIGINAL_DST
            port, ip = struct.unpack("!2xH4s8x", raw)[0], socket.inet_ntoa(raw[4:8])
            orig = f"{ip}:{port}"
        except OSError:
            orig = "?"
        conn.sendall(f"{label}:{key.data} orig={orig}\n".encode())
        conn.close()
"""

CLIENT = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
source = (sys.argv[3], 0) if len(sys.argv) > 3 else None
with socket.create_connection((host, port), timeout=3, source_address=source) as s:
    print(s.makefile().readline().strip())
"""


def host_support_or_fail() -> None:
    """Fail (not skip) with the reason: CI runs as root with iproute2 and iptables."""
    try:
        require_host_support()
    except HostSupportError as exc:
        pytest.fail(f"{exc}. The netns tests need root and these tools; CI provides both.")


def start_listener(pod: Pod, label: str, *ports: int, run_as: RunAs | None = None) -> None:
    pod.spawn(f"listener-{label}", [PYTHON, "-c", LISTENER, label, *map(str, ports)], run_as)
    for port in ports:
        pod.wait_listening(port)


def connect(
    pod: Pod, host: object, port: int, *, run_as: RunAs | None = None, source: str = ""
) -> str:
    """Connect from inside `pod`; the listener's answer line."""
    argv = [PYTHON, "-c", CLIENT, str(host), str(port), *([source] if source else [])]
    result = pod.exec(argv, run_as=run_as)
    assert result.returncode == 0, f"client in {pod.key} failed: {result.stderr[-800:]}"
    return result.stdout.strip()


def new_cluster_name() -> str:
    """Unique per test, so parallel test sessions never share (or clean up) a cluster."""
    return "t" + secrets.token_hex(3)


def leftovers(cluster_name: str, host_links: Collection[str] = ()) -> list[str]:
    """Namespaces and links of the cluster still on the machine."""
    prefix = f"mp-{cluster_name}"
    names = [n for n in list_netns() if n.startswith(prefix + "-")]
    names += [link.name for link in list_links() if link.name == prefix or link.name in host_links]
    return names


@contextmanager
def running_cluster() -> Iterator[Cluster]:
    """A cluster for one test; after it, nothing of it may remain."""
    name = new_cluster_name()
    links: set[str] = set()
    with Cluster(ClusterConfig(name=name, stop_grace=1.0)) as cluster:
        try:
            yield cluster
        finally:
            links = {pod.wiring.host_link for pod in cluster.pods.values()}
    assert leftovers(name, links) == [], "teardown left these behind"

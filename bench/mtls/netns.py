"""Two network namespaces joined by a veth pair: the client pod and the server pod of B6.

The server pod captures inbound traffic the way istio-iptables does for one port: TCP to
APP_PORT arriving from outside is redirected to the sidecar's 15006 (`virtualInbound`), whose
`original_dst` filter recovers the port the client dialled. The sidecar's own connection to
the app (source 127.0.0.6, locally generated) takes the OUTPUT path and is not redirected.
DIRECT_PORT on the same app is not captured: it is the "no sidecar" path; REDIRECT_PORT is
REDIRECTed straight to DIRECT_PORT (the capture rule with no Envoy behind it). Only root can do
this; everything is deleted by `close()` (deleting a namespace deletes its veth end).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

APP_PORT = 8080  # the server's targetPort, captured to 15006
DIRECT_PORT = 8081  # the same app, not captured
REDIRECT_PORT = 8083  # REDIRECTed to DIRECT_PORT: the cost of the capture rule alone
INBOUND_CAPTURE = 15006
SUBNET = "10.253.15"


def _run(*argv: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")


@dataclass(frozen=True)
class PodNet:
    netns: str
    ip: str
    rt_priority: int | None = None  # SCHED_FIFO for everything run in the pod (--rt)

    def argv(self, argv: Sequence[str], cpus: str | None) -> list[str]:
        """`argv` run inside this namespace, pinned to `cpus` (taskset list) when given, in
        SCHED_FIFO when the pod has an RT priority. `ip netns exec`, `taskset` and `chrt`
        exec in turn: the child's pid is the program's."""
        if self.rt_priority is not None:
            argv = ["chrt", "-f", str(self.rt_priority), *argv]
        pinned = ["taskset", "-c", cpus, *argv] if cpus else list(argv)
        return ["ip", "netns", "exec", self.netns, *pinned]


class PodPair:
    """`client` and `server` namespaces; use as a context manager."""

    def __init__(self, tag: str | None = None, rt_priority: int | None = None) -> None:
        tag = tag or f"b6{os.getpid() % 100000}"
        self.client = PodNet(f"{tag}-client", f"{SUBNET}.2", rt_priority)
        self.server = PodNet(f"{tag}-server", f"{SUBNET}.1", rt_priority)
        self._links = (f"{tag}c", f"{tag}s")  # at most 15 characters (IFNAMSIZ)
        self._made: list[str] = []

    def __enter__(self) -> PodPair:
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> None:
        for pod in (self.client, self.server):
            _run("ip", "netns", "add", pod.netns)
            self._made.append(pod.netns)
        c_link, s_link = self._links
        _run("ip", "link", "add", c_link, "type", "veth", "peer", "name", s_link)
        for pod, link in ((self.client, c_link), (self.server, s_link)):
            _run("ip", "link", "set", link, "netns", pod.netns)
            in_ns = ["ip", "netns", "exec", pod.netns]
            _run(*in_ns, "ip", "addr", "add", f"{pod.ip}/24", "dev", link)
            _run(*in_ns, "ip", "link", "set", link, "up")
            _run(*in_ns, "ip", "link", "set", "lo", "up")
        for port, to in ((APP_PORT, INBOUND_CAPTURE), (REDIRECT_PORT, DIRECT_PORT)):
            _run(
                *["ip", "netns", "exec", self.server.netns, "iptables", "-t", "nat"],
                *["-A", "PREROUTING", "-p", "tcp", "--dport", str(port)],
                *["-j", "REDIRECT", "--to-ports", str(to)],
            )

    def close(self) -> None:
        while self._made:
            name = self._made.pop()
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)

"""B7's driver: a server command, client processes calling it, the server's CPU per call.

Used by bench/ca_sign.py: the server (`meshpilot discovery`, or the echo server) is started,
the client processes connect and wait, then all start at once; the server's CPU (its
threads and its children, the CA port's Envoy) is read from /proc before and after.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from meshpilot.security.ca_api import IstioCertificateRequest, IstioCertificateResponse

__all__ = ["Endpoint", "drive", "stop"]


async def _client(
    port: int, root: bytes, work: list[tuple[str, str]], concurrency: int, method: str
) -> list[float]:
    creds = grpc.ssl_channel_credentials(root)
    options = [("grpc.ssl_target_name_override", "istiod.istio-system.svc")]
    latencies: list[float] = []
    async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds, options=options) as chan:
        call = chan.unary_unary(
            method,
            request_serializer=IstioCertificateRequest.SerializeToString,
            response_deserializer=IstioCertificateResponse.FromString,
        )
        await chan.channel_ready()
        queue = list(reversed(work))

        async def worker() -> None:
            while queue:
                token, csr = queue.pop()
                started = time.perf_counter()
                response: Any = await call(
                    IstioCertificateRequest(csr=csr, validity_duration=86400),
                    metadata=[("authorization", f"Bearer {token}")],
                    timeout=60,
                )
                latencies.append(time.perf_counter() - started)
                assert len(response.cert_chain) == 2

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def _client_process(
    port: int,
    root: bytes,
    work: list[tuple[str, str]],
    concurrency: int,
    method: str,
    sync: tuple[Any, Any, Any],
) -> None:
    ready, go, out = sync
    ready.set()
    go.wait()
    out.put(asyncio.run(_client(port, root, work, concurrency, method)))


@dataclass(frozen=True)
class Endpoint:
    certs_per_s: float
    # Seconds of CPU per certificate of the server process and its children (the CA
    # port's Envoy), every thread; children_per_cert is the children's part of the sum.
    server_user_per_cert: float
    server_sys_per_cert: float
    latencies: list[float]
    children_per_cert: float = 0.0

    @property
    def server_cpu_per_cert(self) -> float:
        return self.server_user_per_cert + self.server_sys_per_cert


def drive(
    argv: list[str],
    port: int,
    root: bytes,
    work: list[tuple[str, str]],
    concurrency: int,
    clients: int,
    method: str,
) -> Endpoint:
    """Run the server command, then the client processes against it, all started before
    the clock; returns throughput, the server's CPU per call and the latencies."""
    server = subprocess.Popen(argv)
    try:
        _wait_port(port)
        ctx = multiprocessing.get_context("fork")
        go, out = ctx.Event(), ctx.Queue()
        procs, readies = [], []
        for share in (work[i::clients] for i in range(clients)):
            ready = ctx.Event()
            proc = ctx.Process(
                target=_client_process,
                args=(port, root, share, concurrency, method, (ready, go, out)),
            )
            proc.start()
            procs.append(proc)
            readies.append(ready)
        for ready in readies:
            ready.wait()
        time.sleep(0.2)
        children = _children(server.pid)
        user, system = _cpu_seconds(server.pid, *children)
        child_cpu = sum(_cpu_seconds(*children))
        start = time.perf_counter()
        go.set()
        latencies = [lat for _ in procs for lat in out.get()]
        elapsed = time.perf_counter() - start
        user_after, system_after = _cpu_seconds(server.pid, *children)
        child_cpu = sum(_cpu_seconds(*children)) - child_cpu
        for proc in procs:
            proc.join()
        n = len(work)
        return Endpoint(
            n / elapsed,
            (user_after - user) / n,
            (system_after - system) / n,
            latencies,
            child_cpu / n,
        )
    finally:
        stop(server)


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 10 s."""
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _cpu_seconds(*pids: int) -> tuple[float, float]:
    """User and system CPU time of processes, every thread (grpc's own included)."""
    user = system = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        user, system = user + int(fields[11]), system + int(fields[12])
    tick = os.sysconf("SC_CLK_TCK")
    return user / tick, system / tick


def _children(pid: int) -> list[int]:
    """Every process below `pid` (the CA port's Envoy runs as discovery's child)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_children(int(child))]
    return found


def _wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"the control plane did not open port {port}")

"""One real Envoy serving a plaintext HTTP listener whose HCM carries the given security
filters and answers 200 from a direct response: what RBAC and jwt_authn decide is what the
client sees (200, 401 or 403). Not mTLS: peer identities need the CA (e2e, later)."""

from __future__ import annotations

import http.client
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import address_pb2
from envoy.config.endpoint.v3 import endpoint_components_pb2, endpoint_pb2
from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.config.route.v3 import route_components_pb2 as rc_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.http.router.v3 import router_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.filters.network.tcp_proxy.v3 import tcp_proxy_pb2
from google.protobuf import duration_pb2, json_format

from meshpilot.envoy.binary import envoy_binary
from meshpilot.runtime.ports import free_port
from meshpilot.xds.protos import pack

__all__ = [
    "EnvoyHttp",
    "EnvoyTcp",
    "running_envoy",
    "running_tcp_envoy",
    "running_tcp_envoy_admin",
    "tcp_echo_server",
]


def _address(port: int) -> address_pb2.Address:
    return address_pb2.Address(
        socket_address=address_pb2.SocketAddress(address="127.0.0.1", port_value=port)
    )


def _http_listener(filters: Sequence[hcm_pb2.HttpFilter], port: int) -> listener_pb2.Listener:
    route = rc_pb2.Route(
        match=rc_pb2.RouteMatch(prefix="/"),
        direct_response=rc_pb2.DirectResponseAction(status=200),
    )
    hcm = hcm_pb2.HttpConnectionManager(
        stat_prefix="authz_test",
        route_config=route_pb2.RouteConfiguration(
            virtual_hosts=[rc_pb2.VirtualHost(name="all", domains=["*"], routes=[route])]
        ),
        http_filters=[
            *filters,
            hcm_pb2.HttpFilter(
                name="envoy.filters.http.router", typed_config=pack(router_pb2.Router())
            ),
        ],
    )
    hcm_filter = listener_components_pb2.Filter(
        name="envoy.filters.network.http_connection_manager", typed_config=pack(hcm)
    )
    return listener_pb2.Listener(
        name="authz_test",
        address=_address(port),
        filter_chains=[listener_components_pb2.FilterChain(filters=[hcm_filter])],
    )


def _tcp_listener(
    filters: Sequence[listener_components_pb2.Filter], port: int
) -> listener_pb2.Listener:
    proxy = tcp_proxy_pb2.TcpProxy(stat_prefix="upstream", cluster="upstream")
    tcp = listener_components_pb2.Filter(
        name="envoy.filters.network.tcp_proxy", typed_config=pack(proxy)
    )
    return listener_pb2.Listener(
        name="authz_tcp_test",
        address=_address(port),
        filter_chains=[listener_components_pb2.FilterChain(filters=[*filters, tcp])],
    )


def _upstream(port: int) -> cluster_pb2.Cluster:
    endpoint = endpoint_components_pb2.LbEndpoint(
        endpoint=endpoint_components_pb2.Endpoint(address=_address(port))
    )
    return cluster_pb2.Cluster(
        name="upstream",
        type=cluster_pb2.Cluster.STATIC,
        connect_timeout=duration_pb2.Duration(seconds=1),
        load_assignment=endpoint_pb2.ClusterLoadAssignment(
            cluster_name="upstream",
            endpoints=[endpoint_components_pb2.LocalityLbEndpoints(lb_endpoints=[endpoint])],
        ),
    )


def _bootstrap(
    listener: listener_pb2.Listener, admin: int, clusters: Sequence[cluster_pb2.Cluster] = ()
) -> str:
    boot = bootstrap_pb2.Bootstrap(
        admin=bootstrap_pb2.Admin(address=_address(admin)),
        static_resources=bootstrap_pb2.Bootstrap.StaticResources(
            listeners=[listener], clusters=list(clusters)
        ),
    )
    text: str = json_format.MessageToJson(boot)
    return text


class EnvoyHttp:
    def __init__(self, port: int, admin: int = 0) -> None:
        self.port = port
        self.admin = admin

    def stats(self, contains: str) -> dict[str, int]:
        """Envoy's counters whose name contains `contains` (admin /stats)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=5)
        try:
            conn.request("GET", f"/stats?filter={contains}")
            lines = conn.getresponse().read().decode().splitlines()
        finally:
            conn.close()
        pairs = (line.split(": ", 1) for line in lines if ": " in line)
        return {name: int(value) for name, value in pairs if value.isdigit()}

    def status(self, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> int:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request(method, path, headers=headers or {})
            return conn.getresponse().status
        finally:
            conn.close()


def _wait_ready(admin: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"envoy exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}"
            )
        try:
            conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=1)
            conn.request("GET", "/ready")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("envoy did not become ready")


@contextmanager
def running_envoy(filters: Sequence[hcm_pb2.HttpFilter]) -> Iterator[EnvoyHttp]:
    port = free_port()
    with _envoy(lambda admin: _bootstrap(_http_listener(filters, port), admin)) as admin:
        yield EnvoyHttp(port, admin)


@contextmanager
def running_tcp_envoy(
    filters: Sequence[listener_components_pb2.Filter], upstream: int
) -> Iterator[int]:
    """Envoy with [filters..., tcp_proxy → 127.0.0.1:upstream]; yields the listener port."""
    port = free_port()
    with _envoy(
        lambda admin: _bootstrap(_tcp_listener(filters, port), admin, [_upstream(upstream)])
    ):
        yield port


class EnvoyTcp(EnvoyHttp):
    def exchange(self, line: bytes) -> bytes:
        """Send a line through Envoy to the echo server: its echo, b"" when closed on us."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            try:
                sock.sendall(line + b"\n")
                return sock.recv(1024)
            except ConnectionResetError:
                return b""


@contextmanager
def running_tcp_envoy_admin(
    filters: Sequence[listener_components_pb2.Filter], upstream: int
) -> Iterator[EnvoyTcp]:
    """`running_tcp_envoy`, with the admin port for Envoy's stats."""
    port = free_port()
    with _envoy(
        lambda admin: _bootstrap(_tcp_listener(filters, port), admin, [_upstream(upstream)])
    ) as admin:
        yield EnvoyTcp(port, admin)


@contextmanager
def tcp_echo_server() -> Iterator[int]:
    """A one-line echo server on 127.0.0.1 (a thread per connection); yields its port."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(self.rfile.readline())


@contextmanager
def _envoy(bootstrap: Callable[[int], str]) -> Iterator[int]:
    """Envoy running `bootstrap(admin port)`; yields the admin port."""
    admin = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "envoy.json"
        config.write_text(bootstrap(admin))
        proc = subprocess.Popen(
            [
                str(envoy_binary()),
                "-c",
                str(config),
                "--concurrency",
                "1",
                "-l",
                "error",
                "--disable-hot-restart",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_ready(admin, proc, time.monotonic() + 30)
            yield admin
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

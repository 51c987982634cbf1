"""Fuzzing every HTTP/1.1 server of ours with raw requests over real loopback sockets: the
control plane's monitoring port (15014, a real in-process discovery), the GitOps API (8080)
and the agent's status port (15020). Methods, paths, headers, Content-Length values (-1,
huge, wrong), chunked nonsense, JSON bodies of random shapes and depths: every request gets
a whole HTTP response, none a 500, and the servers keep answering. (15021 is Envoy's own
listener.) Bounded: derandomized, a fixed number of examples, a deadline per example."""

from __future__ import annotations

import asyncio
import json
import re
import resource
import socket
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.agent.health import ReadinessProbe, StatusServer
from meshpilot.discovery import Discovery
from meshpilot.gitops.server import GitopsServer
from meshpilot.runtime.ports import free_ports
from meshpilot.settings import Ports, Settings
from tests.unit.gitops.controller.env import app_manifest, make_world

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
APP = "/api/v1/applications/argocd/shop"
PATHS = [
    "/", "/debug", "/debug/syncz", "/debug/configz", "/debug/registryz", "/debug/config_dump",
    "/debug/config_dump?proxyID=productpage-v1.default&type=router", "/ready", "/metrics",
    "/healthz", "/healthz/ready", "/api/webhook", "/api/v1/applications", APP, APP + "/diff",
    APP + "/sync", APP + "/history", APP + "/rollback", "/api/v1/applications/%ff/%00/sync",
]  # fmt: skip
HEADERS = [
    "Content-Type", "X-GitHub-Event", "X-Gitlab-Event", "X-Gitlab-Token", "X-Event-Key",
    "X-Hub-Signature-256", "X-Meshpilot-User", "X-Meshpilot-Groups", "Host", "Expect",
    "Authorization",
]  # fmt: skip
# SESSION stands for a valid admin session of the GitOps API (so that its handlers, not only
# the authentication in front of them, see the fuzzed bodies); the test puts one in.
SESSION = "Bearer <session>"
HEADER_VALUES = ["push", "pull_request", "Push Hook", "repo:push", "admin", "a,b", "", "é", SESSION]
# A HEAD request as the server can tell (a request line it can read): its answer has no body.
HEAD_REQUEST = re.compile(rb"(?i:head) /[^ \r\n]* HTTP/1\.[01]\r\n")
LENGTHS = ["-1", "0", "3", "1e3", "0x10", " 12", "99999999999999999999", "18446744073709551617"]


@dataclass
class Servers:
    loop: asyncio.AbstractEventLoop
    ports: dict[str, int]
    session: str = ""  # an admin session token of the GitOps API

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """The three servers on one event loop in a thread, as each runs in its process."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tmp = tmp_path_factory.mktemp("fuzz")
    nothing = free_ports(1)[0]  # no Envoy admin there: readiness answers 503

    tasks: list[asyncio.Task[None]] = []

    async def start() -> tuple[Discovery, GitopsServer, StatusServer]:
        settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0))
        discovery = Discovery([REPO / "examples" / "bookinfo"], settings)
        await discovery.start()
        world = make_world(tmp)
        world.put(app_manifest(str(world.repo.path)))
        tasks.append(asyncio.create_task(world.controller.run()))
        gitops = GitopsServer(world.controller)
        await gitops.start("127.0.0.1", 0)
        status = StatusServer(ReadinessProbe(EnvoyAdmin(nothing, timeout=0.2)), 0, "127.0.0.1")
        await status.start()
        return discovery, gitops, status

    handle = Servers(loop, {})
    discovery, gitops, status = handle.run(start())
    initial = gitops.auth.ensure_admin_password() or str(gitops.auth.state.initial_password_file)
    handle.session = gitops.auth.login("admin", Path(initial).read_text().strip())
    handle.ports = {
        "monitoring": discovery.monitoring_port,
        "gitops": gitops.port,
        "status": status.port,
    }
    try:
        yield handle
    finally:

        async def stop() -> None:
            await status.close()
            await gitops.stop()
            gitops.controller.stop()
            await asyncio.gather(*tasks)
            await discovery.stop(0)

        handle.run(stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def exchange(port: int, raw: bytes, timeout: float = 10) -> bytes:
    """Send `raw`, end the request stream, read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all was sent: the answer is still there to read
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def status_of(answer: bytes, head_request: bool = False) -> int:
    """The status of one whole HTTP/1.1 response (its Content-Length matching its body;
    no body for a HEAD request)."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    assert sep, f"no complete response: {answer[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    version, code, _ = lines[0].split(" ", 2)
    assert version == "HTTP/1.1", lines[0]
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert len(body) == (0 if head_request else int(headers["Content-Length"])), (lines, body)
    return int(code)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
known_shapes = st.fixed_dictionaries(
    {},
    optional={
        "prune": st.booleans() | st.text(max_size=3),
        "dryRun": st.just(True) | st.integers(),
        "revision": st.text(max_size=8) | st.lists(st.text(max_size=3), max_size=2),
        "resources": st.lists(json_values, max_size=2) | json_values,
        "id": st.integers() | st.text(max_size=3),
        "ref": json_values,
        "repository": json_values,
        "commits": json_values,
        "push": json_values,
        "project": json_values,
        "pull_request": json_values,
    },
)
bodies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    known_shapes.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 5).map(lambda n: b"[" * 10**n + b"]" * 10**n),
    st.integers(1, 5).map(lambda n: b'{"a":' * 10**n),
    st.binary(max_size=64),
)


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    method = draw(st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "get", "B@D", ""]))
    path = draw(st.sampled_from(PATHS) | st.text(min_size=0, max_size=30).map(lambda t: "/" + t))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2", "JUNK"]))
    body = draw(bodies)
    headers = draw(
        st.lists(
            st.tuples(
                st.sampled_from(HEADERS), st.sampled_from(HEADER_VALUES) | st.text(max_size=8)
            ),
            max_size=4,
        )
    )
    length = draw(st.sampled_from(["right", "none", "chunked", "twice", *LENGTHS]))
    if length == "right":
        headers.append(("Content-Length", str(len(body))))
    elif length == "chunked":
        headers.append(("Transfer-Encoding", "chunked"))
        body = b"%x\r\n" % len(body) + body + draw(st.sampled_from([b"\r\n0\r\n\r\n", b"zz\r\n"]))
    elif length == "twice":
        headers += [("Content-Length", str(len(body))), ("Content-Length", "1")]
    elif length != "none":
        headers.append(("Content-Length", length))
    head = f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    return head.encode("utf-8", "surrogatepass") + b"\r\n" + body


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,  # a sync of the test app may take a moment; bounded by the count
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(raw=requests())
def test_every_request_gets_a_status_below_500(servers: Servers, raw: bytes) -> None:
    raw = raw.replace(SESSION.encode(), f"Bearer {servers.session}".encode())
    for name, port in servers.ports.items():
        code = status_of(exchange(port, raw), bool(HEAD_REQUEST.match(raw)))
        # 503 is the readiness answer of an agent without Envoy, never an error of ours.
        assert code < 500 or (name == "status" and code == 503), (name, code, raw[:200])


def test_servers_stay_up_and_memory_stays_bounded(servers: Servers) -> None:
    """After the fuzzing (and a burst of the largest requests): plain requests work, and the
    process has not grown by more than a little."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    huge = b"POST /api/webhook HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n" + b"x" * 2**19
    long_head = b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 20000 + b"\r\n"
    for _ in range(20):
        assert status_of(exchange(servers.ports["gitops"], huge)) == 413
        assert status_of(exchange(servers.ports["monitoring"], long_head)) == 431
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 64 * 1024, f"the process grew by {grown_kb} kB"
    assert status_of(exchange(servers.ports["monitoring"], b"GET /ready HTTP/1.1\r\n\r\n")) == 200
    assert status_of(exchange(servers.ports["gitops"], b"GET /healthz HTTP/1.1\r\n\r\n")) == 200
    code = status_of(exchange(servers.ports["status"], b"GET /healthz/ready HTTP/1.1\r\n\r\n"))
    assert code == 503

"""B3: push convergence to N simulated ADS clients vs a bare grpc.aio fan-out, in one run.

    python bench/push.py [--clients 100 1000] [--changes endpoint ...] [--protocol sotw|delta]
                         [--vhds] [--py-spy PREFIX] [--json bench/results/push.json]

Three processes: `meshpilot discovery` watching a directory that holds the synthetic mesh
(bench/synthetic_mesh.py), this orchestrator, and one client process (`--client-worker`)
that runs N ADS streams (grpc.aio, one channel each) speaking SotW as Envoy does: CDS
wildcard, then EDS for the clusters' service names, LDS wildcard, then RDS for the route
names, every response ACKed with its version and nonce (`--protocol delta`: the same over
Delta xDS, whose ACKs name only their nonce; with `--vhds`, discovery runs with `--vhds` and
a client that gets a route config with `vhds` subscribes to VirtualHost resources with no
names, as Envoy 1.40 does, and is synced once it has them). Node ids are those of pods of the mesh
(`sidecar~<ip>~<pod>.<ns>~<ns>.svc.cluster.local`), one per service, spread over the 10
namespaces.

Once every client is synced, for each change:
  endpoint: a new Pod file in the watched directory (EDS push)
  virtualservice: one VirtualService file rewritten (full push)
  virtualservice-scoped: the same for a VirtualService exported only to its own namespace
    (exportTo: ["."]): only the proxies of that namespace (100 of 1000) can see it
the latency of a client is file write -> its last ACK of the resulting push; p50/p90/p99
and max are over the clients. Baseline, same run: a bare grpc.aio server in this process
pushes pre-serialized responses of exactly the sizes each client received to the same N
streams and waits for their ACKs (same client process, same ACK timing), twice: with ACKs
that repeat the subscriptions of the real run, as Envoy's do (the same bytes both ways), and
with ACKs naming nothing (the baseline before 2026-11-23; the only one for Delta clients,
whose ACKs are that small); each baseline is the median of 3 fan-outs after one that warms
the connections up (since the ninth session of 2026-11-23; before, the single first one,
15-40% slower). ratio = max / bare max, against the baseline with the same ACK bytes;
net = (max - the 100 ms debounce) / bare max, and floor = 1 + 0.1 s / bare max: the ratio
a control plane that took no time at all would score with the debounce counted (since
2026-11-24: at 1000 clients the bare fan-out of a push's small responses is 105-130 ms
here, so the floor alone is 1.8-1.95x). The clients assemble their ACKs from
serialized pieces (`request_bytes`), as cheap as the bare run's. The discovery process logs
each push's timeline (xds/push_timeline.py): the stage table gives, in ms after the write,
when the change reached the debouncer, left it, the PushContext was built, every stream was
queued, the last response was handed to gRPC, gRPC had written them all, and the last ACK
was read. Also the discovery process's CPU seconds (/proc/<pid>/stat) and RSS (VmRSS once started
and once every client is synced; VmHWM, the peak, after the sync and at the end): the
control plane's alone, the clients run in their own process.
Targets (PERFORMANCE.md B3): ratio <= 2 at 1000 clients; endpoint p99 <= 300 ms including
debounce; VirtualService p90 <= 1.5 s; RSS <= 1.5 GB.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import ctypes.util
import functools
import gc
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import grpc
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import any_pb2, struct_pb2

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from meshpilot.runtime.ports import free_port

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
VHDS = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
SHORT = {CDS: "cds", EDS: "eds", LDS: "lds", RDS: "rds", VHDS: "vhds"}
PADDING = "type.googleapis.com/bench.Padding"
ADS_SERVICE = "envoy.service.discovery.v3.AggregatedDiscoveryService"
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
_DISCOVERY_CLI = (
    "import sys; from meshpilot.cli.discovery import discovery; "
    "discovery(sys.argv[1:], prog_name='meshpilot discovery')"
)
_TIMELINE = "push timeline "  # discovery's log line of a push's stages
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
CHANNEL_OPTIONS = [
    ("grpc.use_local_subchannel_pool", 1),  # one connection per client, as Envoys have
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
]
VS_CHANGED = 1  # the VirtualService the benchmark edits (kept out of mesh.yaml)
VS_SCOPED = 2  # the one edited for the scoped change, exported to its namespace only
CHANGES = ("endpoint", "virtualservice", "virtualservice-scoped")
# Bare runs: ACKs repeating the real run's subscriptions (as SotW Envoys do), then empty ones.
BASELINES = (("bare", True), ("bare_empty_acks", False))


# ---------------------------------------------------------------------------- clients


def node_of(k: int, shape: MeshShape) -> tuple[str, str]:
    """(node id, namespace) of the first pod of service k."""
    ns = f"ns-{k % shape.namespaces}"
    pod = f"svc-{k}-v1-5f6d7c8b9-p0000"
    ip = f"10.{200 + k // 250}.{k % 250}.1"
    return f"sidecar~{ip}~{pod}.{ns}~{ns}.svc.cluster.local", ns


_NAMES_CACHE: dict[tuple[str, int], tuple[str, ...]] = {}


def _cluster_eds_names(resources: Iterable[any_pb2.Any]) -> tuple[str, ...]:
    names = []
    for res in resources:
        cluster = cluster_pb2.Cluster.FromString(res.value)
        if cluster.type == cluster_pb2.Cluster.EDS:
            names.append(cluster.eds_cluster_config.service_name or cluster.name)
    return tuple(sorted(names))


def _listener_route_names(resources: Iterable[any_pb2.Any]) -> tuple[str, ...]:
    names = set()
    for res in resources:
        listener = listener_pb2.Listener.FromString(res.value)
        chains = [*listener.filter_chains]
        if listener.HasField("default_filter_chain"):
            chains.append(listener.default_filter_chain)
        for chain in chains:
            for f in chain.filters:
                if f.typed_config.type_url == HCM + "HttpConnectionManager":
                    hcm = hcm_pb2.HttpConnectionManager.FromString(f.typed_config.value)
                    if hcm.HasField("rds"):
                        names.add(hcm.rds.route_config_name)
    return tuple(sorted(names))


def dependent_names(resp: discovery_pb2.DiscoveryResponse) -> tuple[str, ...] | None:
    """EDS names of a CDS response, RDS names of an LDS one (cached: sidecars share them)."""
    if resp.type_url not in (CDS, LDS) or (
        resp.resources and resp.resources[0].type_url == PADDING
    ):
        return None
    key = (resp.type_url, hash(tuple(r.value for r in resp.resources)))
    if key not in _NAMES_CACHE:
        fn = _cluster_eds_names if resp.type_url == CDS else _listener_route_names
        _NAMES_CACHE[key] = fn(resp.resources)
    return _NAMES_CACHE[key]


@dataclass
class Received:
    type_url: str
    size: int
    recv: float
    ack: float


_DR = discovery_pb2.DiscoveryRequest
# Serialized subscriptions by their names, shared by the clients that subscribe to them.
_NAME_BYTES: dict[tuple[str, ...], bytes] = {}
_TYPE_BYTES = {t: _DR(type_url=t).SerializeToString() for t in (CDS, EDS, LDS, RDS)}


def names_bytes(names: tuple[str, ...]) -> bytes:
    """The `resource_names` field of a request, serialized once per distinct subscription."""
    found = _NAME_BYTES.get(names)
    if found is None:
        found = _NAME_BYTES[names] = _DR(resource_names=names).SerializeToString()
    return found


def request_bytes(version: str, names: bytes, type_url: str, nonce: str) -> bytes:
    """A serialized DiscoveryRequest without a node: protobuf writes fields in number order
    (version_info 1, resource_names 3, type_url 4, response_nonce 5), so joining the fields
    serialized apart gives the same bytes. Envoy builds its ACKs in C++; in this one process
    for N simulated Envoys, building and serializing a request of 4000 names per ACK cost
    ~0.5 ms each and delayed every later client's response (B3: half of the 1000-client
    latency was the simulator's)."""
    return b"".join(
        (
            _DR(version_info=version).SerializeToString(),
            names,
            _TYPE_BYTES.get(type_url) or _DR(type_url=type_url).SerializeToString(),
            _DR(response_nonce=nonce).SerializeToString(),
        )
    )


@dataclass
class Client:
    """One simulated Envoy: one channel, one ADS stream, SotW."""

    node_id: str
    namespace: str
    bare: bool
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    versions: dict[str, tuple[str, str]] = field(default_factory=dict)
    out: list[bytes] = field(default_factory=list)  # requests to write, oldest first
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    log: list[Received] = field(default_factory=list)
    recording: bool = False
    last_recv: float = 0.0
    errors: list[str] = field(default_factory=list)
    # Bare runs: the subscriptions of the real run, repeated in every ACK as Envoy does.
    replay: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Per type: the names last serialized and their bytes.
    blobs: dict[str, tuple[tuple[str, ...], bytes]] = field(default_factory=dict)

    def request(self, type_url: str, first: bool = False) -> bytes:
        version, nonce = self.versions.get(type_url, ("", ""))
        names = self.names.get(type_url, ())
        if first:
            req = _DR(
                type_url=type_url, version_info=version, response_nonce=nonce,
                resource_names=names, node=self.node(),
            )  # fmt: skip
            return bytes(req.SerializeToString())
        cached = self.blobs.get(type_url)
        if cached is None or cached[0] is not names:  # (hashing 4000 names per ACK: 0.1 ms)
            cached = self.blobs[type_url] = (names, names_bytes(names))
        return request_bytes(version, cached[1], type_url, nonce)

    def node(self) -> base_pb2.Node:
        meta = struct_pb2.Struct()
        meta.update(
            {
                "NAMESPACE": self.namespace,
                "ISTIO_VERSION": "1.28.0",
                "INTERCEPTION_MODE": "REDIRECT",
            }
        )
        return base_pb2.Node(id=self.node_id, cluster="bench", metadata=meta)

    def first_request(self) -> bytes:
        return self.request(CDS, first=True)

    def on_response(self, raw: bytes) -> None:
        recv = time.monotonic()
        resp = discovery_pb2.DiscoveryResponse.FromString(raw)
        t = resp.type_url
        self.versions[t] = (resp.version_info, resp.nonce)
        deps = dependent_names(resp)
        if deps is not None:
            dep_type = EDS if t == CDS else RDS
            if deps != self.names.get(dep_type):  # Envoy: subscribe first, then ACK
                first_time = dep_type not in self.names
                self.names[dep_type] = deps
                if deps or not first_time:
                    self.out.append(self.request(dep_type))
        self.out.append(self.request(t))  # the ACK
        if not self.bare and t == EDS and LDS not in self.names:
            self.names[LDS] = ()
            self.out.append(self.request(LDS))  # clusters warmed: listeners next
        ack = time.monotonic()
        self.last_recv = ack
        if self.recording:
            self.log.append(Received(t, len(raw), recv, ack))
        if self.bare or RDS in self.versions or (LDS in self.versions and not self.names[RDS]):
            self.synced.set()

    METHOD = "StreamAggregatedResources"

    async def run(self, target: str) -> None:
        """Keep a stream open; a failed one is retried after a jittered backoff, as Envoy
        does (e.g. calls the server left unaccepted for 30 s are cancelled by gRPC)."""
        async with grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) as channel:
            method = channel.stream_stream(
                f"/{ADS_SERVICE}/{self.METHOD}",
                request_serializer=None,  # requests are serialized by `request`
                response_deserializer=None,  # raw bytes: parsed in on_response
            )
            while True:
                self.names, self.versions, self.out = dict(self.replay), {}, []
                try:
                    await self.converse(method())
                    return
                except grpc.aio.AioRpcError as exc:
                    self.errors.append(f"{exc.code().name}: {exc.details()}")
                await asyncio.sleep(0.5 + random.random())

    async def converse(self, call: Any) -> None:
        """Read a response, write what it calls for, read the next: one task per stream,
        no request generator and queue between them (as cheap for the bare server's
        streams as for discovery's), and a response is dropped once handled: held until
        the next one, the sync's last 2-4 MB answers were freed (munmap) during the
        first push, 0.17 s of this process's CPU at 1000 clients."""
        await call.write(self.first_request())
        while (raw := await call.read()) is not grpc.aio.EOF:
            self.on_response(raw)
            del raw
            out, self.out = self.out, []
            for req in out:
                await call.write(req)


_DDR = discovery_pb2.DeltaDiscoveryRequest


@dataclass
class DeltaClient(Client):
    """The same simulated Envoy over incremental (Delta) xDS: subscriptions change by
    difference, and an ACK names its nonce only (no names repeated)."""

    METHOD = "DeltaAggregatedResources"
    vhds: bool = False  # subscribe to VirtualHost once a route config has `vhds` (Envoy)

    def subscribe(self, type_url: str, names: tuple[str, ...] = (), first: bool = False) -> bytes:
        req = _DDR(type_url=type_url, resource_names_subscribe=names)
        if first:
            req.node.CopyFrom(self.node())
        return bytes(req.SerializeToString())

    def first_request(self) -> bytes:
        return self.subscribe(CDS, first=True)

    def on_response(self, raw: bytes) -> None:
        recv = time.monotonic()
        resp = discovery_pb2.DeltaDiscoveryResponse.FromString(raw)
        t = resp.type_url
        self.versions[t] = (resp.system_version_info, resp.nonce)
        if t in (CDS, LDS) and resp.resources:
            as_sotw = discovery_pb2.DiscoveryResponse(
                type_url=t, resources=[r.resource for r in resp.resources]
            )
            deps = dependent_names(as_sotw) or ()
            dep_type = EDS if t == CDS else RDS
            known = set(self.names.get(dep_type, ()))
            new = tuple(n for n in deps if n not in known)
            if new:  # Envoy: subscribe first, then ACK
                self.names[dep_type] = (*self.names.get(dep_type, ()), *new)
                self.out.append(self.subscribe(dep_type, new))
        if self.vhds and t == RDS and VHDS not in self.names and _has_vhds(resp):
            self.names[VHDS] = ()  # Envoy's VHDS subscription names nothing
            self.out.append(self.subscribe(VHDS))
        self.out.append(_DDR(type_url=t, response_nonce=resp.nonce).SerializeToString())
        if t == EDS and LDS not in self.names:
            self.names[LDS] = ()
            self.out.append(self.subscribe(LDS))  # clusters warmed: listeners next
        ack = time.monotonic()
        self.last_recv = ack
        if self.recording:
            self.log.append(Received(t, len(raw), recv, ack))
        if VHDS in self.names and VHDS not in self.versions:
            return  # a route config waits for its virtual hosts
        if RDS in self.versions or (LDS in self.versions and not self.names.get(RDS)):
            self.synced.set()


def _has_vhds(resp: discovery_pb2.DeltaDiscoveryResponse) -> bool:
    return any(
        route_pb2.RouteConfiguration.FromString(r.resource.value).HasField("vhds")
        for r in resp.resources
    )


class Worker:
    """The client process: JSON commands on stdin, JSON replies on stdout."""

    def __init__(self) -> None:
        self.clients: list[Client] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.mark = 0.0
        self.cpu_mark = 0.0
        # The last real run's subscriptions by node, for bare runs that ACK the same way.
        self.subscriptions: dict[str, dict[str, tuple[str, ...]]] = {}

    async def connect(
        self,
        target: str,
        n: int,
        bare: bool,
        replay: bool = False,
        delta: bool = False,
        vhds: bool = False,
        offset: int = 0,
    ) -> dict[str, Any]:
        """N clients (Delta xDS ones with `delta`); with `replay`, their ACKs name what the
        last real run subscribed to; `offset`: the first one's pod (bench/replicas.py
        spreads the mesh's proxies over two workers)."""
        shape = MeshShape()
        started = time.monotonic()
        kind = DeltaClient if delta else Client
        self.clients = [kind(*node_of(k, shape), bare=bare) for k in range(offset, offset + n)]
        for c in self.clients if replay else ():
            c.replay = self.subscriptions.get(c.node_id, {})
        for c in self.clients:
            if vhds and isinstance(c, DeltaClient):
                c.vhds = True
        self.tasks = [asyncio.create_task(c.run(target)) for c in self.clients]
        waits = [asyncio.create_task(c.synced.wait()) for c in self.clients]
        done, pending = await asyncio.wait(waits, timeout=600)
        for task in pending:
            task.cancel()
        failed = [t for t in self.tasks if t.done() and t.exception()]
        errors = [e for c in self.clients for e in c.errors]
        return {
            "synced": len(done),
            "seconds": time.monotonic() - started,
            "failed": [repr(t.exception()) for t in failed[:3]],
            "stream_retries": len(errors),
            "retry_reasons": sorted(set(errors))[:5],
        }

    def start_recording(self) -> dict[str, Any]:
        # The clients' state (a thousand subscriptions and version tables) out of the
        # collector's sight (O(1)): full collections set off by a push's allocations walked
        # it, 0.14 s of this process's CPU per endpoint push at 1000 clients (real and bare
        # runs alike).
        gc.freeze()
        self.mark = time.monotonic()
        self.cpu_mark = time.process_time()
        for c in self.clients:
            c.log.clear()
            c.recording = True
        return {"mark": self.mark}

    async def collect(self, quiet: float, timeout: float, everyone: bool = True) -> dict[str, Any]:
        """Wait until every client (`everyone`), else at least one, got a response and then
        nothing came for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        reached = all if everyone else any
        while time.monotonic() < deadline:
            now = time.monotonic()
            done = reached(c.log for c in self.clients)
            last = max((c.last_recv for c in self.clients), default=0.0)
            if done and now - last >= quiet:
                break
            await asyncio.sleep(0.05)
        for c in self.clients:
            c.recording = False
        return {
            "clients": {
                c.node_id: [(r.type_url, r.size, r.recv, r.ack) for r in c.log]
                for c in self.clients
            },
            # this process's CPU since the mark: the simulated Envoys' share of the run
            "cpu_s": time.process_time() - self.cpu_mark,
        }

    async def close(self) -> dict[str, Any]:
        gc.unfreeze()
        for c in self.clients:
            if not c.bare:
                self.subscriptions[c.node_id] = dict(c.names)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.clients, self.tasks = [], []
        return {}

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            cmd = json.loads(line)
            op = cmd.pop("cmd")
            if op == "exit":
                break
            if op == "connect":
                reply = await self.connect(**cmd)
            elif op == "mark":
                reply = self.start_recording()
            elif op == "collect":
                reply = await self.collect(**cmd)
            else:
                reply = await self.close()
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
        await self.close()


# ------------------------------------------------------------------ bare fan-out server


def padded_response(type_url: str, size: int, nonce: str) -> bytes:
    """A serialized DiscoveryResponse of exactly `size` bytes (or the smallest possible)."""
    pad = max(size - 100, 0)
    for _ in range(10):
        resp = discovery_pb2.DiscoveryResponse(
            version_info="bare", type_url=type_url, nonce=nonce,
            resources=[any_pb2.Any(type_url=PADDING, value=b"x" * pad)],
        )  # fmt: skip
        raw: bytes = resp.SerializeToString()
        if len(raw) == size or (pad == 0 and len(raw) > size):
            break
        pad = max(pad + size - len(raw), 0)
    return raw


_HELLO_ACK = _DR(response_nonce="hello").SerializeToString()  # the nonce is the last field


class BareServer:
    """ADS-shaped grpc.aio server: pushes pre-serialized bytes, counts the ACKs (read as
    bytes: only the first request, which names the node, is parsed)."""

    def __init__(self) -> None:
        self.streams: dict[str, asyncio.Queue[bytes | None]] = {}
        self.pending = 0
        self.all_acked = asyncio.Event()
        self.server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        handler = grpc.stream_stream_rpc_method_handler(
            self.stream,
            request_deserializer=None,
            response_serializer=None,
        )
        self.server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    ADS_SERVICE, {"StreamAggregatedResources": handler}
                )
            ]
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    async def stream(self, requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        first = _DR.FromString(await anext(requests))
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.streams[first.node.id] = queue

        async def read() -> None:
            async for raw in requests:
                if raw.endswith(_HELLO_ACK):
                    continue
                self.pending -= 1
                if self.pending == 0:
                    self.all_acked.set()

        reader = asyncio.create_task(read())
        try:
            yield padded_response(first.type_url, 0, "hello")
            while (raw := await queue.get()) is not None:
                yield raw
        finally:
            reader.cancel()

    def fan_out(self, plan: dict[str, list[bytes]]) -> None:
        self.pending = sum(len(v) for v in plan.values())
        self.all_acked.clear()
        if not self.pending:
            self.all_acked.set()  # nothing to send (no client was reached)
        for node_id, responses in plan.items():
            for raw in responses:
                self.streams[node_id].put_nowait(raw)

    async def stop(self) -> None:
        for queue in self.streams.values():
            queue.put_nowait(None)
        await self.server.stop(0.5)


# ---------------------------------------------------------------------------- orchestrator


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` (raw folded stacks into `out`) until `stop_py_spy`: a profile
    of one change alone, without the initial sync."""
    spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-r", "200", "-f", "raw"]
    proc = subprocess.Popen(
        [*spy, "-o", str(out), "--pid", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attached before the change is written
    return proc


def stop_py_spy(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Discovery:
    def __init__(self, directory: Path, log: Path, vhds: bool = False) -> None:
        self.monitoring = free_port()
        self.xds = free_port()
        args = [sys.executable, "-c", _DISCOVERY_CLI, "-f", str(directory)]
        args += ["--xds-port", str(self.xds), "--monitoring-port", str(self.monitoring)]
        # info: each push logs its timeline (xds/push_timeline.py), read by `timeline`
        args += ["--debounce", f"{DEBOUNCE_S * 1000:.0f}ms", "--log-level", "info"]
        args += ["--vhds"] if vhds else []
        with log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.log = log

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"discovery exited {self.proc.returncode}: {self.log.read_text()}")
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.monitoring}/ready", timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def cpu(self) -> float:
        return proc_cpu_seconds(self.proc.pid)

    def timeline(self, t0: float) -> dict[str, Any]:
        """The latest push's stages (xds/push_timeline.py) in ms after `t0` (the file
        write): their stamps are time.monotonic(), one clock for both processes."""
        lines = [ln for ln in self.log.read_text().splitlines() if _TIMELINE in ln]
        if not lines:
            return {}
        raw = json.loads(lines[-1].split(_TIMELINE, 1)[1])
        stamps = ("changed", "debounced", "built", "queued", "handed", "first_sent", "last_sent")
        out: dict[str, Any] = {k: round((raw[k] - t0) * 1e3, 1) for k in stamps if raw[k]}
        if raw["last_acked"]:
            out["last_acked"] = round((raw["last_acked"] - t0) * 1e3, 1)
        out.update(streams=raw["streams"], sent=raw["sent"], acked=raw["acked"])
        out["fan_out_cpu"] = raw["ms"].get("fan_out_cpu", 0.0)  # ms, queued -> last ACK
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class WorkerProcess:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, log: Path) -> WorkerProcess:
        """The client process; its stderr (grpc.aio teardown noise included) goes to `log`."""
        with log.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(Path(__file__).resolve()), "--client-worker",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                limit=1 << 30,
            )  # fmt: skip
        return cls(proc)

    async def call(self, cmd: str, **kw: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"cmd": cmd, **kw}) + "\n").encode())
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("client worker exited")
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def stop(self) -> None:
        """Ask it to exit (it may be busy: no reply awaited), kill it after 10 s."""
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(Exception):
                self.proc.stdin.write(b'{"cmd": "exit"}\n')
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


def bench_pod(k: int) -> str:
    """The endpoint change's Pod, with the k-th address."""
    return pod_yaml("svc-5-v1-5f6d7c8b9-bench", "ns-5", f"10.250.0.{5 + k}")


def pod_yaml(name: str, ns: str, ip: str) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: svc-5, version: v1, security.istio.io/tlsMode: istio}}
spec: {{serviceAccountName: svc-5}}
status: {{podIP: {ip}}}
"""


def vs_yaml(weight: int, k: int = VS_CHANGED, export: str = "") -> str:
    ns = f"ns-{k % MeshShape().namespaces}"
    export_to = f"\n  exportTo: [{export}]" if export else ""
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc-{k}, namespace: {ns}}}
spec:
  hosts: [svc-{k}]{export_to}
  http:
  - route:
    - destination: {{host: svc-{k}, port: {{number: 8080}}, subset: v1}}
      weight: {weight}
    - destination: {{host: svc-{k}, port: {{number: 8080}}, subset: v2}}
      weight: {100 - weight}
"""


def scoped_vs_yaml(weight: int) -> str:
    return vs_yaml(weight, VS_SCOPED, '"."')


def write_mesh(directory: Path) -> None:
    """mesh.yaml without VirtualServices svc-1 and svc-2, which live in vs.yaml and
    vs-scoped.yaml (the ones edited; svc-2's is exported to its own namespace only)."""
    docs = synthetic_mesh_yaml(MeshShape()).split("---\n")
    markers = [
        f"kind: VirtualService\nmetadata: {{name: svc-{k}, " for k in (VS_CHANGED, VS_SCOPED)
    ]
    docs = [d for d in docs if not any(m in d for m in markers)]
    (directory / "mesh.yaml").write_text("---\n".join(docs))
    (directory / "vs.yaml").write_text(vs_yaml(80))
    (directory / "vs-scoped.yaml").write_text(scoped_vs_yaml(80))
    (directory / "pod-bench.yaml").unlink(missing_ok=True)  # left by an earlier run


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.rename(path)


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


def latency_stats(log: dict[str, list[Any]], t0: float) -> dict[str, Any]:
    lat = [max(r[3] for r in recs) - t0 for recs in log.values() if recs]
    first = [min(r[2] for r in recs) - t0 for recs in log.values() if recs]
    types: dict[str, int] = {}
    total = 0
    for recs in log.values():
        for r in recs:
            types[SHORT.get(r[0], r[0])] = types.get(SHORT.get(r[0], r[0]), 0) + 1
            total += r[1]
    if not lat:
        return {"clients_reached": 0}
    return {
        "clients_reached": len(lat),
        "first_response_s": min(first),
        "p50_s": percentile(lat, 50),
        "p90_s": percentile(lat, 90),
        "p99_s": percentile(lat, 99),
        "max_s": max(lat),
        "responses": types,
        "bytes": total,
    }


# Bare fan-outs measured per baseline, after one that warms the connections up (the first
# fan-out on fresh connections took 15-40% longer, 2026-11-23: 173 ms, then 117-137 ms; the
# real run pushes on connections the initial sync warmed): the median is the baseline.
BARE_RUNS = 3
# Each change is made AGAIN more times after the first (with another pod IP or weight): the
# first push after the initial sync pays for memory the sync gave back (SotW: 200 kB ACKs,
# 1000 of them), as the bare server's first fan-out does (its warm-up); the ratios compare
# first with first and again with the warmed median ("first; again").
AGAIN = 2
AGAIN_AFTER_S = 2.0
# Istio's PILOT_DEBOUNCE_AFTER: the wait a single change sits out before its push. It is a
# setting, not work: even a control plane that took no time at all would score
# 1 + DEBOUNCE_S / bare with it counted ("floor"); "net" leaves it out of our time.
DEBOUNCE_S = 0.1


async def measure_bare(
    worker: WorkerProcess, plan_sizes: dict[str, list[tuple[str, int]]], n: int, replay: bool
) -> dict[str, Any]:
    """The bare fan-out of the same response sizes to the same N clients; with `replay`,
    their ACKs repeat the subscriptions of the real run (4000 EDS names each at 1000
    services, as Envoy's do), else they name nothing. The median of BARE_RUNS fan-outs
    after a warm-up one."""
    bare = BareServer()
    await bare.server.start()
    try:
        target = f"127.0.0.1:{bare.port}"
        await worker.call("connect", target=target, n=n, bare=True, replay=replay)
        cache: dict[tuple[str, int, int], bytes] = {}  # equal sizes share one buffer

        def response(t: str, size: int, i: int) -> bytes:
            if (t, size, i) not in cache:
                cache[t, size, i] = padded_response(t, size, f"n{i}")
            return cache[t, size, i]

        plan = {
            node: [response(t, size, i) for i, (t, size) in enumerate(sizes)]
            for node, sizes in plan_sizes.items()
        }
        runs = []
        for _ in range(1 + BARE_RUNS):  # the first warms the connections up: not counted
            await worker.call("mark")
            cpu0 = time.process_time()  # this process is the bare server's
            t0 = time.monotonic()
            bare.fan_out(plan)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(bare.all_acked.wait(), 600)
            server_seen = time.monotonic() - t0
            server_cpu = time.process_time() - cpu0
            # every ACK is in (all_acked): clients the plan leaves out never get anything
            got = await worker.call("collect", quiet=0.3, timeout=600, everyone=False)
            stats = latency_stats(got["clients"], t0)
            stats["server_all_acked_s"] = server_seen
            stats["server_cpu_s"] = server_cpu
            stats["clients_cpu_s"] = got["cpu_s"]
            runs.append(stats)
        measured = sorted(runs[1:], key=lambda r: float(r.get("max_s", 0.0)))
        median = measured[len(measured) // 2]
        median["max_s_each"] = [r.get("max_s") for r in runs]  # the warm-up's first
        return median
    finally:
        await worker.call("close")
        await bare.stop()


async def change(
    worker: WorkerProcess,
    discovery: Discovery,
    write: Any,
    timeout: float,
    everyone: bool,
    profile: Path | None = None,
) -> tuple[dict[str, Any], dict[str, list[tuple[str, int]]]]:
    await worker.call("mark")
    spy = None if profile is None else start_py_spy(discovery.proc.pid, profile)
    cpu0 = discovery.cpu()
    t0 = time.monotonic()
    write()
    try:
        got = await worker.call("collect", quiet=1.5, timeout=timeout, everyone=everyone)
    finally:
        if spy is not None:
            stop_py_spy(spy)
    stats = latency_stats(got["clients"], t0)
    stats["cpu_s"] = discovery.cpu() - cpu0  # up to the end of the quiet wait
    stats["clients_cpu_s"] = got["cpu_s"]
    stats["server_ms"] = discovery.timeline(t0)
    sizes = {node: [(r[0], r[1]) for r in recs] for node, recs in got["clients"].items()}
    return stats, sizes


async def run_n(
    n: int,
    workdir: Path,
    changes: tuple[str, ...] = CHANGES,
    delta: bool = False,
    vhds: bool = False,
    profile: Path | None = None,
) -> dict[str, Any]:
    mesh_dir = workdir / f"mesh-{n}"
    mesh_dir.mkdir(exist_ok=True)
    write_mesh(mesh_dir)
    discovery = Discovery(mesh_dir, workdir / f"discovery-{n}.log", vhds)
    worker: WorkerProcess | None = None
    protocol = ("delta+vhds" if vhds else "delta") if delta else "sotw"
    result: dict[str, Any] = {"clients": n, "protocol": protocol}
    try:
        deadline = time.monotonic() + 120
        while not discovery.ready():
            if time.monotonic() > deadline:
                raise RuntimeError("discovery not ready after 120 s")
            await asyncio.sleep(0.1)
        result["startup_cpu_s"] = discovery.cpu()
        result["startup_rss_mb"] = proc_status_mb(discovery.proc.pid, "VmRSS")
        worker = await WorkerProcess.start(workdir / f"clients-{n}.log")
        cpu0 = discovery.cpu()
        target = f"127.0.0.1:{discovery.xds}"
        sync = await worker.call("connect", target=target, n=n, bare=False, delta=delta, vhds=vhds)
        result["sync"] = {**sync, "cpu_s": discovery.cpu() - cpu0}
        # The peak so far is the initial sync's; what stays is the configuration held.
        result["sync_peak_rss_mb"] = proc_status_mb(discovery.proc.pid, "VmHWM")
        result["synced_rss_mb"] = proc_status_mb(discovery.proc.pid, "VmRSS")
        if sync["synced"] != n:
            raise RuntimeError(f"only {sync['synced']}/{n} clients synced: {sync['failed']}")
        await asyncio.sleep(1.0)  # let stragglers' ACKs land
        writes: dict[str, Callable[[int], None]] = {
            "endpoint": lambda k: write_atomic(mesh_dir / "pod-bench.yaml", bench_pod(k)),
            "virtualservice": lambda k: write_atomic(mesh_dir / "vs.yaml", vs_yaml(70 + k)),
            "virtualservice-scoped": lambda k: write_atomic(
                mesh_dir / "vs-scoped.yaml", scoped_vs_yaml(70 + k)
            ),
        }
        for name, write in writes.items():
            if name not in changes:
                continue
            scoped = name == "virtualservice-scoped"  # reaches only one namespace's proxies
            spied = None if profile is None else profile.with_name(f"{profile.name}-{name}.txt")
            first = functools.partial(write, 0)
            stats, sizes = await change(worker, discovery, first, 600, not scoped, spied)
            stats["again"] = []
            for k in range(1, 1 + AGAIN):  # the same change again: steady state, not the first
                # after the previous push's heap settle (1 s after its ACKs, then a full
                # collection of 0.3-0.6 s at 1000 proxies: xds/server.py SETTLE_AFTER)
                await asyncio.sleep(AGAIN_AFTER_S)
                again, _ = await change(worker, discovery, functools.partial(write, k), 600,
                                        not scoped)  # fmt: skip
                stats["again"].append({q: again.get(q) for q in ("p90_s", "p99_s", "max_s")})
            result[name] = stats
            result[name + "_sizes"] = sizes
        result["rss_mb"] = proc_status_mb(discovery.proc.pid, "VmRSS")
        result["peak_rss_mb"] = proc_status_mb(discovery.proc.pid, "VmHWM")
        result["cpu_total_s"] = discovery.cpu()
        await worker.call("close")
        for name in changes:
            sizes = result.pop(name + "_sizes")
            # Delta ACKs name nothing: the bare run with empty ACKs sends the same bytes.
            baselines = (("bare_empty_acks", False),) if delta else BASELINES
            for key, replay in baselines:
                bare = await measure_bare(worker, sizes, n, replay)
                result[name][key] = bare
                if "max_s" in bare and "max_s" in result[name]:
                    suffix = key.removeprefix("bare")
                    result[name]["ratio_max" + suffix] = result[name]["max_s"] / bare["max_s"]
                    result[name]["ratio_p99" + suffix] = result[name]["p99_s"] / bare["max_s"]
                    if replay == (not delta):  # the baseline with the same ACK bytes
                        net = (result[name]["max_s"] - DEBOUNCE_S) / bare["max_s"]
                        result[name]["ratio_net"] = net
                        result[name]["ratio_floor"] = 1 + DEBOUNCE_S / bare["max_s"]
                        again = [a["max_s"] for a in result[name]["again"] if a["max_s"]]
                        each = bare.get("max_s_each") or []
                        if again and each and each[0]:
                            result[name]["ratio_first"] = result[name]["max_s"] / each[0]
                            again_s = statistics.median(again)
                            result[name]["ratio_again"] = again_s / bare["max_s"]
                            result[name]["ratio_again_net"] = (again_s - DEBOUNCE_S) / bare["max_s"]
    finally:
        if worker is not None:
            await worker.stop()
        discovery.stop()
    return result


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.0f} ms"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| B3: 1000-service mesh | clients | first resp | p50 | p90 | p99 | max (last ACK) "
        "| bare fan-out max: same ACKs / empty ACKs | ratio max/bare: same / empty "
        "| ratio: net of the debounce; floor | first vs bare first; again vs bare (net) "
        "| msgs, MB | CPU: CP / clients | target |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = {
        "endpoint": "p99 <= 300 ms; ratio <= 2",
        "virtualservice": "p90 <= 1.5 s; ratio <= 2",
        "virtualservice-scoped": "(reaches 1 namespace of 10)",
    }
    for r in results:
        for name in CHANGES:
            if name not in r and "error" not in r:
                continue  # not asked for (--changes)
            s = r.get(name, {})
            bare, empty = s.get("bare", {}), s.get("bare_empty_acks", {})
            msgs = sum(s.get("responses", {}).values())
            kinds = "+".join(sorted(s.get("responses", {})))
            lines.append(
                f"| {name} change ({r.get('protocol', 'sotw')}) "
                f"| {s.get('clients_reached', 0)}/{r['clients']} "
                f"| {_ms(s.get('first_response_s'))} | {_ms(s.get('p50_s'))} "
                f"| {_ms(s.get('p90_s'))} | {_ms(s.get('p99_s'))} | {_ms(s.get('max_s'))} "
                f"| {_ms(bare.get('max_s'))} / {_ms(empty.get('max_s'))} "
                f"| {s.get('ratio_max', 0):.1f}x / {s.get('ratio_max_empty_acks', 0):.1f}x "
                f"| {s.get('ratio_net', 0):.2f}x; {s.get('ratio_floor', 0):.2f}x "
                f"| {s.get('ratio_first', 0):.2f}x; {s.get('ratio_again', 0):.2f}x "
                f"({s.get('ratio_again_net', 0):.2f}x) "
                f"| {msgs} {kinds}, {s.get('bytes', 0) / 1e6:.1f} "
                f"| {s.get('cpu_s', 0):.1f} / {s.get('clients_cpu_s', 0):.1f} s "
                f"| {targets[name]} |"
            )
    lines += [
        "",
        "| clients | sync all (wall) | stream retries | sync CP CPU | CP CPU total "
        "| CP RSS: started / synced / peak in sync / peak | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        sync = r.get("sync", {})
        lines.append(
            f"| {r['clients']} | {sync.get('seconds', 0):.1f} s "
            f"| {sync.get('stream_retries', '-')} "
            f"| {sync.get('cpu_s', 0):.1f} s "
            f"| {r.get('cpu_total_s', 0):.1f} s | {r.get('startup_rss_mb', 0):.0f} / "
            f"{r.get('synced_rss_mb', 0):.0f} / {r.get('sync_peak_rss_mb', 0):.0f} / "
            f"{r.get('peak_rss_mb', 0):.0f} MB | peak <= 1536 MB |"
        )
    return "\n".join(lines + stage_table(results) + floor_table(results))


# The statistic each change's absolute target is set on, and the target (seconds).
ABSOLUTE_TARGETS = {"endpoint": ("p99_s", 0.3), "virtualservice": ("p90_s", 1.5)}


def floor_table(results: list[dict[str, Any]]) -> list[str]:
    """The absolute targets against what no control plane could beat in this run: the bare
    fan-out of the same bytes with the same ACKs (SotW: the real run's subscriptions; Delta:
    none), warmed, plus the debounce the target counts. The bare server's and the simulated
    Envoys' CPU over its wall time shows whether the machine, not the server, set it."""
    lines = [
        "",
        "| change | clients | ours | bare fan-out, same ACKs | + debounce = floor "
        "| bare CPU: server + clients / wall (cores busy) | target | target vs floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        delta = r.get("protocol", "sotw") != "sotw"
        for name, (stat, target) in ABSOLUTE_TARGETS.items():
            s = r.get(name, {})
            bare = s.get("bare_empty_acks" if delta else "bare", {})
            if stat not in s or stat not in bare:
                continue
            floor = bare[stat] + DEBOUNCE_S
            wall = bare.get("server_all_acked_s") or 0.0
            cpu = bare.get("server_cpu_s", 0.0) + bare.get("clients_cpu_s", 0.0)
            busy = f"{cpu / wall:.2f}" if wall else "-"
            quantile = stat.removesuffix("_s")
            verdict = "under the floor: out of reach" if target < floor else "within reach"
            lines.append(
                f"| {name} ({r.get('protocol', 'sotw')}) | {r['clients']} "
                f"| {quantile} {_ms(s[stat])} | {quantile} {_ms(bare[stat])} "
                f"| {_ms(floor)} | {bare.get('server_cpu_s', 0) * 1e3:.0f} + "
                f"{bare.get('clients_cpu_s', 0) * 1e3:.0f} ms / {_ms(wall)} ({busy}) "
                f"| {_ms(target)} | {verdict} |"
            )
    return lines


_STAGES = (
    "changed", "debounced", "built", "queued", "handed", "first_sent", "last_sent", "last_acked"
)  # fmt: skip


def stage_table(results: list[dict[str, Any]]) -> list[str]:
    """When each stage of the push ended (ms after the write), from discovery's timeline:
    changed = the store's change reached the debouncer; debounced, built (PushContext),
    queued (every stream); handed = the last stream's response built and handed to gRPC;
    first/last response reported written by gRPC; the last ACK read."""
    lines = [
        "",
        "| change | clients | " + " | ".join(_STAGES) + " | client: first resp / p99 "
        "| CP CPU queued -> last ACK |",
        "|---|---|" + "---|" * len(_STAGES) + "---|---|",
    ]
    for r in results:
        for name in CHANGES:
            s = r.get(name, {})
            if not s.get("server_ms"):
                continue
            ms = s["server_ms"]
            lines.append(
                f"| {name} | {r['clients']} | "
                + " | ".join(str(ms.get(k, "-")) for k in _STAGES)
                + f" | {_ms(s.get('first_response_s'))} / {_ms(s.get('p99_s'))} "
                + f"| {ms.get('fan_out_cpu', '-')} ms |"
            )
    return lines


async def orchestrate(
    counts: list[int],
    workdir: Path | None,
    changes: tuple[str, ...] = CHANGES,
    delta: bool = False,
    vhds: bool = False,
    profile: Path | None = None,
) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
        root = Path(tmp) if workdir is None else workdir
        root.mkdir(parents=True, exist_ok=True)
        for n in counts:
            try:
                results.append(await run_n(n, root, changes, delta, vhds, profile))
            except Exception as exc:  # report what was measured, then the failure
                results.append({"clients": n, "error": repr(exc)})
                print(f"N={n}: {exc!r}", file=sys.stderr)
    return results


def keep_freed_heap() -> None:
    """glibc: keep freed ACK- and response-sized buffers for reuse instead of handing the
    heap top back to the OS after each (as xds/grpc_service.py `map_large_buffers` does
    for discovery). For the client process (the simulated Envoys, which use tcmalloc,
    which keeps them too: 1000 ACKs of 190 kB per endpoint push each faulted in 47 pages,
    ~0.3 ms) and this one (the bare server reads the same ACKs)."""
    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt(-3, 1024 * 1024)  # M_MMAP_THRESHOLD: ACKs and EDS answers from the heap
        libc.mallopt(-1, 256 * 1024 * 1024)  # M_TRIM_THRESHOLD


def main() -> None:
    keep_freed_heap()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the mesh files and process logs here (default: a temp dir)",
    )
    parser.add_argument(
        "--changes", nargs="+", choices=CHANGES, default=list(CHANGES), help="changes to time"
    )
    parser.add_argument(
        "--protocol",
        choices=("sotw", "delta"),
        default="sotw",
        help="the clients' xDS variant (delta: ACKs repeat no names)",
    )
    parser.add_argument(
        "--vhds",
        action="store_true",
        help="discovery --vhds (opt-in): sidecars' virtual hosts by VHDS (needs --protocol delta)",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="PREFIX",
        help="profile discovery with py-spy during each change (raw stacks: PREFIX-<change>.txt)",
    )
    parser.add_argument("--client-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_worker:
        asyncio.run(Worker().serve())
        return
    delta = args.protocol == "delta"
    if args.vhds and not delta:
        parser.error("--vhds needs --protocol delta (Envoy serves VHDS over Delta xDS only)")
    changes = tuple(args.changes)
    results = asyncio.run(
        orchestrate(args.clients, args.workdir, changes, delta, args.vhds, args.py_spy)
    )
    print(markdown(results))
    print(f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}")  # fmt: skip
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

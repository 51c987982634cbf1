"""B4: real Envoy applying our ADS output vs the same resources from files, in one run.

    python bench/envoy_apply.py [--sizes 1000,5000] [--rounds 3] [--cpus 0:1] [--json FILE]

For each size N (clusters), the synthetic mesh (bench/synthetic_mesh.py) with N/2 Services
(2 ports each, so 2 outbound clusters per Service), one VirtualService per Service, no
DestinationRules; the proxy is the sidecar of pod svc-0-v1 in ns-0 with interceptionMode NONE
(outbound listeners 127.0.0.1:8080 and 127.0.0.1:9090, RDS route configs "8080" and "9090").

Two Envoys (1.40, `--concurrency 1`), one after the other, never at the same time, `--rounds`
times per size with the order alternating (the machine is shared: a drift in its load falls
on both); figures are medians over the rounds. With `--cpus ENVOY:DISCOVERY` (default 0:1 on
two or more CPUs) both Envoys run pinned to the first CPU list and the control plane to the
second (taskset), so that our server's work never competes with Envoy's for a core:
  ads:  `meshpilot discovery` over the mesh file, Envoy on Delta ADS (DELTA_GRPC; `--api sotw`
        for GRPC, state of the world: the change then resends every cluster).
  file: the *file twin*: the very resources `generate_proxy_config` gives that proxy, written
        as DiscoveryResponse files (`cds.pb`, `lds.pb`, binary protobuf) that Envoy reads with
        `path_config_source` + `watched_directory`. How the twin differs from the ADS output:
          - EDS clusters become STATIC clusters whose `load_assignment` is the cluster's
            ClusterLoadAssignment from EDS (same endpoints, same localities/priorities);
          - each HttpConnectionManager `rds` becomes an inline `route_config` holding the
            RouteConfiguration RDS would send (same name, same virtual hosts);
          - no xDS stream, so no gRPC connect, no per-type ACK round trips; SDS is not used by
            this config (no secrets), so nothing differs there.
Both bootstraps are otherwise identical (same node, admin on a Unix socket, same static
`xds-grpc`/`sds-grpc` clusters). With root, each Envoy runs in a network namespace of its
own (`unshare --net`) and reaches the control plane through its Unix socket.

Times come only from Envoy's log (timestamped `--log-format`; `upstream` and `init` at
debug, `config` at debug for the ADS Envoy only, because for the file twin it would dump every
DiscoveryResponse it reads as text): from Envoy's first log line to "cds: response indicates
N added/updated", the last "lds: add/update listener", and "all dependencies initialized.
starting workers". The ratio reported is T_ads / T_file on "starting workers" (target
<= 1.10; median over rounds, the fastest round and the per-round ratios beside it). Also
given: the time the ADS Envoy sat idle waiting for our next response (stream opened or
previous response accepted -> next "Received DeltaDiscoveryResponse", per type of the
response waited for). It is an upper bound of our share: it also holds Envoy's unlogged
main-thread work (at 5k, ~0.25 s after the assignments are applied, while the answer to
its next request, prebuilt, was handed to gRPC within 10 ms) and the transfer and parse of
megabyte answers. "Envoy CPU time" (/proc, read once "starting workers" is logged) is the
figure the shared machine's load moves least.
The control plane is fresh for every round: its caches are cold. A second ADS Envoy of
the same proxy class then starts on the same control plane once the first is gone (row
"warm control plane": generation is shared per push and class, as for
a new pod in a namespace that has others); the change runs on it.

Incremental change: a DestinationRule (connection pool + outlier detection) for one Service
(svc-7) is added, which changes exactly that Service's two clusters. Over Delta xDS we count
the resources Envoy receives (its "Delta config for <type> accepted with N resources added"
lines) and the responses our server sent per type (its pilot_xds_pushes metric). Envoy-side
apply time: first "Received DeltaDiscoveryResponse" after the change -> the last line Envoy
logs about it. The file twin rewrites `cds.pb` (all clusters, two of them changed) by rename;
its apply time runs from the rename (wall clock, same host clock as Envoy's log) to the last
line Envoy logs about it, so it includes inotify, reading and decoding the whole file.
Target: ads/file <= 1.5. Also reported: ADS "file written -> applied", which adds our file
poll (0.2 s), debounce (100 ms) and the full push (reload, PushContext, generation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.core.v3 import base_pb2
from envoy.config.endpoint.v3 import endpoint_pb2
from envoy.config.listener.v3 import listener_pb2
from envoy.config.route.v3 import route_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from envoy.service.discovery.v3 import discovery_pb2
from google.protobuf import json_format

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from meshpilot.config.loader import load_text
from meshpilot.envoy.binary import envoy_binary
from meshpilot.model.push_context import build_push_context
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.node import parse_node, proxy_for
from meshpilot.xds.output import ProxyConfig

_ = http_protocol_options_pb2.HttpProtocolOptions  # registers the bootstrap's extension type

POD, NAMESPACE = "svc-0-v1-5f6d7c8b9-p0000", "ns-0"
NODE_ID = f"sidecar~10.200.0.1~{POD}.{NAMESPACE}~{NAMESPACE}.svc.cluster.local"
CHANGED_SERVICE = 7  # svc-7 lives in ns-7
CLUSTER_TYPE = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
LISTENER_TYPE = "type.googleapis.com/envoy.config.listener.v3.Listener"
HCM_NAME = "envoy.filters.network.http_connection_manager"
HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
LOG_FORMAT = "[%Y-%m-%d %T.%f][%n][%l] %v"
# `config` at debug for the ADS Envoy gives "Received DeltaDiscoveryResponse" and "Delta config
# ... accepted with N resources" (about 10 lines); for the file twin it would also dump every
# DiscoveryResponse read as text (hundreds of thousands of lines), so the twin keeps it at info.
LOG_LEVELS = "upstream:debug,init:debug,main:info"
DISCOVERY_CLI = (
    "import sys; from meshpilot.cli.discovery import discovery; "
    "discovery(sys.argv[1:], prog_name='meshpilot discovery')"
)
_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]\[([^\]]*)\]\[([^\]]*)\] (.*)$")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

CHANGE_YAML = f"""\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: svc-{CHANGED_SERVICE}, namespace: ns-{CHANGED_SERVICE % 10}}}
spec:
  host: svc-{CHANGED_SERVICE}
  trafficPolicy:
    connectionPool: {{http: {{http1MaxPendingRequests: 77}}}}
    outlierDetection: {{consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}}
"""


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def terminate(proc: subprocess.Popen[bytes] | None, wait: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def http_get(url: str) -> tuple[int, str]:
    try:
        with _OPENER.open(url, timeout=3) as reply:
            return reply.status, reply.read().decode()
    except OSError as exc:
        return 0, str(exc)


# Envoy (either twin) on one CPU, the control plane on another (PERFORMANCE.md: pin roles so
# measurements do not fight); set by main() from --cpus, empty: no pinning.
PIN: dict[str, str] = {}


# The ADS Envoy's api_type (--api): DELTA_GRPC or GRPC (state of the world).
API = ["DELTA_GRPC"]


def pinned(role: str, args: list[str]) -> list[str]:
    cpus = PIN.get(role)
    return ["taskset", "-c", cpus, *args] if cpus and shutil.which("taskset") else args


def use_netns() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("ip"))


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` by rename, as Envoy's `watched_directory` expects."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.rename(path)


# --------------------------------------------------------------------------- Envoy log


@dataclass(frozen=True)
class LogLine:
    at: float  # seconds (naive local time of Envoy's clock; only differences are used)
    logger: str
    level: str
    text: str


def parse_stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f").timestamp()


class LogTail:
    """Envoy's log file, read on from where the last call stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.lines: list[LogLine] = []

    def read(self) -> list[LogLine]:
        if not self.path.exists():
            return self.lines
        with self.path.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        for raw in chunks:
            m = _LINE.match(raw.decode(errors="replace"))
            if m:
                self.lines.append(LogLine(parse_stamp(m[1]), m[2], m[3], m[4]))
        return self.lines


def first(lines: Iterable[LogLine], pred: Callable[[str], bool]) -> LogLine | None:
    return next((ln for ln in lines if pred(ln.text)), None)


def last(lines: list[LogLine], pred: Callable[[str], bool]) -> LogLine | None:
    return next((ln for ln in reversed(lines) if pred(ln.text)), None)


WORKERS = "all dependencies initialized. starting workers"


def _is_xds_received(text: str) -> bool:
    return "Received gRPC message" in text or "Received DeltaDiscoveryResponse" in text


def startup_times(lines: list[LogLine]) -> dict[str, float]:
    """Seconds from Envoy's first log line to each milestone (absent ones are left out)."""
    t0 = lines[0].at
    marks = {
        "cds": first(lines, lambda t: t.startswith("cds: response indicates")),
        "lds_last": last(lines, lambda t: t.startswith("lds: add/update listener")),
        "workers": first(lines, lambda t: WORKERS in t),
        "first_xds": first(lines, _is_xds_received),
    }
    return {k: v.at - t0 for k, v in marks.items() if v is not None}


# Delta and SotW wordings of Envoy's `config` debug lines.
_RECEIVED = re.compile(r"^Received (?:DeltaDiscoveryResponse|gRPC message) for \S+\.(\w+) ")
_STREAM_ACCEPTED = re.compile(r"^(?:Delta|gRPC) config for \S+ accepted")


def server_waits(lines: list[LogLine], until: float) -> dict[str, float]:
    """Seconds the ADS Envoy spent idle waiting for our responses before `until`, per type
    of the response it waited for: from opening the stream, or from accepting a response,
    to receiving the next one."""
    waited: dict[str, float] = {}
    idle_since = None
    for ln in lines:
        if ln.at > until:
            break
        if ln.text.startswith("Establishing new gRPC bidi stream") or _STREAM_ACCEPTED.match(
            ln.text
        ):
            idle_since = ln.at
        elif (m := _RECEIVED.match(ln.text)) and idle_since is not None:
            waited[m[1]] = waited.get(m[1], 0.0) + ln.at - idle_since
            idle_since = None
    return waited


# --------------------------------------------------------------------------- Envoy process


def _h2_cluster(name: str, address: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            HTTP_OPTIONS: {
                "@type": f"type.googleapis.com/{HTTP_OPTIONS}",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
        },
    }


def node_dict() -> dict[str, Any]:
    return {
        "id": NODE_ID,
        "cluster": "svc-0.ns-0",
        "metadata": {
            "NAMESPACE": NAMESPACE,
            "INTERCEPTION_MODE": "NONE",
            "ISTIO_VERSION": "1.28.0",
            "LABELS": {"app": "svc-0", "version": "v1"},
        },
    }


@dataclass
class Envoy:
    name: str
    workdir: Path
    dynamic: dict[str, Any]
    xds_address: dict[str, Any]
    log_levels: str = LOG_LEVELS
    proc: subprocess.Popen[bytes] | None = None
    tail: LogTail | None = None

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}-envoy.log"

    def start(self) -> None:
        boot = {
            "node": node_dict(),
            "admin": {"address": {"pipe": {"path": str(self.workdir / f"{self.name}.admin")}}},
            "dynamic_resources": self.dynamic,
            "static_resources": {
                "clusters": [
                    _h2_cluster("xds-grpc", self.xds_address),
                    _h2_cluster("sds-grpc", {"pipe": {"path": str(self.workdir / "sds.sock")}}),
                ]
            },
        }
        msg = json_format.ParseDict(boot, bootstrap_pb2.Bootstrap())
        path = self.workdir / f"{self.name}-bootstrap.json"
        path.write_text(json_format.MessageToJson(msg))
        args = [str(envoy_binary()), "-c", str(path), "--disable-hot-restart"]
        args += ["--concurrency", "1", "-l", "info", "--component-log-level", self.log_levels]
        args += ["--log-format", LOG_FORMAT, "--log-path", str(self.log)]
        if use_netns():
            prefix = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
            args = prefix + args
        args = pinned("envoy", args)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def lines(self) -> list[LogLine]:
        if self.tail is None:
            self.tail = LogTail(self.log)
        return self.tail.read()

    def wait_line(
        self, pred: Callable[[str], bool], what: str, timeout: float = 120, since: int = 0
    ) -> None:
        def seen() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                tail = self.log.read_text()[-3000:] if self.log.exists() else ""
                raise RuntimeError(f"Envoy {self.name} exited {self.proc.returncode}: {tail}")
            return any(pred(ln.text) for ln in self.lines()[since:])

        wait_for(seen, f"{what} in {self.log}", timeout)

    def cpu_seconds(self) -> float | None:
        """Envoy's CPU time so far (user + system, /proc; `unshare`, `sh` and `taskset` exec
        it in place, so it is our child's pid): a figure the machine's load barely moves,
        unlike wall time. Read once the milestone is logged: Envoy idles after it."""
        assert self.proc is not None
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        terminate(self.proc, wait=5)


# --------------------------------------------------------------------------- file twin


def static_twin(config: ProxyConfig) -> tuple[list[cluster_pb2.Cluster], list[Any]]:
    """(clusters, listeners) with EDS inlined as STATIC load_assignment and RDS inlined."""
    cla: dict[str, endpoint_pb2.ClusterLoadAssignment] = {
        c.cluster_name: c for c in config.endpoints
    }
    routes: dict[str, route_pb2.RouteConfiguration] = {r.name: r for r in config.routes}
    clusters = []
    for original in config.clusters:
        c = cluster_pb2.Cluster()
        c.CopyFrom(original)
        if c.HasField("eds_cluster_config") or c.type == cluster_pb2.Cluster.EDS:
            service = c.eds_cluster_config.service_name or c.name
            c.ClearField("eds_cluster_config")
            c.type = cluster_pb2.Cluster.STATIC
            c.load_assignment.CopyFrom(cla[service])
            c.load_assignment.cluster_name = c.name
        clusters.append(c)
    listeners = []
    for original in config.listeners:
        lst = listener_pb2.Listener()
        lst.CopyFrom(original)
        chains = list(lst.filter_chains)
        if lst.HasField("default_filter_chain"):
            chains.append(lst.default_filter_chain)
        for chain in chains:
            for f in chain.filters:
                if f.name != HCM_NAME or not f.HasField("typed_config"):
                    continue
                hcm = hcm_pb2.HttpConnectionManager()
                f.typed_config.Unpack(hcm)
                if hcm.HasField("rds"):
                    name = hcm.rds.route_config_name
                    hcm.ClearField("rds")
                    hcm.route_config.CopyFrom(routes[name])
                    f.typed_config.Pack(hcm)
        listeners.append(lst)
    return clusters, listeners


def discovery_response(type_url: str, version: str, resources: Iterable[Any]) -> bytes:
    resp = discovery_pb2.DiscoveryResponse(version_info=version, type_url=type_url)
    for r in resources:
        resp.resources.add().Pack(r)
    data: bytes = resp.SerializeToString()
    return data


def proxy_config(mesh_yaml: str) -> ProxyConfig:
    """Exactly what our server generates for NODE_ID over this config."""
    loaded = load_text(mesh_yaml, "mesh.yaml")
    assert not loaded.errors, loaded.errors[:3]
    push = build_push_context(loaded.objects, loaded.mesh)
    node = json_format.ParseDict(node_dict(), base_pb2.Node())
    return generate_proxy_config(push, proxy_for(push, parse_node(node)))


# --------------------------------------------------------------------------- runs


@dataclass
class Discovery:
    config_dir: Path
    workdir: Path
    xds_port: int = field(default_factory=free_port)
    monitoring_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def uds(self) -> str:
        return str(self.workdir / "xds.sock")

    def start(self) -> None:
        args = [sys.executable, "-c", DISCOVERY_CLI, "-f", str(self.config_dir)]
        args += ["--xds-port", str(self.xds_port), "--monitoring-port", str(self.monitoring_port)]
        args += ["--xds-uds", self.uds, "--debounce", "100ms", "--log-level", "info"]
        args = pinned("discovery", args)
        with (self.workdir / "discovery.log").open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"discovery exited {self.proc.returncode}")
            return self.get("/ready")[0] == 200

        wait_for(ready, "discovery ready", 600)  # 10k: minutes on a loaded machine

    def get(self, path: str) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.monitoring_port}{path}")

    def pushes(self) -> dict[str, float]:
        status, body = self.get("/metrics")
        out: dict[str, float] = {}
        for line in body.splitlines() if status == 200 else []:
            m = re.match(r'^pilot_xds_pushes\{type="(\w+)"\} (\S+)$', line)
            if m:
                out[m[1]] = float(m[2])
        return out

    def stop(self) -> None:
        terminate(self.proc)


def _source(extra: dict[str, Any]) -> dict[str, Any]:
    return {"initial_fetch_timeout": "0s", "resource_api_version": "V3", **extra}


_ACCEPTED = re.compile(
    r"Delta config for \S+\.(\w+) accepted with (\d+) resources added, (\d+) removed"
)
_CDS_RESPONSE = "cds: response indicates"


def _apply_end(lines: list[LogLine]) -> LogLine | None:
    """The last line Envoy wrote about applying the change (clusters, endpoints, listeners,
    init), ignoring the xDS-stream bookkeeping."""
    return last(
        lines,
        lambda t: not t.startswith(("Received ", "gRPC update", "Receiving gRPC")),
    )


def _envoy_apply(window: list[LogLine], start: float) -> dict[str, Any]:
    end = _apply_end(window)
    return {
        "apply_ms": (end.at - start) * 1e3 if end else None,
        "last_line": end.text[:160] if end else None,
        "cds_line": next((ln.text for ln in window if ln.text.startswith(_CDS_RESPONSE)), None),
        "lines": len(window),
    }


def run_ads(size_dir: Path, mesh_yaml: str, round_no: int) -> dict[str, Any]:
    work = size_dir / f"ads-{round_no}"
    work.mkdir()
    config_dir = size_dir / f"ads-config-{round_no}"
    config_dir.mkdir()
    (config_dir / "mesh.yaml").write_text(mesh_yaml)
    disc = Discovery(config_dir, work)
    envoy: Envoy | None = None
    try:
        disc.start()
        xds = (
            {"pipe": {"path": disc.uds}}
            if use_netns()
            else {"socket_address": {"address": "127.0.0.1", "port_value": disc.xds_port}}
        )
        dynamic = {
            "lds_config": _source({"ads": {}}),
            "cds_config": _source({"ads": {}}),
            "ads_config": {
                "api_type": API[0],
                "set_node_on_first_message_only": True,
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
            },
        }
        # First a cold control plane (nothing generated yet), then, once that Envoy is
        # gone, a second one of the same class on the same push (a new pod next to others).
        for name in ("ads", "ads-warm"):
            if envoy is not None:
                envoy.stop()
            envoy = Envoy(name, work, dynamic, xds, log_levels=LOG_LEVELS + ",config:debug")
            envoy.start()
            envoy.wait_line(lambda t: WORKERS in t, "starting workers")
            cpu = envoy.cpu_seconds()
            time.sleep(1.0)  # the last ACKs settle before the next step
            lines = envoy.lines()
            times = startup_times(lines)
            times["envoy_cpu"] = cpu
            waits = server_waits(lines, times["workers"] + lines[0].at)
            times["waiting_for_server"] = sum(waits.values())
            times.update({f"wait_{k}": v for k, v in waits.items()})
            if name == "ads":
                initial = times
        assert envoy is not None
        initial_accepted = [m.groups() for ln in lines if (m := _ACCEPTED.search(ln.text))]
        mark = len(lines)
        before = disc.pushes()
        written = time.time()
        (config_dir / "change.yaml").write_text(CHANGE_YAML)
        envoy.wait_line(
            lambda t: t.startswith(_CDS_RESPONSE), "delta CDS after the change", 30, since=mark
        )
        time.sleep(1.5)  # EDS for the re-created clusters, ACKs, any further push
        window = [ln for ln in envoy.lines()[mark:] if ln.at >= written]
        after = disc.pushes()
        received = first(window, lambda t: bool(_RECEIVED.match(t)))
        change = _envoy_apply(window, received.at if received else window[0].at)
        end_at = _apply_end(window)
        change["file_write_to_applied_ms"] = (end_at.at - written) * 1e3 if end_at else None
        change["resources_received"] = [
            {"type": m[1], "added": int(m[2]), "removed": int(m[3])}
            for ln in window
            if (m := _ACCEPTED.search(ln.text))
        ]
        change["responses_per_type"] = {
            k: after.get(k, 0) - before.get(k, 0)
            for k in sorted(set(after) | set(before))
            if after.get(k, 0) != before.get(k, 0)
        }
        return {
            "initial_s": initial,
            "warm_s": times,
            "initial_resources": [
                {"type": t, "added": int(a), "removed": int(r)} for t, a, r in initial_accepted
            ],
            "change": change,
        }
    finally:
        if envoy is not None:
            envoy.stop()
        disc.stop()


def run_file(
    size_dir: Path, config: ProxyConfig, changed: ProxyConfig, round_no: int
) -> dict[str, Any]:
    work = size_dir / f"file-{round_no}"
    cds_dir, lds_dir = work / "cds", work / "lds"  # one watched directory per file
    cds_dir.mkdir(parents=True)
    lds_dir.mkdir(parents=True)
    clusters, listeners = static_twin(config)
    write_atomic(cds_dir / "cds.pb", discovery_response(CLUSTER_TYPE, "1", clusters))
    write_atomic(lds_dir / "lds.pb", discovery_response(LISTENER_TYPE, "1", listeners))

    def source(d: Path, name: str) -> dict[str, Any]:
        return _source(
            {"path_config_source": {"path": str(d / name), "watched_directory": {"path": str(d)}}}
        )

    dynamic = {"lds_config": source(lds_dir, "lds.pb"), "cds_config": source(cds_dir, "cds.pb")}
    envoy = Envoy("file", work, dynamic, {"pipe": {"path": str(work / "no-xds.sock")}})
    try:
        envoy.start()
        envoy.wait_line(lambda t: WORKERS in t, "starting workers")
        cpu = envoy.cpu_seconds()
        time.sleep(1.0)
        lines = envoy.lines()
        initial = startup_times(lines)
        initial["envoy_cpu"] = cpu
        mark = len(lines)
        new_clusters, new_listeners = static_twin(changed)
        changed_names = [
            c.name
            for c, o in zip(new_clusters, clusters, strict=True)
            if c.SerializeToString(deterministic=True) != o.SerializeToString(deterministic=True)
        ]
        listeners_same = [x.SerializeToString(deterministic=True) for x in new_listeners] == [
            x.SerializeToString(deterministic=True) for x in listeners
        ]
        data = discovery_response(CLUSTER_TYPE, "2", new_clusters)
        written = time.time()
        write_atomic(cds_dir / "cds.pb", data)
        if not listeners_same:
            write_atomic(lds_dir / "lds.pb", discovery_response(LISTENER_TYPE, "2", new_listeners))
        envoy.wait_line(lambda t: t.startswith(_CDS_RESPONSE), "file CDS reload", 30, since=mark)
        time.sleep(1.5)
        window = [ln for ln in envoy.lines()[mark:] if ln.at >= written]
        change = _envoy_apply(window, written)
        change["clusters_changed"] = changed_names
        change["listeners_changed"] = not listeners_same
        return {"initial_s": initial, "change": change}
    finally:
        envoy.stop()


def run_size(root: Path, clusters_wanted: int, rounds: int) -> dict[str, Any]:
    services = (clusters_wanted - 5) // 2 + ((clusters_wanted - 5) % 2)
    shape = MeshShape(services=services, virtual_services=services, destination_rules=0)
    # Auto mTLS off: workload certificates come from the agent's SDS, which neither Envoy
    # here has; the comparison is about our xDS, identical for both with or without TLS.
    mesh_yaml = "enableAutoMtls: false\n---\n" + synthetic_mesh_yaml(shape)
    size_dir = root / f"n{clusters_wanted}"
    size_dir.mkdir(parents=True)
    config = proxy_config(mesh_yaml)
    changed = proxy_config(mesh_yaml + "---\n" + CHANGE_YAML)
    counts = {name: len(getattr(config, name)) for name in ProxyConfig.SECTIONS}
    results = []
    for i in range(rounds):
        # Alternate which twin goes first, so that a drift in the machine's load (it is
        # shared) falls on both.
        one: dict[str, Any] = {}
        for side in ("file", "ads") if i % 2 == 0 else ("ads", "file"):
            one[side] = (
                run_file(size_dir, config, changed, i)
                if side == "file"
                else run_ads(size_dir, mesh_yaml, i)
            )
        results.append(one)
    return {"shape": vars(shape), "resources": counts, "rounds": results}


# --------------------------------------------------------------------------- report


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def med(rounds: list[dict[str, Any]], side: str, part: str, key: str) -> float | None:
    """The median over rounds of one figure (None where no round has it)."""
    return median([v for r in rounds if (v := r[side][part].get(key)) is not None])


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def _s(v: float | None) -> str:
    return f"{v:.2f} s" if v is not None else "n/a"


def _ms(v: float | None) -> str:
    return f"{v:.1f} ms" if v is not None else "n/a"


def _initial_rows(n: int, rounds: list[dict[str, Any]]) -> list[str]:
    def row(label: str, key: str, target: str = "") -> str:
        a, f = med(rounds, "ads", "initial_s", key), med(rounds, "file", "initial_s", key)
        return f"| N={n}: {label} | {_s(a)} | {_s(f)} | {_ratio(a, f)} | {target} |"

    pairs = [
        r["ads"]["initial_s"]["workers"] / r["file"]["initial_s"]["workers"]
        for r in rounds
        if "workers" in r["ads"]["initial_s"] and "workers" in r["file"]["initial_s"]
    ]
    fastest = {
        side: min((r[side]["initial_s"].get("workers") or 1e9 for r in rounds), default=None)
        for side in ("ads", "file")
    }
    waits = {
        k[5:]: med(rounds, "ads", "initial_s", k)
        for k in sorted({k for r in rounds for k in r["ads"]["initial_s"] if k[:5] == "wait_"})
    }
    wait_text = ", ".join(f"{k} {_ms((v or 0) * 1e3)}" for k, v in waits.items())
    warm = med(rounds, "ads", "warm_s", "workers")
    file_workers = med(rounds, "file", "initial_s", "workers")
    return [
        row("start -> starting workers (median)", "workers", "<= 1.10x"),
        f"| N={n}: same, second proxy of the class (warm control plane) | {_s(warm)} | "
        f"{_s(file_workers)} | {_ratio(warm, file_workers)} | |",
        f"| N={n}: per-round ratios | {', '.join(f'{x:.2f}' for x in pairs)} | | | |",
        f"| N={n}: start -> starting workers (fastest round) | {_s(fastest['ads'])} | "
        f"{_s(fastest['file'])} | {_ratio(fastest['ads'], fastest['file'])} | |",
        row("Envoy CPU time at starting workers", "envoy_cpu"),
        row("start -> 'cds: response indicates N added'", "cds"),
        row("start -> last lds: add/update listener", "lds_last"),
        row(f"Envoy idle waiting for our responses ({wait_text})", "waiting_for_server"),
    ]


def markdown(result: dict[str, Any]) -> str:
    rows = [
        f"| B4: Envoy 1.40, --concurrency 1 | ADS ({API[0]}) | file twin | ratio | target |",
        "|---|---|---|---|---|",
    ]
    notes = []
    for key, r in result["sizes"].items():
        n, rounds = r["resources"]["clusters"], r["rounds"]
        rows += _initial_rows(n, rounds)
        a_ms, f_ms = (
            med(rounds, "ads", "change", "apply_ms"),
            med(rounds, "file", "change", "apply_ms"),
        )
        rows.append(
            f"| N={n}: one-service change, Envoy apply | {_ms(a_ms)} | {_ms(f_ms)} | "
            f"{_ratio(a_ms, f_ms)} | <= 1.5x |"
        )
        ac, fc = rounds[0]["ads"]["change"], rounds[0]["file"]["change"]
        got = ", ".join(
            f"{x['type']} +{x['added']}/-{x['removed']}" for x in ac["resources_received"]
        )
        rows.append(
            f"| N={n}: one-service change, Envoy received (delta) | {got} | "
            f"{len(fc['clusters_changed'])} of {n} clusters differ in cds.pb | | "
            "only that service's resources |"
        )
        rows.append(
            f"| N={n}: change, config file written -> applied | "
            f"{_ms(med(rounds, 'ads', 'change', 'file_write_to_applied_ms'))} | {_ms(f_ms)} | | |"
        )
        notes.append(
            f"N={n} ({key} requested, {len(rounds)} rounds, medians): resources per proxy "
            f"{r['resources']}; delta responses per type for the change "
            f"{ac['responses_per_type']}; file twin changed {fc['clusters_changed']}, "
            f"listeners changed: {fc['listeners_changed']}"
        )
    pin = result.get("pinned") or "not pinned"
    return "\n".join([*rows, "", *notes, f"CPUs: {pin}; netns: {result['netns']}"])


def _result(sizes: dict[str, Any]) -> dict[str, Any]:
    return {
        "sizes": sizes,
        "pinned": f"Envoy on {PIN['envoy']}, discovery on {PIN['discovery']}" if PIN else "",
        "netns": use_netns(),
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000", help="cluster counts, comma-separated")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="file/ADS pairs per size")
    parser.add_argument(
        "--cpus",
        default="0:1" if (os.cpu_count() or 1) >= 2 else "",
        help="taskset CPU lists 'ENVOY:DISCOVERY' ('' for no pinning)",
    )
    parser.add_argument("--api", choices=("delta", "sotw"), default="delta", help="ADS variant")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    API[0] = "DELTA_GRPC" if args.api == "delta" else "GRPC"
    if args.cpus:
        PIN["envoy"], _, PIN["discovery"] = args.cpus.partition(":")
    root = Path(tempfile.mkdtemp(prefix="b4-"))
    sizes: dict[str, Any] = {}
    try:
        for size in (x.strip() for x in args.sizes.split(",")):
            if size:
                sizes[size] = run_size(root, int(size), args.rounds)
                # Each size as it completes (a later one may take long or fail).
                print(markdown(_result(sizes)), file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"work directory: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    result = _result(sizes)
    print(markdown(result))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

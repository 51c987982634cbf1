"""B4: real Envoy applying our ADS output vs the same resources from files, in one run.

    python bench/envoy_apply.py [--sizes 1000,5000] [--rounds 3] [--cpus 0:1] [--bare] [--json FILE]

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
Stage by stage (both twins log the same milestones): start -> clusters in hand ("cds:
response indicates"), CDS apply ("cds: added/updated"), clusters applied -> "cm init: all
clusters initialized" (ADS: the EDS wait, decode and apply; nothing for the twin's STATIC
clusters), -> last "lds: add/update listener", -> "starting workers" (ADS: the RDS step).
"Envoy CPU + idle waiting for the server" is what the load would take on a core of its own.
Same config: once per size, after the timed load, each Envoy's config_dump is read once and
compared with the generated config (ADS: every cluster, assignment, listener and route
config; twin: its clusters and listeners), so both really hold the same resources.
`--bare`: a third Envoy per round, on a bare Delta ADS server in its own process (pinned like
ours) that answers each type's first request at once with pre-serialized responses of the
same resources: the floor of any control plane over ADS (gRPC, EDS and RDS as separate
steps), beside which our own share shows (ours/bare).
The bench's pod carries `sidecar.istio.io/interceptionMode: NONE`, as Istio's injector
would give it for such a sidecar: the control plane knows its proxy from the registry.
The control plane is fresh for every round: its caches are cold, except what it prebuilds
at startup for the pods it knows (their clusters, `xds/resources.py prebuild_known`). A
second ADS Envoy of the same proxy class then starts on the same control plane once the
first is gone (row "warm control plane": generation is shared per push and class, as for a
new pod in a namespace that has others); the change runs on it.

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
from tests.e2e.ads_harness import unix_get

from bench.synthetic_mesh import MeshShape, synthetic_mesh_yaml
from meshpilot.config.loader import load_text
from meshpilot.envoy.binary import envoy_binary
from meshpilot.model.push_context import build_push_context
from meshpilot.runtime.ports import free_port
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
        "cds_applied": first(lines, lambda t: t.startswith("cds: added/updated")),
        "clusters_ready": first(lines, lambda t: t.startswith("cm init: all clusters initialized")),
        "lds_last": last(lines, lambda t: t.startswith("lds: add/update listener")),
        "workers": first(lines, lambda t: WORKERS in t),
        "first_xds": first(lines, _is_xds_received),
    }
    return {k: v.at - t0 for k, v in marks.items() if v is not None}


# Stage by stage, from Envoy's log: (label, from mark, to mark); marks of `startup_times`.
STAGES = (
    (
        "start -> clusters in hand (file: read + decode; ADS: connect, our answer, decode)",
        "",
        "cds",
    ),
    ("CDS apply (cds: response indicates -> added/updated)", "cds", "cds_applied"),
    (
        "clusters applied -> all initialized (ADS: EDS wait + decode + apply)",
        "cds_applied",
        "clusters_ready",
    ),
    (
        "clusters initialized -> last listener added (ADS: LDS round trip)",
        "clusters_ready",
        "lds_last",
    ),
    ("last listener -> starting workers (ADS: RDS wait + decode + apply)", "lds_last", "workers"),
)


def stage_seconds(times: dict[str, float]) -> dict[str, float]:
    """Duration of each of STAGES (those whose two marks are known)."""
    out = {}
    for label, a, b in STAGES:
        if b in times and (not a or a in times):
            out[label] = times[b] - (times[a] if a else 0.0)
    return out


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


# --------------------------------------------------------------------------- same config

_SAME = ("clusters", "endpoints", "listeners", "routes")

_DUMP_SECTIONS: tuple[tuple[str, str, str, tuple[str, ...], Any], ...] = (
    # (ProxyConfig section, config_dump entry @type suffix, list field, path to the resource)
    (
        "clusters",
        "ClustersConfigDump",
        "dynamic_active_clusters",
        ("cluster",),
        cluster_pb2.Cluster,
    ),
    (
        "listeners",
        "ListenersConfigDump",
        "dynamic_listeners",
        ("active_state", "listener"),
        listener_pb2.Listener,
    ),
    (
        "routes",
        "RoutesConfigDump",
        "dynamic_route_configs",
        ("route_config",),
        route_pb2.RouteConfiguration,
    ),
    (
        "endpoints",
        "EndpointsConfigDump",
        "dynamic_endpoint_configs",
        ("endpoint_config",),
        endpoint_pb2.ClusterLoadAssignment,
    ),
)


def _dumped(envoy: Envoy) -> dict[str, dict[str, Any]]:
    """What Envoy holds, from one read of its config_dump (after the timed part, never
    polled): per section, resources by name."""
    status, body = unix_get(
        str(envoy.workdir / f"{envoy.name}.admin"), "/config_dump?include_eds", timeout=60
    )
    if status != 200:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for entry in json.loads(body).get("configs", []):
        for section, kind, field_name, path, cls in _DUMP_SECTIONS:
            if not entry.get("@type", "").endswith(kind):
                continue
            for item in entry.get(field_name, []):
                for step in path:
                    item = item.get(step, {})
                item = {k: v for k, v in item.items() if k != "@type"}
                msg = json_format.ParseDict(item, cls(), ignore_unknown_fields=True)
                out.setdefault(section, {})[_named(msg)] = msg
    return out


def _named(msg: Any) -> str:
    return str(getattr(msg, "name", "") or getattr(msg, "cluster_name", ""))


def _hosts(cla: endpoint_pb2.ClusterLoadAssignment) -> list[tuple[Any, ...]]:
    """An assignment's hosts as Envoy's config_dump can give them back: it rebuilds EDS
    assignments from its host sets (adding defaults such as the overprovisioning policy),
    so they are compared host by host (locality, priority, weights, health, metadata)."""
    return sorted(
        (
            group.locality.SerializeToString(deterministic=True),
            group.priority,
            group.load_balancing_weight.value,
            host.endpoint.address.SerializeToString(deterministic=True),
            host.health_status,
            host.load_balancing_weight.value,
            host.metadata.SerializeToString(deterministic=True),
        )
        for group in cla.endpoints
        for host in group.lb_endpoints
    )


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, endpoint_pb2.ClusterLoadAssignment):
        return _hosts(a) == _hosts(b)
    return bool(a == b)


def same_config(envoy: Envoy, expected: dict[str, list[Any]]) -> dict[str, str]:
    """Per section: how many of the resources Envoy holds are equal (field by field) to
    the ones expected, out of how many expected; what differs, for the first few."""
    held = _dumped(envoy)
    report = {}
    for section, wanted in expected.items():
        have = held.get(section, {})
        names = [_named(w) for w in wanted]
        equal = {n for n, w in zip(names, wanted, strict=True) if n in have and _same(have[n], w)}
        missing = [n for n in names if n not in have]
        text = f"{len(equal)}/{len(wanted)} equal, {len(have)} held"
        if missing:
            text += f", missing {missing[:2]}"
        differs = [n for n in names if n in have and n not in equal]
        if differs:
            text += f", differ {differs[:2]}"
        report[section] = text
    return report


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


def run_ads(size_dir: Path, mesh_yaml: str, round_no: int, config: ProxyConfig) -> dict[str, Any]:
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
                if round_no == 0:  # what Envoy holds is what the file twin is made of
                    same = same_config(envoy, {k: getattr(config, k) for k in _SAME})
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
            "same_config": same if round_no == 0 else {},
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
        twin = {"clusters": clusters, "listeners": listeners}
        same = same_config(envoy, twin) if round_no == 0 else {}
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
        return {"initial_s": initial, "same_config": same, "change": change}
    finally:
        envoy.stop()


def annotate_bench_pod(mesh_yaml: str) -> str:
    """The bench's pod carries the annotation that gives its sidecar interceptionMode NONE
    (as its node metadata says), so that the registry knows its proxy as Istio's injector
    would: the control plane prebuilds the clusters of known pods' proxies at startup."""
    anchor = f"  name: {POD}\n  namespace: {NAMESPACE}\n"
    assert mesh_yaml.count(anchor) == 1, "bench pod not found in the synthetic mesh"
    note = "  annotations: {sidecar.istio.io/interceptionMode: NONE}\n"
    return mesh_yaml.replace(anchor, anchor + note)


def run_size(root: Path, clusters_wanted: int, rounds: int, bare: bool) -> dict[str, Any]:
    services = (clusters_wanted - 5) // 2 + ((clusters_wanted - 5) % 2)
    shape = MeshShape(services=services, virtual_services=services, destination_rules=0)
    # Auto mTLS off: workload certificates come from the agent's SDS, which neither Envoy
    # here has; the comparison is about our xDS, identical for both with or without TLS.
    mesh_yaml = annotate_bench_pod("enableAutoMtls: false\n---\n" + synthetic_mesh_yaml(shape))
    size_dir = root / f"n{clusters_wanted}"
    size_dir.mkdir(parents=True)
    config = proxy_config(mesh_yaml)
    changed = proxy_config(mesh_yaml + "---\n" + CHANGE_YAML)
    counts = {name: len(getattr(config, name)) for name in ProxyConfig.SECTIONS}
    if bare:
        write_bare_responses(config, size_dir / "bare")
    sides = ["file", "ads", *(["bare"] if bare else [])]
    results = []
    for i in range(rounds):
        # Rotate which twin goes first, so that a drift in the machine's load (it is
        # shared) falls on all.
        one: dict[str, Any] = {}
        for side in sides[i % len(sides) :] + sides[: i % len(sides)]:
            if side == "file":
                one[side] = run_file(size_dir, config, changed, i)
            elif side == "ads":
                one[side] = run_ads(size_dir, mesh_yaml, i, config)
            else:
                one[side] = run_bare(size_dir, i)
        results.append(one)
    return {"shape": vars(shape), "resources": counts, "rounds": results}


# --------------------------------------------------------------------------- bare ADS

_BARE_TYPES = (
    ("clusters", CLUSTER_TYPE),
    ("endpoints", "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"),
    ("listeners", LISTENER_TYPE),
    ("routes", "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"),
)


def write_bare_responses(config: ProxyConfig, directory: Path) -> None:
    """The DeltaDiscoveryResponse of each type, serialized once: what the bare server sends."""
    directory.mkdir(parents=True, exist_ok=True)
    for section, type_url in _BARE_TYPES:
        resp = discovery_pb2.DeltaDiscoveryResponse(
            system_version_info="1", type_url=type_url, nonce=section
        )
        for r in getattr(config, section):
            resp.resources.add(name=_named(r), version="1").resource.Pack(r)
        (directory / f"{section}.pb").write_bytes(resp.SerializeToString())


def serve_bare(directory: Path, uds: str) -> None:
    """A bare Delta ADS server (its own process, `--serve-bare`): each type's first request
    is answered at once with the bytes written by `write_bare_responses`; ACKs and later
    requests get nothing. The floor of what any control plane can do over ADS: no
    generation, no bookkeeping, the same resources as ours."""
    import asyncio

    import grpc

    answers = {
        type_url: (directory / f"{section}.pb").read_bytes() for section, type_url in _BARE_TYPES
    }

    async def stream(requests: Any, context: Any) -> Any:
        sent: set[str] = set()
        async for request in requests:
            if request.type_url in answers and request.type_url not in sent:
                sent.add(request.type_url)
                yield answers[request.type_url]

    async def run() -> None:
        server = grpc.aio.server()
        handler = grpc.stream_stream_rpc_method_handler(
            stream,
            request_deserializer=discovery_pb2.DeltaDiscoveryRequest.FromString,
            response_serializer=lambda b: b,
        )
        service = "envoy.service.discovery.v3.AggregatedDiscoveryService"
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, {"DeltaAggregatedResources": handler}),)
        )
        server.add_insecure_port(f"unix:{uds}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()

    asyncio.run(run())


def run_bare(size_dir: Path, round_no: int) -> dict[str, Any]:
    """An ADS Envoy on the bare server (Delta), timed like the others; no change phase."""
    work = size_dir / f"bare-{round_no}"
    work.mkdir()
    uds = str(work / "bare.sock")
    args = pinned(
        "discovery", [sys.executable, __file__, "--serve-bare", str(size_dir / "bare"), uds]
    )
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    envoy: Envoy | None = None
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != b"ready":
            raise RuntimeError("bare ADS server did not start")
        dynamic = {
            "lds_config": _source({"ads": {}}),
            "cds_config": _source({"ads": {}}),
            "ads_config": {
                "api_type": "DELTA_GRPC",
                "set_node_on_first_message_only": True,
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
            },
        }
        envoy = Envoy(
            "bare", work, dynamic, {"pipe": {"path": uds}}, log_levels=LOG_LEVELS + ",config:debug"
        )
        envoy.start()
        envoy.wait_line(lambda t: WORKERS in t, "starting workers")
        cpu = envoy.cpu_seconds()
        time.sleep(0.5)
        lines = envoy.lines()
        times = startup_times(lines)
        times["envoy_cpu"] = cpu
        waits = server_waits(lines, times["workers"] + lines[0].at)
        times["waiting_for_server"] = sum(waits.values())
        times.update({f"wait_{k}": v for k, v in waits.items()})
        return {"initial_s": times}
    finally:
        if envoy is not None:
            envoy.stop()
        terminate(server)


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
        _busy_row(n, rounds),
        *_stage_rows(n, rounds),
        *_bare_rows(n, rounds),
    ]


def _busy_row(n: int, rounds: list[dict[str, Any]]) -> str:
    """Envoy's CPU time plus the time it sat idle waiting for the server: what the load
    would take on a core of its own (a loaded machine stretches wall time 2-5x here while
    both stay put)."""

    def busy(side: str) -> float | None:
        values = [
            r[side]["initial_s"]["envoy_cpu"] + r[side]["initial_s"].get("waiting_for_server", 0)
            for r in rounds
            if r[side]["initial_s"].get("envoy_cpu") is not None
        ]
        return median(values)

    a, f = busy("ads"), busy("file")
    return (
        f"| N={n}: Envoy CPU + idle waiting for the server (load-independent) | {_s(a)} | "
        f"{_s(f)} | {_ratio(a, f)} | |"
    )


def _stage_rows(n: int, rounds: list[dict[str, Any]]) -> list[str]:
    """One row per stage (STAGES): medians over rounds, ADS minus file (and the bare ADS
    server's median, when it ran)."""
    rows = []
    sides = [side for side in ("ads", "file", "bare") if all(side in r for r in rounds)]
    for label, _, _ in STAGES:
        per = {
            side: median(
                [
                    v
                    for r in rounds
                    if (v := stage_seconds(r[side]["initial_s"]).get(label)) is not None
                ]
            )
            for side in sides
        }
        a, f, b = per.get("ads"), per.get("file"), per.get("bare")
        diff = f"{(a - f) * 1e3:+.0f} ms" if a is not None and f is not None else ""
        if "bare" in per:
            diff += f" (bare ADS {_s(b)})"
        rows.append(f"| N={n} stage: {label} | {_s(a)} | {_s(f)} | {diff} | |")
    return rows


def _bare_rows(n: int, rounds: list[dict[str, Any]]) -> list[str]:
    """The bare ADS server's Envoy beside ours: what the protocol costs vs what we add."""
    if not all("bare" in r for r in rounds):
        return []
    b = med(rounds, "bare", "initial_s", "workers")
    a = med(rounds, "ads", "initial_s", "workers")
    f = med(rounds, "file", "initial_s", "workers")
    pairs = [
        r["ads"]["initial_s"]["workers"] / r["bare"]["initial_s"]["workers"]
        for r in rounds
        if "workers" in r["ads"]["initial_s"] and "workers" in r["bare"]["initial_s"]
    ]
    cpu = med(rounds, "bare", "initial_s", "envoy_cpu")
    return [
        f"| N={n}: bare ADS server (same bytes, no generation): start -> starting workers "
        f"| ours {_s(a)} | bare {_s(b)} | ours/bare {_ratio(a, b)} "
        f"(rounds {', '.join(f'{x:.2f}' for x in pairs)}); bare/file {_ratio(b, f)} | |",
        f"| N={n}: bare ADS: Envoy CPU at starting workers; idle waiting for it | {_s(cpu)} | "
        f"{_s(med(rounds, 'bare', 'initial_s', 'waiting_for_server'))} | | |",
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
            f"N={n}: what each Envoy holds (config_dump read once after the load, round 1) "
            f"vs the generated config: ADS {rounds[0]['ads'].get('same_config')}; "
            f"file twin (EDS folded into STATIC clusters, RDS inlined) "
            f"{rounds[0]['file'].get('same_config')}"
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
    parser.add_argument(
        "--bare", action="store_true", help="also time an Envoy on a bare ADS server (same bytes)"
    )
    parser.add_argument("--serve-bare", nargs=2, metavar=("DIR", "UDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(Path(args.serve_bare[0]), args.serve_bare[1])
        return
    API[0] = "DELTA_GRPC" if args.api == "delta" else "GRPC"
    if args.cpus:
        PIN["envoy"], _, PIN["discovery"] = args.cpus.partition(":")
    root = Path(tempfile.mkdtemp(prefix="b4-"))
    sizes: dict[str, Any] = {}
    try:
        for size in (x.strip() for x in args.sizes.split(",")):
            if size:
                sizes[size] = run_size(root, int(size), args.rounds, args.bare)
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

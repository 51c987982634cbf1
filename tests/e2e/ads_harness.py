"""Real processes for the ADS tests: `meshpilot discovery` and Envoy, with their probes.

- `DiscoveryProcess`: the control plane as a subprocess on free loopback ports (plus a Unix
  socket for xDS), stopped with SIGTERM; it must exit 0.
- `EnvoyProcess`: the real Envoy with an istio-proxy-like bootstrap whose `xds-grpc`
  cluster points at the discovery process. Admin listens on a Unix socket. With root, an
  Envoy can run in a network namespace of its own (`unshare --net`), so that listeners on
  fixed ports (15001, 15006, 80, 443, 9080...) never clash with anything on the machine;
  it then reaches the control plane through the Unix socket.

Every process is killed by `stop()` whatever happened; the fixtures call it in finalizers.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from envoy.config.bootstrap.v3 import bootstrap_pb2
from envoy.extensions.upstreams.http.v3 import http_protocol_options_pb2
from google.protobuf import json_format

from meshpilot.envoy.binary import envoy_binary
from meshpilot.runtime.ports import free_port

T = TypeVar("T")

# Registers the type a bootstrap's `typed_extension_protocol_options` names.
_ = http_protocol_options_pb2.HttpProtocolOptions

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_DISCOVERY_CLI = (
    "import sys; from meshpilot.cli.discovery import discovery; "
    "discovery(sys.argv[1:], prog_name='meshpilot discovery')"
)
SHORT_TYPES = ("cds", "eds", "lds", "rds", "sds")
_HTTP_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 15) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(0.05)


def http_get(
    url: str, headers: Mapping[str, str] | None = None, timeout: float = 3
) -> tuple[int, str]:
    """(status, body); status 0 with the error text when nothing answers."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    try:
        with _OPENER.open(request, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (OSError, urllib.error.URLError) as exc:
        return 0, str(exc)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def unix_get(path: str, target: str, timeout: float = 3) -> tuple[int, str]:
    conn = _UnixConnection(path, timeout)
    try:
        conn.request("GET", target)
        reply = conn.getresponse()
        return reply.status, reply.read().decode()
    except OSError as exc:
        return 0, str(exc)
    finally:
        conn.close()


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text -> {'name{labels}': value} (labels as written)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _terminate(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait: float = 10) -> int:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@dataclass
class DiscoveryProcess:
    paths: Sequence[Path]
    workdir: Path
    debounce: str = "300ms"
    extra_args: Sequence[str] = ()  # more `meshpilot discovery` options (e.g. --vhds)
    xds_port: int = field(default_factory=free_port)
    monitoring_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def uds(self) -> str:
        return str(self.workdir / "xds.sock")

    @property
    def log(self) -> Path:
        return self.workdir / "discovery.log"

    def start(self) -> DiscoveryProcess:
        args = [sys.executable, "-c", _DISCOVERY_CLI]
        for path in self.paths:
            args += ["-f", str(path)]
        args += ["--xds-port", str(self.xds_port), "--monitoring-port", str(self.monitoring_port)]
        args += ["--xds-uds", self.uds, "--debounce", self.debounce, "--log-level", "debug"]
        args += list(self.extra_args)
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, f"discovery ready (log: {self.log})", timeout=30)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"discovery exited {self.proc.returncode}:\n{self.log.read_text()}"
            )
        return self.get("/ready")[0] == 200

    def get(self, path: str) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.monitoring_port}{path}")

    def json(self, path: str) -> Any:
        status, body = self.get(path)
        assert status == 200, f"GET {path}: {status} {body}"
        return json.loads(body)

    def metrics(self) -> dict[str, float]:
        status, body = self.get("/metrics")
        assert status == 200, body
        return parse_metrics(body)

    def pushes(self, short_type: str) -> float:
        return self.metrics().get(f'pilot_xds_pushes{{type="{short_type}"}}', 0)

    def rejects(self) -> dict[str, float]:
        return {k: v for k, v in self.metrics().items() if k.startswith("pilot_total_xds_rejects")}

    def stop(self) -> int:
        """SIGTERM; the exit status (0 for a clean shutdown)."""
        return _terminate(self.proc) if self.proc else 0


@dataclass
class StoreDiscovery(DiscoveryProcess):
    """`meshpilot discovery --store DIR` (a live store, as GitOps syncs it), also on the Unix
    socket `uds` for Envoys in a network namespace."""

    store: Path = Path()
    log_level: str = "debug"

    def start(self) -> StoreDiscovery:
        meshpilot = Path(sys.executable).parent / "meshpilot"
        args = [str(meshpilot), "discovery", "--store", str(self.store), "--no-ca"]
        args += ["--xds-port", str(self.xds_port), "--monitoring-port", str(self.monitoring_port)]
        args += ["--xds-uds", self.uds, "--debounce", self.debounce, "--log-level", self.log_level]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, f"discovery ready (log: {self.log})", timeout=30)
        return self


@dataclass
class EnvoyProcess:
    name: str
    node_id: str
    metadata: dict[str, Any]
    workdir: Path
    discovery: DiscoveryProcess
    delta: bool = False
    own_netns: bool = False  # run in a network namespace of its own (needs root)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def admin(self) -> str:
        # Short: a Unix socket path has at most 107 bytes, and pytest's temp dirs grow long.
        digest = hashlib.sha1(self.name.encode()).hexdigest()[:8]
        return str(self.workdir / f"{digest}-admin.sock")

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}-envoy.log"

    def bootstrap(self) -> dict[str, Any]:
        xds = (
            {"pipe": {"path": self.discovery.uds}}
            if self.own_netns
            else {"socket_address": {"address": "127.0.0.1", "port_value": self.discovery.xds_port}}
        )
        source = {"ads": {}, "initial_fetch_timeout": "0s", "resource_api_version": "V3"}
        return {
            "node": {"id": self.node_id, "cluster": self.name, "metadata": self.metadata},
            "admin": {"address": {"pipe": {"path": self.admin}}},
            "dynamic_resources": {
                "lds_config": source,
                "cds_config": source,
                "ads_config": {
                    "api_type": "DELTA_GRPC" if self.delta else "GRPC",
                    "set_node_on_first_message_only": True,
                    "transport_api_version": "V3",
                    "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
                },
            },
            "static_resources": {
                "clusters": [
                    _h2_cluster("xds-grpc", xds),
                    _h2_cluster("sds-grpc", {"pipe": {"path": str(self.workdir / "sds.sock")}}),
                ]
            },
        }

    def start(self) -> EnvoyProcess:
        boot = json_format.ParseDict(self.bootstrap(), bootstrap_pb2.Bootstrap())
        path = self.workdir / f"{self.name}-bootstrap.json"
        path.write_text(json_format.MessageToJson(boot))
        args = [str(envoy_binary()), "-c", str(path), "--disable-hot-restart"]
        # as the agent runs Envoy (Istio's defaults): misc:error drops a deprecation warning
        # per route at every route update
        args += ["--concurrency", "1", "-l", "warning", "--component-log-level", "misc:error"]
        args += ["--log-path", str(self.log)]
        if self.own_netns:
            args = [
                "unshare",
                "--net",
                "--",
                "sh",
                "-c",
                'ip link set lo up && exec "$@"',
                "sh",
                *args,
            ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def get(self, target: str) -> tuple[int, str]:
        return unix_get(self.admin, target)

    def wait_live(self, timeout: float = 20) -> None:
        def live() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"Envoy {self.name} exited: {self.log_text()}")
            return self.get("/ready") == (200, "LIVE\n")

        wait_for(live, f"Envoy {self.name} LIVE", timeout)

    def config_dump(self) -> dict[str, Any]:
        status, body = self.get("/config_dump?include_eds")
        assert status == 200, body
        result: dict[str, Any] = json.loads(body)
        return result

    def rejected_updates(self) -> dict[str, int]:
        """Envoy's own count of rejected xDS updates, per stat: must stay empty."""
        status, body = self.get("/stats?filter=update_rejected")
        if status != 200:
            return {}
        out = {}
        for line in body.splitlines():
            stat, _, value = line.partition(": ")
            if value.strip().isdigit() and int(value) > 0:
                out[stat] = int(value)
        return out

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            _terminate(self.proc, signal.SIGTERM, wait=5)


def _h2_cluster(name: str, address: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            _HTTP_OPTIONS: {
                "@type": f"type.googleapis.com/{_HTTP_OPTIONS}",
                "explicit_http_config": {"http2_protocol_options": {}},
            }
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
        },
    }


def can_use_netns() -> bool:
    return (
        os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None
    )


def istio_metadata(
    namespace: str, labels: Mapping[str, str], interception: str = "REDIRECT", **extra: str
) -> dict[str, Any]:
    """Node metadata as Istio's agent sets it."""
    return {
        "NAMESPACE": namespace,
        "LABELS": dict(labels),
        "INTERCEPTION_MODE": interception,
        "ISTIO_VERSION": "1.28.0",
        **extra,
    }

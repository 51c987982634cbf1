"""The agent's workload certificates with the real Envoy: SDS over the agent's Unix socket,
rotation under a stream of requests through an mTLS hop, CA outage.

A real CA (tests/unit/agent/ca_server.py: real TLS, real signing, bearer tokens) runs in a
thread; the agent runs as `meshpilot proxy sidecar` with `--root-cert`, `--ca-address` and
`--token-file`. A second, static Envoy takes its secrets from the agent's socket (as Istio's
Envoy does from `./var/run/secrets/workload-spiffe-uds/socket`): a plain HTTP listener sends
every request over mTLS (SDS `default` + `ROOTCA`, SAN checked) to a listener that requires a
client certificate from the same SDS. The control plane's mTLS listeners (another part of the
security work) will make this the sidecar's own path.
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from tests.e2e.agent_harness import (
    Agent,
    AgentFactory,
    agent_factory,
    http_get,
    wait_for,
)
from tests.unit.agent.ca_server import CaThread, LocalCa

from meshpilot.agent.options import sds_socket_path
from meshpilot.envoy.binary import envoy_binary
from meshpilot.runtime.ports import free_ports

pytestmark = pytest.mark.envoy

IDENTITY = "spiffe://cluster.local/ns/default/sa/sleep"
TOKEN = "bootstrap-token-for-sleep-0c1d"
TLS = "envoy.transport_sockets.tls"
TYPES = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3."
# `meshpilot proxy-config`, run the way the console script runs it.
_PROXY_CONFIG_CLI = (
    "from meshpilot.cli.proxy_config import proxy_config; "
    "proxy_config(prog_name='meshpilot proxy-config')"
)


@pytest.fixture
def ca() -> Iterator[CaThread]:
    local = LocalCa.create()
    local.tokens[TOKEN] = IDENTITY
    thread = CaThread(local).start()
    yield thread
    thread.stop()


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[AgentFactory]:
    yield from agent_factory(tmp_path, 1.0)


def _sds(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "sds_config": {
            "api_config_source": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "sds-grpc"}}],
            },
            "initial_fetch_timeout": "0s",
            "resource_api_version": "V3",
        },
    }


def _tls_context(kind: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": TLS,
        "typed_config": {
            "@type": TYPES + kind,
            "common_tls_context": {
                "tls_certificate_sds_secret_configs": [_sds("default")],
                "combined_validation_context": {
                    "default_validation_context": {
                        "match_typed_subject_alt_names": [
                            {"san_type": "URI", "matcher": {"exact": IDENTITY}}
                        ]
                    },
                    "validation_context_sds_secret_config": _sds("ROOTCA"),
                },
            },
            **extra,
        },
    }


def _hcm(routes: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network."
            "http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "hcm",
            "route_config": {
                "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [routes]}]
            },
            "http_filters": [
                {
                    "name": "envoy.filters.http.router",
                    "typed_config": {
                        "@type": "type.googleapis.com/"
                        "envoy.extensions.filters.http.router.v3.Router"
                    },
                }
            ],
        },
    }


def _address(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def mtls_bootstrap(socket: Path, admin: int, front: int, back: int) -> dict[str, Any]:
    """front (plain HTTP) --mTLS--> back (client certificate required) -> 200 `ok`."""
    h2 = {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": {"http2_protocol_options": {}},
        }
    }

    def cluster(name: str, address: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": {
                "cluster_name": name,
                "endpoints": [{"lb_endpoints": [{"endpoint": {"address": address}}]}],
            },
            **extra,
        }

    return {
        "node": {
            "id": "sidecar~127.0.0.1~sleep-1.default~default.svc.cluster.local",
            "cluster": "sleep.default",
        },
        "admin": {"address": _address(admin)},
        "static_resources": {
            "clusters": [
                cluster(
                    "sds-grpc", {"pipe": {"path": str(socket)}}, typed_extension_protocol_options=h2
                ),
                cluster(
                    "mtls",
                    _address(back),
                    transport_socket=_tls_context(
                        "UpstreamTlsContext", sni="outbound_.80_._.back.default.svc.cluster.local"
                    ),
                ),
            ],
            "listeners": [
                {
                    "name": "front",
                    "address": _address(front),
                    "filter_chains": [
                        {
                            "filters": [
                                _hcm({"match": {"prefix": "/"}, "route": {"cluster": "mtls"}})
                            ]
                        }
                    ],
                },
                {
                    "name": "back",
                    "address": _address(back),
                    "filter_chains": [
                        {
                            "filters": [
                                _hcm(
                                    {
                                        "match": {"prefix": "/"},
                                        "direct_response": {
                                            "status": 200,
                                            "body": {"inline_string": "ok"},
                                        },
                                    }
                                )
                            ],
                            "transport_socket": _tls_context(
                                "DownstreamTlsContext", require_client_certificate=True
                            ),
                        }
                    ],
                },
            ],
        },
    }


class MtlsEnvoy:
    def __init__(self, agent: Agent, tmp: Path) -> None:
        self.admin, self.front, self.back = free_ports(3)
        boot = mtls_bootstrap(sds_socket_path(agent.work_dir), self.admin, self.front, self.back)
        config = tmp / "mtls-envoy.json"
        config.write_text(json.dumps(boot))
        self.log = tmp / "mtls-envoy.log"
        args = [
            str(envoy_binary()),
            "-c",
            str(config),
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "-l",
            "warning",
            "--log-path",
            str(self.log),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin}"

    def dump(self) -> dict[str, Any]:
        """Envoy's config dump ({} until its admin answers)."""
        assert self.proc.poll() is None, self.log.read_text()
        status, body = http_get(self.admin, "/config_dump")
        result: dict[str, Any] = json.loads(body) if status == 200 else {}
        return result

    def secrets(self) -> dict[str, dict[str, Any]]:
        for section in self.dump().get("configs", []):
            if section["@type"].endswith("SecretsConfigDump"):
                return {s["name"]: s for s in section.get("dynamic_active_secrets", [])}
        return {}

    def serial(self) -> int | None:
        secret = self.secrets().get("default")
        if not secret:
            return None
        pem = secret["secret"]["tls_certificate"]["certificate_chain"]["inline_bytes"]
        return x509.load_pem_x509_certificates(base64.b64decode(pem))[0].serial_number

    def rejected(self) -> list[str]:
        _, body = http_get(self.admin, "/stats?filter=update_rejected")
        return [line for line in body.splitlines() if not line.endswith(": 0")]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_sleep_agent(start_agent: AgentFactory, ca: CaThread, tmp: Path, *extra: str) -> Agent:
    root = ca.ca.write_root(tmp / "root-cert.pem")
    (tmp / "token").write_text(TOKEN)
    return start_agent(
        "sidecar",
        "--pod",
        "sleep-1.default",
        "--service-account",
        "sleep",
        "--interception-mode",
        "NONE",
        "--root-cert",
        str(root),
        "--ca-address",
        ca.ca.address,
        "--token-file",
        str(tmp / "token"),
        "--agent-log-level",
        "debug",
        *extra,
    )


@pytest.fixture
def mtls_envoy(start_agent: AgentFactory, ca: CaThread, tmp_path: Path) -> Iterator[MtlsEnvoy]:
    agent = start_sleep_agent(start_agent, ca, tmp_path, "--secret-ttl", "6s")
    wait_for(lambda: sds_socket_path(agent.work_dir).exists(), "the agent's SDS socket")
    envoy = MtlsEnvoy(agent, tmp_path)
    envoy.agent = agent  # type: ignore[attr-defined]
    yield envoy
    envoy.stop()


class Load:
    """Requests through the mTLS hop from two threads: one on a kept-alive connection,
    one opening a new connection each time. Every answer is recorded."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.results: list[tuple[str, int | str]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,)) for k in (True, False)]

    def _run(self, keep_alive: bool) -> None:
        conn: http.client.HTTPConnection | None = None
        while not self._stop.is_set():
            try:
                if conn is None or not keep_alive:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/")
                reply = conn.getresponse()
                reply.read()
                self.results.append(("keep" if keep_alive else "new", reply.status))
            except OSError as exc:
                self.results.append(("keep" if keep_alive else "new", repr(exc)))
                conn = None
            finally:
                if not keep_alive and conn is not None:
                    conn.close()
            time.sleep(0.005)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()


def test_envoy_loads_default_and_rootca_from_the_agent(mtls_envoy: MtlsEnvoy) -> None:
    secrets = wait_for(
        lambda: len(mtls_envoy.secrets()) == 2 and mtls_envoy.secrets(),
        "default and ROOTCA active in Envoy",
        timeout=20,
    )
    assert set(secrets) == {"default", "ROOTCA"}
    default = secrets["default"]["secret"]["tls_certificate"]
    # Envoy's dump redacts the key it holds: nothing of it leaves Envoy.
    assert base64.b64decode(default["private_key"]["inline_bytes"]) == b"[redacted]"
    _, body = wait_for(
        lambda: (r := http_get(mtls_envoy.front, "/"))[0] == 200 and r,
        "a request through the mTLS hop",
    )
    assert body == "ok"
    assert mtls_envoy.rejected() == []
    # istioctl's view, from Envoy's admin (--wide: with the identity and the chain).
    admin = mtls_envoy.admin_url
    table = subprocess.run(
        [sys.executable, "-c", _PROXY_CONFIG_CLI, "secret", "--wide", "--admin", admin],
        capture_output=True,
        text=True,
        check=False,
    )
    assert table.returncode == 0, table.stderr
    assert "default" in table.stdout and "ROOTCA" in table.stdout
    assert f"{mtls_envoy.serial():x}" in table.stdout
    assert "PRIVATE KEY" not in table.stdout
    default_row = next(line for line in table.stdout.splitlines() if line.startswith("default"))
    assert IDENTITY in default_row and "2 certs, issued by O=cluster.local" in default_row


def test_rotation_under_load_drops_no_request(mtls_envoy: MtlsEnvoy) -> None:
    wait_for(lambda: http_get(mtls_envoy.front, "/")[0] == 200, "mTLS path up", timeout=20)
    first = mtls_envoy.serial()
    with Load(mtls_envoy.front) as load:
        # 6s certificates rotate at 80%: two rotations within ~10s.
        second = wait_for(lambda: (s := mtls_envoy.serial()) != first and s, "rotation", 10)
        wait_for(
            lambda: (s := mtls_envoy.serial()) not in (first, second) and s, "second rotation", 10
        )
        time.sleep(0.5)
    failures = [r for r in load.results if r[1] != 200]
    assert len(load.results) > 100
    assert failures == [], failures[:5]
    assert {kind for kind, _ in load.results} == {"keep", "new"}
    assert mtls_envoy.rejected() == []
    agent_log = mtls_envoy.agent.log.read_text()  # type: ignore[attr-defined]
    assert (
        agent_log.count(
            "workload certificate for spiffe://cluster.local/ns/default/sa/sleep issued"
        )
        >= 3
    )
    assert TOKEN not in agent_log and "PRIVATE KEY" not in agent_log

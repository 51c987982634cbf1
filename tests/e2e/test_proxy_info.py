"""`meshpilot proxy-status` and `meshpilot proxy-config` against a real control plane and a
real Envoy.

One mesh per test: `meshpilot discovery` over a small config (a `web` service with subsets,
a VirtualService, a client Pod), a `meshpilot proxy sidecar` agent for `client.default`
(interceptionMode NONE, so its outbound listener binds 127.0.0.1:<port>) and the workload
certificates its Envoy asks the agent's SDS socket for. Every process is stopped by the
fixture, and the control plane must exit 0.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from tests.e2e.ads_harness import DiscoveryProcess, wait_for
from tests.e2e.ads_mesh import APP, write
from tests.e2e.agent_harness import Agent, agent_factory, http_get
from tests.e2e.workload_sds import WorkloadSds

from meshpilot.agent.options import sds_socket_path
from meshpilot.cli.proxy_config import proxy_config
from meshpilot.cli.proxy_status import proxy_status
from meshpilot.proxyinfo import status
from meshpilot.proxyinfo.clusters import COLUMNS as CLUSTER_COLUMNS
from meshpilot.proxyinfo.endpoints import COLUMNS as ENDPOINT_COLUMNS
from meshpilot.proxyinfo.endpoints import EDS_COLUMNS as EDS_ENDPOINT_COLUMNS
from meshpilot.proxyinfo.listeners import VERBOSE_COLUMNS as LISTENER_COLUMNS
from meshpilot.proxyinfo.routes import VERBOSE_COLUMNS as ROUTE_COLUMNS
from meshpilot.proxyinfo.secrets import COLUMNS as SECRET_COLUMNS
from meshpilot.runtime.ports import free_port

pytestmark = pytest.mark.envoy

PROXY = "client.default"
WEB = "web.default.svc.cluster.local"
# Subsets v1 and v2, all traffic to v1, and mTLS to web: the sidecar then asks its agent
# for the workload certificate (`default`) and the trust bundle (`ROOTCA`).
ROUTING = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: web, namespace: default}
spec:
  host: web.default.svc.cluster.local
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: default}
spec:
  hosts: [web.default.svc.cluster.local]
  http:
  - route:
    - destination: {host: web.default.svc.cluster.local, subset: v1}
"""


@dataclass
class ProxyMesh:
    port: int  # the web service's port
    discovery: DiscoveryProcess
    agent: Agent
    sds: WorkloadSds

    @property
    def discovery_url(self) -> str:
        return f"http://127.0.0.1:{self.discovery.monitoring_port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.agent.ports.envoy_admin}"


def _synced(discovery: DiscoveryProcess) -> bool:
    for entry in discovery.json("/debug/syncz"):
        if entry["proxy"] == PROXY and {"cds", "lds", "eds", "rds"} <= entry["types"].keys():
            return all(w["status"] == "SYNCED" for w in entry["types"].values())
    return False


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[ProxyMesh]:
    port = free_port()
    config = tmp_path / "config"
    config.mkdir()
    write(config / "app.yaml", APP.format(port=port))
    write(config / "routing.yaml", ROUTING)
    discovery = DiscoveryProcess([config], tmp_path)
    agents = agent_factory(tmp_path, drain=1.0)
    start_agent = next(agents)
    sds: WorkloadSds | None = None
    try:
        discovery.start()
        agent = start_agent(
            "sidecar", "--pod", PROXY, "--interception-mode", "NONE", "--label", "app=client",
            discovery_port=discovery.xds_port,
        )  # fmt: skip
        socket = sds_socket_path(agent.work_dir)
        wait_for(lambda: socket.parent.is_dir(), "the agent's SDS socket directory")
        sds = WorkloadSds(socket).start()
        ready = (200, "LIVE\n")
        wait_for(lambda: http_get(agent.ports.envoy_admin, "/ready") == ready, "Envoy LIVE", 30)
        wait_for(lambda: _synced(discovery), "every xDS type ACKed", 20)
        yield ProxyMesh(port, discovery, agent, sds)
    finally:
        agents.close()  # stops the agent and its Envoy
        if sds is not None:
            sds.stop()
        status = discovery.stop()
    assert status == 0, f"discovery exited {status}:\n{discovery.log.read_text()[-3000:]}"


def _run(command: object, *args: str) -> Result:
    result = CliRunner().invoke(command, list(args))  # type: ignore[arg-type]
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def _rows(output: str, columns: tuple[str, ...]) -> list[list[str]]:
    """The rows of the table with these columns in `output`, cut where the header's
    columns start (the header line itself is left out)."""
    lines = output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(" ".join(columns[:1])))
    header = lines[at]
    starts, position = [], 0
    for column in columns:
        position = header.index(column, position)
        starts.append(position)
    ends = [*starts[1:], None]
    return [
        [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]
        for line in lines[at + 1 :]
        if line.strip()
    ]


def test_proxy_status_shows_the_sidecar_synced(mesh: ProxyMesh) -> None:
    result = _run(proxy_status, "--discovery", mesh.discovery_url)
    assert result.exit_code == 0, result.output
    control_plane = f"meshpilot-{socket.gethostname()}"  # the control plane's own id
    rows = _rows(result.stdout, status.SUMMARY_COLUMNS)
    assert len(rows) == 1 and rows[0][:8] == [
        PROXY, "Kubernetes", "SYNCED", "SYNCED", "SYNCED", "SYNCED", "NOT SENT", control_plane,
    ]  # fmt: skip

    detail = _run(proxy_status, PROXY, "--discovery", mesh.discovery_url)
    assert detail.exit_code == 0, detail.output
    types = {row[0]: row[1] for row in _rows(detail.stdout, status.DETAIL_COLUMNS)}
    assert {"CDS", "LDS", "EDS", "RDS"} <= types.keys()
    assert set(types.values()) == {"SYNCED"} and "NACK errors" not in detail.stdout

    raw = _run(proxy_status, PROXY, "--discovery", mesh.discovery_url, "-o", "json")
    assert [entry["proxy"] for entry in json.loads(raw.stdout)] == [PROXY]


def test_proxy_config_reads_the_envoy_admin(mesh: ProxyMesh) -> None:
    admin = ("--admin", mesh.admin_url)
    result = _run(proxy_config, "clusters", PROXY, *admin)
    assert result.exit_code == 0, result.output
    node = f"sidecar~127.0.0.1~{PROXY}~default.svc.cluster.local"
    assert result.stdout.startswith(f"Source: Envoy admin {mesh.admin_url} (node {node})\n")
    clusters = _rows(result.stdout, CLUSTER_COLUMNS)
    assert [WEB, str(mesh.port), "v1", "outbound", "EDS", "web.default"] in clusters
    assert [WEB, str(mesh.port), "-", "outbound", "EDS", "web.default"] in clusters
    assert {"xds-grpc", "sds-grpc", "agent", "prometheus_stats"} <= {r[0] for r in clusters}

    result = _run(proxy_config, "listeners", PROXY, *admin)
    listeners = _rows(result.stdout, LISTENER_COLUMNS)
    assert ["127.0.0.1", str(mesh.port), "ALL", f"Route: {mesh.port}"] in listeners
    health = str(mesh.agent.ports.health)  # the agent's static listener
    assert ["0.0.0.0", health, "ALL", "Inline Route: /healthz/ready*"] in listeners

    routes = _rows(_run(proxy_config, "r", PROXY, *admin).stdout, ROUTE_COLUMNS)
    vhost = f"{WEB}:{mesh.port}"
    assert [str(mesh.port), vhost, "web, web.default + 1 more...", "/*", "web.default"] in routes

    cluster = f"outbound|{mesh.port}|v1|{WEB}"
    result = _run(proxy_config, "ep", PROXY, *admin, "--cluster", cluster)
    endpoints = _rows(result.stdout, ENDPOINT_COLUMNS)
    assert endpoints == [[f"127.0.0.2:{mesh.port}", "HEALTHY", "OK", cluster]]


def test_proxy_config_secret_shows_certificates_never_keys(mesh: ProxyMesh) -> None:
    admin = ("--admin", mesh.admin_url)
    rows = _rows(_run(proxy_config, "secret", PROXY, *admin).stdout, SECRET_COLUMNS)
    by_name = {row[0]: row for row in rows}
    assert by_name["default"][1:4] == ["Cert Chain", "ACTIVE", "true"]
    assert by_name["ROOTCA"][1:4] == ["CA", "ACTIVE", "true"]
    key = bytes(mesh.sds.secrets["default"].tls_certificate.private_key.inline_bytes)
    for output in ("json", "yaml"):
        raw = _run(proxy_config, "secret", PROXY, *admin, "-o", output)
        assert raw.exit_code == 0 and raw.stderr.startswith("Source: Envoy admin")
        assert "PRIVATE KEY" not in raw.stdout and base64.b64encode(key).decode() not in raw.stdout
    everything = _run(proxy_config, "all", PROXY, *admin, "-o", "json").stdout
    assert "PRIVATE KEY" not in everything and json.loads(everything)["configs"]


def test_proxy_config_from_the_control_plane_matches_envoy(mesh: ProxyMesh) -> None:
    discovery = ("--discovery", mesh.discovery_url)
    ours = _run(proxy_config, "clusters", PROXY, *discovery, "-o", "json")
    assert ours.exit_code == 0, ours.output
    assert ours.stderr.startswith(f"Source: control plane {mesh.discovery_url}/debug/config_dump")
    theirs = _run(proxy_config, "clusters", PROXY, "--admin", mesh.admin_url, "-o", "json")
    assert {c["name"] for c in json.loads(ours.stdout)} <= {
        c["name"] for c in json.loads(theirs.stdout)
    }

    table = _run(proxy_config, "endpoints", PROXY, *discovery, "--port", str(mesh.port))
    assert table.stdout.startswith("Source: control plane")
    cluster = f"outbound|{mesh.port}|v1|{WEB}"
    rows = _rows(table.stdout, EDS_ENDPOINT_COLUMNS)  # istioctl's config-dump table
    assert [f"127.0.0.2:{mesh.port}", "HEALTHY", cluster] in [[r[0], r[1], r[3]] for r in rows]
    routes = _run(
        proxy_config, "routes", PROXY, *discovery, "--name", str(mesh.port), "--no-verbose"
    )
    assert _rows(routes.stdout, ("NAME", "VIRTUAL HOSTS")) == [[str(mesh.port), "2"]]


def test_unknown_proxies_are_one_line_errors(mesh: ProxyMesh) -> None:
    result = _run(proxy_status, "nobody.default", "--discovery", mesh.discovery_url)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: unknown proxy nobody.default: not connected to the control plane at "
        f"{mesh.discovery_url} (connected: {PROXY})"
    )
    result = _run(proxy_config, "clusters", "nobody.default", "--discovery", mesh.discovery_url)
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("Error: unknown proxy nobody.default: the control plane at")


def test_proxy_config_file_reads_a_saved_envoy_config_dump(mesh: ProxyMesh, tmp_path: Path) -> None:
    """`--file` on the real Envoy's saved /config_dump gives the tables `--admin` gives."""
    port = mesh.agent.ports.envoy_admin
    with_eds, without_eds = tmp_path / "eds.json", tmp_path / "plain.json"
    with_eds.write_text(http_get(port, "/config_dump?include_eds")[1])
    without_eds.write_text(http_get(port, "/config_dump")[1])
    admin = ("--admin", mesh.admin_url)
    for table in ("listeners", "routes", "clusters", "secret"):
        live = _run(proxy_config, table, PROXY, *admin).stdout.split("\n", 1)
        saved = _run(proxy_config, table, PROXY, "--file", str(without_eds))
        assert saved.exit_code == 0, saved.output
        assert saved.stdout.split("\n", 1)[1] == live[1], table
        assert saved.stdout.startswith(f"Source: file {without_eds} (node sidecar~")
    cluster = f"outbound|{mesh.port}|v1|{WEB}"
    endpoints = _run(proxy_config, "ep", PROXY, "--file", str(with_eds), "--cluster", cluster)
    rows = _rows(endpoints.stdout, EDS_ENDPOINT_COLUMNS)
    assert [[r[0], r[1], r[3]] for r in rows] == [[f"127.0.0.2:{mesh.port}", "HEALTHY", cluster]]
    for source in (admin, ("--file", str(without_eds))):  # no ECDS yet: istioctl's empty table
        ecds = _run(proxy_config, "ecds", PROXY, *source)
        assert ecds.exit_code == 0 and ecds.stdout.split("\n", 1)[1] == "ECDS NAME     TYPE\n"
    missing = _run(proxy_config, "ep", PROXY, "--file", str(without_eds))
    assert missing.exit_code == 1 and "only when asked with ?include_eds" in missing.stderr

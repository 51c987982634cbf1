"""The telemetry settings a user writes: bad mesh settings are errors naming the field,
a Telemetry change pushes listeners only,
and a tracing provider needs its collector to be a mesh service."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from envoy.config.trace.v3 import zipkin_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.cli.main import cli
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.model.proxy import ProxyType
from meshpilot.model.relevance import affected_types
from meshpilot.xds.protos import Filters
from tests.conftest import config_for, push_from_paths
from tests.unit.golden.cases import CASES_DIR

MESH = CASES_DIR.parent / "inputs" / "authz-mesh.yaml"
HTTPBIN = "httpbin-v1-5f6b8d7c9-abcde.foo"
BAD = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    accessLogEncoding: XML
    extensionProviders:
    - name: both
      zipkin: {service: z, port: 9411}
      datadog: {service: d, port: 8126}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  metrics:
  - providers: [{name: prometheus}]
  accessLogging:
  - providers: [{name: envoy}]
"""


def test_analyze_names_bad_mesh_telemetry_fields(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(BAD)
    result = CliRunner().invoke(cli, ["analyze", "-f", str(path)])
    assert result.exit_code == 79, result.output
    assert result.stdout.splitlines() == [
        f"Error [IST0106] (MeshConfig {path}:5) Schema validation error: "
        "data.mesh.accessLogEncoding: Input should be 'TEXT' or 'JSON'",
        f"Error [IST0106] (MeshConfig {path}:5) Schema validation error: "
        "data.mesh.extensionProviders[0]: extension provider 'both' must set one provider kind",
    ]


def test_a_telemetry_change_pushes_listeners_only() -> None:
    key = ConfigKey(Kind.TELEMETRY, "foo", "t")
    for proxy_type in (ProxyType.SIDECAR, ProxyType.ROUTER):
        assert affected_types(proxy_type, [key], {}, {}) == frozenset({"lds"})


# foo's sidecars see their own namespace only.
SCOPED = """
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: foo}
spec:
  egress: [{hosts: ["./*"]}]
"""


def _traced_hcms(service: str, port: int, tmp_path: Path, extra: str = "") -> list[bool]:
    config = tmp_path / "mesh.yaml"
    config.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\n"
        "data:\n  mesh: |\n    defaultProviders: {tracing: [zipkin]}\n"
        "    extensionProviders:\n    - name: zipkin\n"
        f"      zipkin: {{service: {service}, port: {port}}}\n{extra}"
    )
    loaded, push = push_from_paths([MESH, config])
    assert not loaded.errors
    out = []
    for listener in config_for(push, HTTPBIN).listeners:
        for chain in listener.filter_chains:
            for item in chain.filters:
                if item.name == Filters.HCM:
                    hcm = hcm_pb2.HttpConnectionManager()
                    item.typed_config.Unpack(hcm)
                    out.append(hcm.tracing.HasField("provider"))
    return out


@pytest.mark.parametrize(
    ("service", "port", "extra", "traced"),
    [
        ("foo/httpbin.foo.svc.cluster.local", 8000, "", True),
        ("jwks.example.com", 8443, "", True),
        ("zipkin.elsewhere.example.com", 9411, "", False),  # no such service
        ("httpbin.foo.svc.cluster.local", 9411, "", False),  # no such port
        ("jwks.example.com", 8443, SCOPED, False),  # not in the sidecar's scope
    ],
)
def test_a_tracing_provider_needs_its_collector_in_the_proxys_view(
    service: str, port: int, extra: str, traced: bool, tmp_path: Path
) -> None:
    """Istio's LookupCluster, plus the proxy's scope: without the collector's cluster the
    HCMs get no tracer (Envoy would reject the listeners of one naming a missing cluster)."""
    hcms = _traced_hcms(service, port, tmp_path, extra)
    assert hcms and set(hcms) == {traced}


def test_enable_tracing_alone_reports_to_istios_default_zipkin(tmp_path: Path) -> None:
    """No Telemetry, no defaultConfig.tracing: Istio's default tracer, zipkin at
    zipkin.istio-system:9411, here a mesh Service."""
    config = tmp_path / "mesh.yaml"
    config.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\n"
        "data:\n  mesh: |\n    enableTracing: true\n"
    )
    collectors = CASES_DIR.parent / "inputs" / "telemetry-collectors.yaml"
    loaded, push = push_from_paths([MESH, collectors, config])
    assert not loaded.errors
    tracers = set()
    for listener in config_for(push, HTTPBIN).listeners:
        for chain in listener.filter_chains:
            for item in chain.filters:
                if item.name == Filters.HCM:
                    hcm = hcm_pb2.HttpConnectionManager()
                    item.typed_config.Unpack(hcm)
                    zipkin = zipkin_pb2.ZipkinConfig()
                    hcm.tracing.provider.typed_config.Unpack(zipkin)
                    tracers.add((hcm.tracing.random_sampling.value, zipkin.collector_cluster))
    assert tracers == {(1.0, "outbound|9411||zipkin.istio-system.svc.cluster.local")}

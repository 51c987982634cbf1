"""Fields meshpilot parses and ignores are never dropped silently: `analyze` and `discovery`
warn "not supported yet", naming file, line, object and field."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from meshpilot.analysis.unsupported_fields import UNSUPPORTED_FIELDS
from meshpilot.cli.main import cli
from tests.conftest import REPO

BOOKINFO = str(REPO / "examples" / "bookinfo")
MESH = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |
    accessLogFile: /dev/stdout
    enableTracing: true
    enablePrometheusMerge: true
    defaultConfig:
      holdApplicationUntilProxyStarts: true
      tracing:
        sampling: 100
      gatewayTopology: {numTrustedProxies: 1}
---
apiVersion: v1
kind: Service
metadata: {name: legacy, namespace: default}
spec:
  selector: {app: legacy}
  publishNotReadyAddresses: true
  ports: [{name: http, port: 80}]
"""
NOT_SUPPORTED = "not supported yet: meshpilot parses this field and ignores it"
EXPECTED = [
    "{f}:12: warning: ConfigMap istio-system/istio: "
    "data.mesh.defaultConfig.holdApplicationUntilProxyStarts: ",
    "{f}:22: warning: Service default/legacy: spec.publishNotReadyAddresses: ",
]
ANALYZED = [  # the same, as `analyze` prints them
    "Warning [MP0003] (ConfigMap istio-system/istio {f}:12) "
    "data.mesh.defaultConfig.holdApplicationUntilProxyStarts: ",
    "Warning [MP0003] (Service default/legacy {f}:22) spec.publishNotReadyAddresses: ",
]


def expected(path: Path) -> list[str]:
    return [line.format(f=path) + NOT_SUPPORTED for line in EXPECTED]


def analyzed(path: Path) -> list[str]:
    return [line.format(f=path) + NOT_SUPPORTED for line in ANALYZED]


def findings(stdout: str) -> list[str]:
    """The lines of analyze's log output, without bookinfo's own IST0129 warning."""
    return [line for line in stdout.splitlines() if "[IST0129]" not in line]


def test_analyze_warns_once_per_unsupported_field(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(MESH)
    result = CliRunner().invoke(cli, ["analyze", "-f", BOOKINFO, "-f", str(path)])
    assert result.exit_code == 0, result.output  # warnings only
    # enablePrometheusMerge: true is the default (nothing lost); gatewayTopology is read;
    # accessLogFile, enableTracing and defaultConfig.tracing are applied (telemetry).
    assert findings(result.stdout) == analyzed(path)
    assert ": 0 errors, 3 warnings, 0 info\n" in result.stderr


def test_discovery_logs_the_same_warnings(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(MESH)
    log = tmp_path / "discovery.log"
    args = ["-f", BOOKINFO, "-f", str(path), "--no-ca", "--xds-port", "0", "--monitoring-port", "0"]
    code = "import sys; from meshpilot.cli.main import main; sys.argv[0] = 'meshpilot'; main()"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "discovery", *args], stderr=out, stdout=out
        )
    try:
        deadline = time.monotonic() + 60
        while "discovery: xDS on" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = [
        line.split("meshpilot.discovery.unsupported: ", 1)[-1]
        for line in log.read_text().splitlines()
    ]
    for warning in expected(path):
        assert lines.count(warning) == 1, log.read_text()


def test_every_table_row_names_a_field_of_its_model() -> None:
    for model, name in UNSUPPORTED_FIELDS:
        assert name in model.model_fields, (model.__name__, name)


def test_mesh_in_the_live_store_points_at_its_mesh_key(tmp_path: Path) -> None:
    """The store writes data.mesh as a quoted string: the warnings name the `mesh:` line."""
    path, store = tmp_path / "mesh.yaml", str(tmp_path / "store")
    path.write_text(MESH)
    assert CliRunner().invoke(cli, ["apply", "-f", str(path), "--store", store]).exit_code == 0
    result = CliRunner().invoke(cli, ["analyze", "--store", store])
    assert result.exit_code == 0, result.output
    stored = tmp_path / "store" / "ConfigMap" / "istio-system" / "istio.yaml"
    mesh_line = next(
        number
        for number, line in enumerate(stored.read_text().splitlines(), start=1)
        if line.startswith("  mesh:")
    )
    assert (
        f"Warning [MP0003] (ConfigMap istio-system/istio {stored}:{mesh_line}) "
        f"data.mesh.defaultConfig.holdApplicationUntilProxyStarts: {NOT_SUPPORTED}"
    ) in result.stdout.splitlines()

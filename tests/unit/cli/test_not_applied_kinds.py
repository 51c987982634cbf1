"""Kinds meshpilot validates but does not apply yet (ProxyConfig, WorkloadGroup)
are never dropped silently: `analyze` and `discovery` warn about each object, and an invalid
one is rejected naming its field. EnvoyFilter, Telemetry and WasmPlugin are applied: no
such warning (a WasmPlugin's remote module gets its own, tests/unit/wasm)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from meshpilot.cli.main import cli
from tests.conftest import REPO

BOOKINFO = str(REPO / "examples" / "bookinfo")
KINDS = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: lua, namespace: default}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    patch: {operation: INSERT_FIRST, value: {name: envoy.lua}}
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  tracing: [{randomSamplingPercentage: 10}]
---
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: auth, namespace: default}
spec: {url: file:///opt/plugins/auth.wasm}
---
apiVersion: networking.istio.io/v1beta1
kind: ProxyConfig
metadata: {name: per-app, namespace: default}
spec: {concurrency: 2}
---
apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: vm, namespace: default}
spec: {template: {ports: {http: 8080}}}
"""
NOT_APPLIED = "validated, but not applied yet (not supported yet)"
EXPECTED = [  # EnvoyFilter (xds/patch/), Telemetry and WasmPlugin are applied
    "{f}:20: warning: ProxyConfig default/per-app: ",
    "{f}:25: warning: WorkloadGroup default/vm: ",
]
ANALYZED = [  # the same, as `analyze` prints them
    "Warning [MP0010] (ProxyConfig default/per-app {f}:20) ",
    "Warning [MP0010] (WorkloadGroup default/vm {f}:25) ",
]


def expected(path: Path) -> list[str]:
    return [line.format(f=path) + NOT_APPLIED for line in EXPECTED]


def analyzed(path: Path) -> list[str]:
    return [line.format(f=path) + NOT_APPLIED for line in ANALYZED]


def test_analyze_warns_once_per_object_of_a_kind_not_applied_yet(tmp_path: Path) -> None:
    path = tmp_path / "kinds.yaml"
    path.write_text(KINDS)
    result = CliRunner().invoke(cli, ["analyze", "-f", BOOKINFO, "-f", str(path)])
    assert result.exit_code == 0, result.output  # warnings only
    # bookinfo's own IST0129 warning aside
    assert [line for line in result.stdout.splitlines() if "IST0129" not in line] == analyzed(path)
    assert ": 0 errors, 3 warnings, 0 info\n" in result.stderr


def test_analyze_rejects_an_invalid_object_of_these_kinds_naming_the_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(KINDS.replace("operation: INSERT_FIRST", "operation: INSERT_LAST"))
    result = CliRunner().invoke(cli, ["analyze", "-f", str(path)])
    assert result.exit_code == 79, result.output
    assert (
        f"Error [IST0106] (EnvoyFilter default/lua {path}:7) Schema validation error: "
        'spec.configPatches[0].patch.operation: invalid value "INSERT_LAST"; use one of: '
        "MERGE, ADD, REMOVE, INSERT_BEFORE, INSERT_AFTER, INSERT_FIRST, REPLACE"
    ) in result.stdout.splitlines()


def test_an_unknown_kind_of_an_istio_group_fails_analyze(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetri\nmetadata: {name: t}\n---\n"
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\n"
    )
    result = CliRunner().invoke(cli, ["analyze", "-f", str(path)])
    assert result.exit_code == 79, result.output
    assert result.stdout.splitlines() == [
        f"Error [IST0106] (Telemetri t {path}:1) Schema validation error: kind: unknown kind "
        "'Telemetri' in Istio API group 'telemetry.istio.io'",
        f"Warning [MP0002] (StatefulSet web {path}:5) unknown kind 'StatefulSet' ignored",
    ]


def test_discovery_logs_the_same_warnings_and_serves(tmp_path: Path) -> None:
    path = tmp_path / "kinds.yaml"
    path.write_text(KINDS)
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
    assert "discovery: xDS on" in log.read_text(), log.read_text()
    lines = [
        line.split("meshpilot.discovery.unsupported: ", 1)[-1]
        for line in log.read_text().splitlines()
    ]
    for warning in expected(path):
        assert lines.count(warning) == 1, log.read_text()


def test_apply_and_get_by_their_kubectl_names(tmp_path: Path) -> None:
    path, store = tmp_path / "kinds.yaml", str(tmp_path / "store")
    path.write_text(KINDS)
    applied = CliRunner().invoke(cli, ["apply", "-f", str(path), "--store", store])
    assert applied.exit_code == 0, applied.output
    for resource, name in (
        ("envoyfilters", "lua"),
        ("telemetries", "mesh-default"),
        ("wasmplugins", "auth"),
        ("proxyconfigs", "per-app"),
        ("wg", "vm"),
    ):
        result = CliRunner().invoke(cli, ["get", resource, "-A", "--store", store])
        assert result.exit_code == 0, result.output
        assert name in result.stdout.split(), (resource, result.stdout)

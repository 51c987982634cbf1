"""The control plane's default trace sampling (Istio's PILOT_TRACE_SAMPLING, which an
installation sets from values.pilot.traceSampling): `meshpilot discovery --trace-sampling` or
the environment variable sets the percent of requests traced where neither Telemetry nor the
mesh's defaultConfig.tracing.sampling says; a bad value is refused in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.ads_harness import DiscoveryProcess
from tests.unit.golden.cases import CASES_DIR

MESH = CASES_DIR.parent / "inputs" / "authz-mesh.yaml"
COLLECTORS = CASES_DIR.parent / "inputs" / "telemetry-collectors.yaml"
HTTPBIN = "httpbin-v1-5f6b8d7c9-abcde.foo"
TRACING = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\n"
    "data:\n  mesh: |\n    enableTracing: true\n"
)


def _samplings(dump: Any) -> set[float]:
    found: set[float] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            tracing = node.get("tracing")
            if isinstance(tracing, dict) and "random_sampling" in tracing:
                found.add(float(tracing["random_sampling"].get("value", 0.0)))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dump)
    return found


CASES = [
    ((), {}, 1.0),
    (("--trace-sampling", "10"), {}, 10.0),
    ((), {"PILOT_TRACE_SAMPLING": "25"}, 25.0),
]


@pytest.mark.parametrize(("args", "env", "want"), CASES)
def test_the_default_sampling_reaches_every_tracer(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], want: float
) -> None:
    mesh = tmp_path / "tracing.yaml"
    mesh.write_text(TRACING)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    discovery = DiscoveryProcess([MESH, COLLECTORS, mesh], tmp_path, extra_args=args)
    try:
        discovery.start()
        dump = discovery.json(f"/debug/config_dump?proxyID={HTTPBIN}")
        assert _samplings(dump) == {want}
    finally:
        discovery.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_a_bad_sampling_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from meshpilot.cli.main import main; main()", "discovery",
         "-f", str(MESH), "--xds-port", "0", "--monitoring-port", "0"],
        env={**os.environ, "PILOT_TRACE_SAMPLING": "lots"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "PILOT_TRACE_SAMPLING='lots': give a percent from 0 to 100" in done.stderr
    assert "Traceback" not in done.stderr

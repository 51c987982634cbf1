"""`meshpilot x precheck`: istioctl's success line on a machine that can run the mesh, and
each problem with its fix (exit 1) when it cannot."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.install.precheck import check_envoy, check_ports


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_busy_port_and_broken_envoy_are_named_with_their_fix() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        [problem] = check_ports([port, _free_port()])
    assert f"port 127.0.0.1:{port} is in use" in problem.message
    assert "stop what listens there" in problem.fix
    [broken] = check_envoy(lambda: Path("/bin/false"))
    assert broken.message.startswith("Envoy at /bin/false does not run")


@pytest.mark.skipif(os.geteuid() != 0, reason="the mesh's pods need root")
def test_precheck_success_line_then_skew_problem(tmp_path: Path) -> None:
    store, port = str(tmp_path / "store"), str(_free_port())
    ok = CliRunner().invoke(cli, ["x", "precheck", "--store", store, "--port", port])
    assert ok.exit_code == 0, ok.output
    assert ok.output.splitlines()[0] == (
        "\u2714 No issues found when checking the cluster. Istio is safe to install or upgrade!"
    )
    iop = tmp_path / "iop.yaml"
    iop.write_text("apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\n"
                   "spec: {profile: minimal, tag: 1.14.3}\n")  # fmt: skip
    installed = CliRunner().invoke(
        cli, ["install", "-f", str(iop), "-r", "old", "-y", "--no-operator", "--store", store]
    )
    assert installed.exit_code == 0, installed.output
    bad = CliRunner().invoke(cli, ["x", "precheck", "--store", store, "--port", port])
    assert bad.exit_code == 1
    assert "\u2718 revision old runs Istio 1.14.3; this client installs 1.28.0" in bad.output
    assert "fix: upgrade in steps of at most two minor versions" in bad.output
    assert "1 issue(s) found" in bad.output

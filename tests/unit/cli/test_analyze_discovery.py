"""`meshpilot analyze --discovery ADDR`: what a running control plane serves is analyzed with
the line of every field (read from its /debug/objectz page), files go on top of it, and
Secret values never leave the control plane."""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.request
from pathlib import Path

from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from tests.conftest import REPO

TYPO_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ratings-typo
  namespace: default
spec:
  hosts: [ratings.example]
  http:
  - route:
    - destination: {host: ratingz}
"""
FINDING = 'Referenced host not found: "ratingz"'


def _analyze(*args: str) -> Result:
    result = CliRunner().invoke(cli, ["analyze", *args], prog_name="meshpilot")
    assert "Traceback" not in result.output
    return result


def test_analyze_what_a_running_control_plane_serves(tmp_path: Path) -> None:
    mesh = tmp_path / "mesh"
    shutil.copytree(REPO / "examples" / "bookinfo", mesh)
    typo = mesh / "typo.yaml"
    typo.write_text(TYPO_VS)
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(TYPO_VS.replace("ratingz", "ratings"))

    async def scenario() -> None:
        settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0))
        discovery = Discovery([mesh], settings)
        await discovery.start()
        address = f"127.0.0.1:{discovery.monitoring_port}"
        try:
            live = await asyncio.to_thread(_analyze, "--discovery", address)
            assert live.exit_code == 79, live.output
            # the field's own line (10), not the document's (1): positions come along
            assert f"Error [IST0101] (VirtualService default/ratings-typo {typo}:10) {FINDING}" in (
                live.stdout.splitlines()
            )
            assert f"when analyzing control plane http://{address}." in live.stderr
            rows = json.loads(
                (await asyncio.to_thread(_analyze, "--discovery", address, "-o", "json")).stdout
            )
            [row] = [r for r in rows if r["code"] == "IST0101"]
            assert row["field"] == "spec.http[0].route[0].destination.host"
            # a file on top replaces the served object, as istioctl applies files over a cluster
            overlay = await asyncio.to_thread(
                _analyze, "--discovery", address, "-f", str(fixed), "--output-threshold", "Error"
            )
            assert (overlay.exit_code, overlay.stdout) == (0, "")
            assert overlay.stderr.endswith(
                f"No validation issues found when analyzing control plane http://{address} "
                f"and files {fixed}.\n"
            )
            page = await asyncio.to_thread(_page, discovery.monitoring_port)
            secrets = [o for o in page["objects"] if o["kind"] == "Secret"]
            assert secrets and all(
                set(s["object"]["data"].values()) == {"[redacted]"} for s in secrets
            )
        finally:
            await discovery.stop(0)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def _page(port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/objectz", timeout=10) as reply:
        data: dict[str, object] = json.loads(reply.read())
    return data


def test_an_unreachable_control_plane_is_one_clear_line(tmp_path: Path) -> None:
    result = _analyze("--discovery", "127.0.0.1:9", "--timeout", "2")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cannot reach the control plane at http://127.0.0.1:9")
    both = _analyze("--discovery", "127.0.0.1:9", "--store", str(tmp_path))
    assert both.exit_code == 64

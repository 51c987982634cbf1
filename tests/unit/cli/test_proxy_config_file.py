"""`proxy-config --file DUMP.json` for every table, with no control plane or Envoy running, and
`proxy-status` when no proxy is connected. (tests/e2e/test_proxy_info.py compares --file on a
real Envoy's saved dump with --admin on that Envoy.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from tests.unit.proxyinfo.dumps import SIDECAR, cluster_statuses, envoy_dump, proxy_ref
from tests.unit.proxyinfo.pages import serving

PROXY = proxy_ref(SIDECAR)
REVIEWS = "reviews.default.svc.cluster.local"


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), prog_name="meshpilot")
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(envoy_dump(SIDECAR).raw))
    return path


@pytest.fixture
def dump_without_eds(tmp_path: Path) -> Path:
    raw = envoy_dump(SIDECAR).raw
    raw["configs"] = [c for c in raw["configs"] if not c["@type"].endswith("EndpointsConfigDump")]
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("listeners", "Route: 9080"),
        ("routes", f"{REVIEWS}:9080"),
        ("clusters", REVIEWS),
        ("endpoints", f"outbound|9080|v1|{REVIEWS}"),
        ("secret", "No active or warming secrets found."),  # istioctl's line: no SDS in it
        ("all", "ENDPOINT"),
    ],
)
def test_every_table_reads_the_file(dump: Path, table: str, expected: str) -> None:
    result = invoke("proxy-config", table, "--file", str(dump))
    assert result.exit_code == 0, result.output
    node = f"sidecar~127.0.0.1~{PROXY}~default.svc.cluster.local"
    assert result.stdout.startswith(f"Source: file {dump} (node {node})\n")
    assert expected in result.stdout
    named = invoke("proxy-config", table, "ghost.default", "-f", str(dump))
    assert named.exit_code == 0
    assert f"warning: {dump} is the config of node {node}, not ghost.default" in named.stderr
    raw = invoke("proxy-config", table, "-f", str(dump), "-o", "json")
    assert raw.exit_code == 0 and json.loads(raw.stdout)


def test_endpoints_need_include_eds_or_the_clusters_output(
    dump_without_eds: Path, tmp_path: Path
) -> None:
    result = invoke("proxy-config", "endpoints", "--file", str(dump_without_eds))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {dump_without_eds} has no endpoints: Envoy's /config_dump lists them only "
        "when asked with ?include_eds (curl 'localhost:15000/config_dump?include_eds'); "
        "or give Envoy's /clusters?format=json output\n"
    )
    everything = invoke("proxy-config", "all", "--file", str(dump_without_eds))
    assert everything.exit_code == 0 and "warning: " in everything.stderr
    clusters = tmp_path / "clusters.json"
    clusters.write_text(json.dumps({"cluster_statuses": cluster_statuses()}))
    health = invoke("proxy-config", "ep", "-f", str(clusters))
    assert health.exit_code == 0, health.output
    assert "10.10.0.14:9080                  HEALTHY       FAILED" in health.stdout
    wrong = invoke("proxy-config", "clusters", "-f", str(clusters))
    assert wrong.exit_code == 1 and "has only endpoints" in wrong.stderr


def test_bad_files_are_one_line_errors(tmp_path: Path, dump: Path) -> None:
    missing = invoke("proxy-config", "clusters", "-f", str(tmp_path / "nope.json"))
    assert missing.stderr == f"Error: --file {tmp_path / 'nope.json'}: no such file\n"
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert invoke("proxy-config", "clusters", "-f", str(text)).stderr.startswith(
        f"Error: --file {text}: not JSON"
    )
    text.write_text("[]")
    assert invoke("proxy-config", "clusters", "-f", str(text)).stderr == (
        f"Error: {text} is not an Envoy config dump (no 'configs' list)\n"
    )
    both = invoke("proxy-config", "clusters", "-f", str(dump), "--admin", "http://127.0.0.1:1")
    assert both.exit_code == 2 and "give one" in both.stderr


def test_proxy_status_says_when_no_proxy_is_connected() -> None:
    with serving({"/debug/syncz": (200, [])}) as url:
        result = invoke("proxy-status", "--discovery", url)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == f"no proxies are connected to the control plane at {url}\n"

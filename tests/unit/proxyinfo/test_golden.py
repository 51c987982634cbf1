"""`proxy-config ... -f DUMP` against istioctl's tables for the same saved dump: the expected
files in golden/ are written from istioctl's writers (column names, order, sorting, how
addresses, localities, statuses and serial numbers print), compared byte for byte.

The dump (golden/config_dump.json, taken with ?include_eds) has EDS endpoints with
localities, a pipe and an internal (`envoy://`) address, ECDS filters, and secrets: a chain,
the ROOTCA trust bundle, an expired one, an uninitialized one and a warming one. Serial
numbers print as istioctl's `%x` does: leading zero digits dropped (0x0193a5... -> 193a5...).
golden/clusters.json is Envoy's /clusters?format=json for the live endpoints table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.proxy_config import proxy_config

GOLDEN = Path(__file__).parent / "golden"
DUMP = str(GOLDEN / "config_dump.json")


def _table(*args: str) -> str:
    """stdout without meshpilot's first line, which names the source (istioctl has none)."""
    result = CliRunner().invoke(proxy_config, list(args))
    assert result.exit_code == 0, result.output
    source, table = result.stdout.split("\n", 1)
    assert source.startswith("Source: file ")
    return table


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("endpoints", "-f", DUMP), "endpoints_eds.txt"),
        (("ep", "-f", str(GOLDEN / "clusters.json")), "endpoints_clusters.txt"),
        (("secret", "-f", DUMP), "secret.txt"),
        (("ecds", "-f", DUMP), "ecds.txt"),
    ],
)
def test_table_equals_istioctls(args: tuple[str, ...], expected: str) -> None:
    assert _table(*args) == (GOLDEN / expected).read_text()


def test_ecds_without_extension_configs_is_an_empty_table(tmp_path: Path) -> None:
    dump = json.loads(Path(DUMP).read_text())
    dump["configs"] = [c for c in dump["configs"] if not c["@type"].endswith("EcdsConfigDump")]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    assert _table("ecds", "-f", str(path)) == (GOLDEN / "ecds_empty.txt").read_text()


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_ecds_raw_output_is_the_ecds_section(output: str) -> None:
    result = CliRunner().invoke(proxy_config, ["ecds", "-f", DUMP, "-o", output])
    assert result.exit_code == 0, result.output
    assert "default.display-metadata" in result.stdout
    assert "Source:" not in result.stdout


def test_wide_secret_table_adds_identity_and_chain() -> None:
    header = _table("secret", "-f", DUMP, "--wide").splitlines()[0]
    assert header.split()[-2:] == ["IDENTITY", "CHAIN"]


def test_endpoint_filter_reads_internal_addresses() -> None:
    table = _table("ep", "-f", str(GOLDEN / "clusters.json"), "--status", "HEALTHY", "--port", "0")
    assert "envoy://connect_originate/10.10.0.20:80" in table
    assert "unix://./etc/istio/proxy/XDS" in table


def test_a_dump_without_secrets_prints_istioctls_line(tmp_path: Path) -> None:
    dump = json.loads(Path(DUMP).read_text())
    dump["configs"] = [c for c in dump["configs"] if not c["@type"].endswith("SecretsConfigDump")]
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    assert _table("secret", "-f", str(path)) == "No active or warming secrets found.\n"


def test_raw_endpoints_of_a_dump_keep_only_the_matching_ones() -> None:
    """istioctl's `-o json` for a config dump: the assignments, cut to the matches."""
    result = CliRunner().invoke(
        proxy_config, ["ep", "-f", DUMP, "--status", "UNHEALTHY", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    [assignment] = json.loads(result.stdout)
    assert assignment["cluster_name"] == "outbound|9080||reviews.default.svc.cluster.local"
    kept = [e for group in assignment["endpoints"] for e in group["lb_endpoints"]]
    assert [e["endpoint"]["address"]["socket_address"]["address"] for e in kept] == ["10.10.0.12"]

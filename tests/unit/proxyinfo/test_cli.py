"""`meshpilot proxy-status` and `meshpilot proxy-config` wiring: options, aliases, the source
header, raw output, and one-line errors (pages served by a loopback stub; the real control
plane and Envoy are in tests/e2e/test_proxy_info.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner, Result

from meshpilot.cli.proxy_config import proxy_config
from meshpilot.cli.proxy_status import proxy_status
from meshpilot.runtime.ports import free_port
from tests.unit.proxyinfo.dumps import (
    SIDECAR,
    b64,
    cluster_statuses,
    control_plane_dump,
    envoy_dump,
    proxy_ref,
)
from tests.unit.proxyinfo.pages import Pages, serving

PROXY = proxy_ref(SIDECAR)
KEY = b"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMG\n-----END PRIVATE KEY-----\n"


def _admin_pages() -> Pages:
    dump = envoy_dump(SIDECAR).raw
    secrets = next(c for c in dump["configs"] if c["@type"].endswith("SecretsConfigDump"))
    tls = {"private_key": {"inline_bytes": b64(KEY)}}  # an Envoy that did not redact
    secrets["dynamic_active_secrets"] = [{"name": "default", "secret": {"tls_certificate": tls}}]
    clusters = {"cluster_statuses": cluster_statuses()}
    return {"/config_dump?include_eds": (200, dump), "/clusters?format=json": (200, clusters)}


def _control_plane_pages() -> Pages:
    target = f"/debug/config_dump?proxyID={PROXY}"
    cds = {"status": "SYNCED", "nonce_sent": "a", "nonce_acked": "a"}
    entry = {"proxy": PROXY, "connection_id": f"{PROXY}-1", "istio_version": "1.28.0"}
    syncz = [{**entry, "types": {"cds": cds}}]
    return {target: (200, control_plane_dump(SIDECAR).raw), "/debug/syncz": (200, syncz)}


def _invoke(command: object, *args: str) -> Result:
    result = CliRunner().invoke(command, list(args))  # type: ignore[arg-type]
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)
    return result


@pytest.mark.parametrize("alias", ["clusters", "cluster", "c"])
def test_admin_source_header_then_table(alias: str) -> None:
    with serving(_admin_pages()) as url:
        result = _invoke(proxy_config, alias, PROXY, "--admin", url.removeprefix("http://"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == f"Source: Envoy admin {url} (node sidecar~127.0.0.1~{PROXY}~default.svc.cluster.local)"
    )
    assert lines[1].split()[:3] == ["SERVICE", "FQDN", "PORT"]


def test_admin_source_warns_when_the_envoy_is_another_proxy() -> None:
    with serving(_admin_pages()) as url:
        result = _invoke(proxy_config, "l", "other.default", "--admin", url)
    assert result.exit_code == 0
    assert result.stderr.startswith(f"warning: the Envoy at {url} is node sidecar~")


def test_endpoints_read_envoys_health() -> None:
    with serving(_admin_pages()) as url:
        result = _invoke(proxy_config, "ep", "--admin", url, "--status", "UNHEALTHY")
    assert result.stdout.splitlines()[2].split() == [
        "10.10.0.12:9080", "UNHEALTHY", "OK", "outbound|9080||reviews.default.svc.cluster.local",
    ]  # fmt: skip


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_raw_output_keeps_the_header_on_stderr_and_never_prints_keys(output: str) -> None:
    with serving(_admin_pages()) as url:
        for kind in ("secret", "all"):
            result = _invoke(proxy_config, kind, PROXY, "--admin", url, "-o", output)
            assert result.exit_code == 0 and result.stderr.startswith("Source: Envoy admin")
            assert b64(KEY) not in result.stdout and "PRIVATE KEY" not in result.stdout
            assert "[redacted]" in result.stdout


def test_control_plane_source_with_filters() -> None:
    with serving(_control_plane_pages()) as url:
        result = _invoke(
            proxy_config, "routes", PROXY, "--discovery", url, "--name", "80", "--no-verbose"
        )
        raw = _invoke(
            proxy_config, "clusters", PROXY, "--discovery", url, "--fqdn", "reviews", "-o", "json"
        )
    assert result.stdout.splitlines() == [
        f"Source: control plane {url}/debug/config_dump?proxyID={PROXY} "
        f"(config generated for {PROXY}; --admin URL reads the Envoy itself)",
        "NAME     VIRTUAL HOSTS",
        "80       6",
    ]
    assert [c["name"].split("|")[2] for c in json.loads(raw.stdout)] == ["", "v1", "v2", "v3"]


def test_proxy_needs_a_name_or_an_admin() -> None:
    result = _invoke(proxy_config, "clusters")
    assert (
        result.exit_code == 2
        and "name the proxy as POD.NAMESPACE, or give --admin URL" in result.stderr
    )


def test_proxy_status_table_and_json() -> None:
    with serving(_control_plane_pages()) as url:
        table = _invoke(proxy_status, "--discovery", url)
        raw = _invoke(proxy_status, "--discovery", url, "-o", "yaml", PROXY)
    control_plane = url.removeprefix("http://")
    cells = table.stdout.split("\n")[1].split("     ")
    assert [c.strip() for c in cells if c.strip()] == [
        PROXY, "Kubernetes", "SYNCED", "NOT SENT", "NOT SENT", "NOT SENT", "NOT SENT",
        control_plane, "1.28.0",
    ]  # fmt: skip
    assert raw.stdout.startswith(f"- proxy: {PROXY}\n")


@pytest.mark.parametrize(
    ("module", "args", "server"),
    [
        ("proxy_status", ["--discovery", "URL"], "the control plane"),
        ("proxy_config", ["clusters", "a.b", "--admin", "URL"], "Envoy admin"),
        ("proxy_config", ["listeners", "a.b", "--discovery", "URL"], "the control plane"),
    ],
)  # fmt: skip
def test_unreachable_servers_are_one_line_errors(module: str, args: list[str], server: str) -> None:
    """Run as a user runs it: a process, no traceback, exit status 1."""
    url = f"http://127.0.0.1:{free_port()}"
    name = module.replace("_", "-")
    code = f"from meshpilot.cli.{module} import {module}; {module}(prog_name='meshpilot {name}')"
    args = [url if a == "URL" else a for a in args]
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"Error: cannot reach {server} at {url}: Connection refused\n"

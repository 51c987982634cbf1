"""Capture rules applied with the real iptables in pod namespaces, and proved on real traffic.

Pod `app` has the article's capture rules (plus port 9090 excluded inbound), its app on
8080 and 9090, and, standing in for Envoy's virtualOutbound/virtualInbound listeners, a
listener on 15001 and 15006 that reports each connection's original destination. Pod `peer`
has no capture and its own app on 8080.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from click.testing import CliRunner
from tests.e2e.netns_probe import connect, host_support_or_fail, running_cluster, start_listener
from tests.unit.capture.cases import CaptureCase, check_golden, load_cases

from meshpilot.capture.apply import IptablesTarget, nat_table, saved_tables
from meshpilot.capture.flags import CaptureFlags, config_from_flags
from meshpilot.capture.rules import Family
from meshpilot.cli.iptables import iptables
from meshpilot.runtime.commands import in_netns
from meshpilot.runtime.pod import PROXY_USER, Pod, PodSpec, RunAs

CASES = load_cases()
APP_USER = RunAs(1000, 1000)  # an ordinary user: its traffic is captured


@pytest.fixture(scope="module", autouse=True)
def _host_support() -> None:
    host_support_or_fail()


@dataclass(frozen=True)
class Pods:
    app: Pod
    peer: Pod


@pytest.fixture(scope="module")
def pods() -> Iterator[Pods]:
    capture = config_from_flags(
        CaptureFlags(
            istio_inbound_interception_mode="REDIRECT",
            istio_service_cidr="*",
            istio_inbound_ports="*",
            istio_local_exclude_ports="15090,15020,15021,9090",
        )
    )
    with running_cluster() as cluster:
        app = cluster.add_pod(PodSpec(name="app", capture=capture))
        peer = cluster.add_pod(PodSpec(name="peer"))
        start_listener(app, "app", 8080, 9090, run_as=APP_USER)
        start_listener(app, "envoy", 15001, 15006, run_as=PROXY_USER)
        start_listener(peer, "peer", 8080)
        yield Pods(app, peer)


def _uncommented(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


def save_text(netns: str) -> str:
    """`iptables-save -t nat` without its timestamped comment lines, then every other table
    of either family that holds rules, then the policy routing TPROXY added."""
    target = IptablesTarget(netns)
    parts = [_uncommented(nat_table(target))]
    for family in Family:
        for table in ("mangle", "nat", "raw"):
            if (family, table) == (Family.V4, "nat"):
                continue
            text = _uncommented(saved_tables(target, family, table))
            if "\n-A " in text:
                parts.append(f"# {family} {table}\n{text}")
    for version in ("-4", "-6"):
        rules = _ip(netns, version, "rule", "show")
        if "fwmark" in rules:
            routes = _ip(
                netns, version, "route", "show", "table", "all", "type", "local", "dev", "lo"
            )
            tables = [r for r in routes.splitlines() if " table " in r and "local" in r.split()[0]]
            parts.append(
                f"# ip {version} rule\n{rules}# ip {version} route\n"
                + "".join(line + "\n" for line in tables if "table local" not in line)
            )
    return "".join(parts)


def _ip(netns: str, *args: str) -> str:
    argv = in_netns(netns, ["ip", *args])
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_outbound_from_the_app_lands_on_15001(pods: Pods) -> None:
    answer = connect(pods.app, pods.peer.ip, 8080, run_as=APP_USER)
    assert answer == f"envoy:15001 orig={pods.peer.ip}:8080"


def test_outbound_from_root_is_captured_too(pods: Pods) -> None:
    assert connect(pods.app, pods.peer.ip, 8080).startswith("envoy:15001 ")


def test_outbound_from_the_proxy_uid_reaches_the_destination(pods: Pods) -> None:
    answer = connect(pods.app, pods.peer.ip, 8080, run_as=PROXY_USER)
    assert answer.startswith("peer:8080 ")


def test_outbound_from_the_proxy_gid_alone_bypasses_capture(pods: Pods) -> None:
    answer = connect(pods.app, pods.peer.ip, 8080, run_as=RunAs(1000, 1337))
    assert answer.startswith("peer:8080 ")


def test_inbound_from_another_pod_lands_on_15006(pods: Pods) -> None:
    answer = connect(pods.peer, pods.app.ip, 8080)
    assert answer == f"envoy:15006 orig={pods.app.ip}:8080"


def test_inbound_to_an_excluded_port_reaches_the_app(pods: Pods) -> None:
    assert connect(pods.peer, pods.app.ip, 9090).startswith("app:9090 ")


def test_proxy_calling_its_own_pod_goes_through_inbound(pods: Pods) -> None:
    """Envoy (UID 1337) calling its own pod IP over lo: ISTIO_IN_REDIRECT, i.e. 15006."""
    answer = connect(pods.app, pods.app.ip, 8080, run_as=PROXY_USER)
    assert answer == f"envoy:15006 orig={pods.app.ip}:8080"


def test_traffic_from_127_0_0_6_is_not_captured(pods: Pods) -> None:
    """Envoy's inbound passthrough cluster binds 127.0.0.6 (spec §2.3): let through."""
    answer = connect(pods.app, pods.app.ip, 8080, run_as=PROXY_USER, source="127.0.0.6")
    assert answer.startswith("app:8080 ")


def test_the_app_calling_itself_is_not_captured(pods: Pods) -> None:
    assert connect(pods.app, pods.app.ip, 8080, run_as=APP_USER).startswith("app:8080 ")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_applied_rules_match_golden_and_reapply_and_clean(case: CaptureCase) -> None:
    with running_cluster() as cluster:
        pod = cluster.add_pod(PodSpec(name="rules"))
        runner = CliRunner()
        # The second run replaces the first (same table); by name, then by path.
        for where in (["--netns", pod.netns], ["--network-namespace", f"/run/netns/{pod.netns}"]):
            result = runner.invoke(iptables, [*case.args, *where])
            assert result.exit_code == 0, result.output + repr(result.exception)
            check_golden(case.expected("save"), save_text(pod.netns))
        result = runner.invoke(iptables, [*case.args, "--netns", pod.netns, "--clean"])
        assert result.exit_code == 0, result.output + repr(result.exception)
        cleaned = save_text(pod.netns)
        assert "ISTIO" not in cleaned and "-A " not in cleaned and "ip " not in cleaned, cleaned


def test_cli_applies_in_the_current_namespace() -> None:
    """`meshpilot iptables` as istio-init runs it: inside the pod's namespace."""
    case = CASES[[c.name for c in CASES].index("article")]
    program = "from meshpilot.cli.iptables import iptables; iptables()"
    with running_cluster() as cluster:
        pod = cluster.add_pod(PodSpec(name="init"))
        argv = pod.command([sys.executable, "-c", program, *case.args])
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        check_golden(case.expected("save"), save_text(pod.netns))

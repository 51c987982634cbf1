"""Two `meshpilot operator --store etcd://...` on one etcd (two machines: two CA dirs): one
leads and runs the revision's control plane, which writes the webhook configuration with its
url; the other stands by and runs nothing. The leader is killed -> its control plane dies
with it and the standby starts its own within the lease's TTL, and points the webhook at
it. That leader is paused past its TTL -> a third takes over; thawed, the deposed leader
stops its control plane and exits non-zero."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.security.control_plane_record import ControlPlaneRecord, live_records
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore

pytestmark = pytest.mark.envoy

TTL = 2
IOP = """apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
metadata: {name: x, namespace: istio-system}
spec: {profile: minimal, revision: x}
"""
MWC = ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", "istio-sidecar-injector-x")


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Operators:
    def __init__(self, tmp_path: Path, etcd: EtcdServer) -> None:
        self.tmp_path, self.etcd = tmp_path, etcd
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, name: str) -> tuple[subprocess.Popen[bytes], Path, Path]:
        ca, log = self.tmp_path / f"ca-{name}", self.tmp_path / f"operator-{name}.log"
        argv = [sys.executable, "-c", "from meshpilot.cli.main import main; main()",
                "operator", "--store", self.etcd.url(), "--ca-dir", str(ca),
                "--lease-ttl", str(TTL), "--interval", "0.2"]  # fmt: skip
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc, ca, log

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for ca in self.tmp_path.glob("ca-*"):
            for record in live_records(ca):
                os.kill(record.pid, signal.SIGKILL)


@pytest.fixture
def operators(tmp_path: Path, etcd: EtcdServer) -> Iterator[Operators]:
    running = Operators(tmp_path, etcd)
    yield running
    running.stop()


def _store(etcd: EtcdServer) -> EtcdStore:
    store = EtcdStore(parse_etcd_url(etcd.url()))
    store.load()
    return store


def _webhook_url(etcd: EtcdServer) -> str:
    manifest = _store(etcd).manifest(MWC) or {}
    return str((manifest.get("webhooks") or [{}])[0].get("clientConfig", {}).get("url", ""))


def _control_plane(ca: Path) -> ControlPlaneRecord | None:
    found = [r for r in live_records(ca) if r.revision == "x"]
    return found[0] if found else None


def test_one_operator_runs_the_control_plane_a_standby_takes_over_a_deposed_one_exits(
    etcd: EtcdServer, operators: Operators
) -> None:
    _store(etcd).apply([RawDocument("iop.yaml", 1, yaml.safe_load(IOP), {})])
    a, ca_a, _log_a = operators.start("a")
    first = wait_for(lambda: _control_plane(ca_a), "a's control plane")
    b, ca_b, log_b = operators.start("b")
    wait_for(lambda: "operator: standing by; " in log_b.read_text(), "b standing by")
    assert f"(CA dir {ca_a}) leads (term " in log_b.read_text()
    wait_for(lambda: f":{first.webhook_port}/inject" in _webhook_url(etcd), "a's webhook url")
    time.sleep(1.0)  # several reconcile passes of b: still no control plane there
    assert _control_plane(ca_b) is None and not (ca_b / "control-planes").exists()
    assert len(live_records(ca_a)) == 1

    # the leader dies: its control plane with it; the standby leads within the TTL
    killed = time.monotonic()
    a.kill()
    a.wait()
    wait_for(lambda: "leads; it runs the control planes" in log_b.read_text(), "b leads", 10)
    assert time.monotonic() - killed < TTL + 2.5
    second = wait_for(lambda: _control_plane(ca_b), "b's control plane")
    wait_for(lambda: _control_plane(ca_a) is None, "a's control plane gone", 10)
    wait_for(lambda: f":{second.webhook_port}/inject" in _webhook_url(etcd), "b's webhook url")

    # b is paused past its lease: c takes over; b, thawed, stops its control plane and exits
    c, ca_c, log_c = operators.start("c")
    wait_for(lambda: "operator: standing by; " in log_c.read_text(), "c standing by")
    b.send_signal(signal.SIGSTOP)
    wait_for(lambda: "leads; it runs the control planes" in log_c.read_text(), "c leads", 10)
    b.send_signal(signal.SIGCONT)
    assert b.wait(20) != 0
    assert "lost the leadership (the lease expired); its control planes were stopped" in (
        log_b.read_text()
    )
    wait_for(lambda: _control_plane(ca_b) is None, "b's control plane gone", 20)
    third = wait_for(lambda: _control_plane(ca_c), "c's control plane")
    wait_for(lambda: f":{third.webhook_port}/inject" in _webhook_url(etcd), "c's webhook url")
    assert c.poll() is None


def test_two_discovery_replicas_one_writes_the_webhook_configuration(
    tmp_path: Path, etcd: EtcdServer
) -> None:
    procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
    try:
        for name in ("p", "q"):
            ca, log = tmp_path / f"ca-{name}", tmp_path / f"discovery-{name}.log"
            argv = [sys.executable, "-c", "from meshpilot.cli.main import main; main()",
                    "discovery", "--store", etcd.url(), "--revision", "x", "--ca-dir", str(ca),
                    "--xds-port", "0", "--monitoring-port", "0", "--lease-ttl", str(TTL),
                    "--log-level", "debug"]  # fmt: skip
            with log.open("wb") as out:
                proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
            procs.append((proc, ca, log))
        (p, ca_p, log_p), (q, ca_q, log_q) = procs
        rp = wait_for(lambda: _control_plane(ca_p), "p's control plane")
        rq = wait_for(lambda: _control_plane(ca_q), "q's control plane")
        ports = {f"https://127.0.0.1:{r.webhook_port}/inject": r for r in (rp, rq)}
        url = wait_for(lambda: _webhook_url(etcd), "a webhook url")
        time.sleep(1.0)
        assert _webhook_url(etcd) == url and url in ports
        writer, standby = (p, log_q) if ports[url] is rp else (q, log_p)
        assert "webhook configuration of revision x not written: " in standby.read_text()
        writer.terminate()  # resigns: the standby writes its own url
        other = next(u for u in ports if u != url)
        wait_for(lambda: _webhook_url(etcd) == other, "the standby's url", TTL + 3)
    finally:
        for proc, _, _ in procs:
            proc.terminate()
        for proc, _, _ in procs:
            proc.wait(20)

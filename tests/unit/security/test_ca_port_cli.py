"""`meshpilot discovery --ca-port`: the real command serves the CA through its Envoy, and
leaves no Envoy, socket or key file behind when it stops."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

from meshpilot.cli.token import CaOptions
from meshpilot.runtime.ports import free_port
from meshpilot.security.tokens import TokenAuthority
from meshpilot.settings import Settings
from tests.conftest import REPO
from tests.unit.security.grpc_client import channel, create_certificate
from tests.unit.security.pki import load_chain, verify_client_chain, workload_csr
from tests.unit.security.procs import MESHPILOT, children, wait_port


def test_discovery_serves_the_ca_port_and_stops_its_envoy(tmp_path: Path) -> None:
    ca_dir = tmp_path / "ca"
    ca_port = free_port()
    argv = [
        MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
        "--xds-port", "0", "--monitoring-port", "0", "--ca-port", str(ca_port),
        "--ca-dir", str(ca_dir),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        wait_port(ca_port, proc)
        (envoy,) = children(proc.pid)
        assert "envoy" in Path(f"/proc/{envoy}/cmdline").read_text()
        token = TokenAuthority.open(ca_dir).issue("default", "reviews", "reviews-v1")
        root = (ca_dir / "root-cert.pem").read_bytes()

        async def call() -> list[str]:
            async with channel(ca_port, root) as chan:
                return list(
                    await create_certificate(chan, workload_csr("default", "reviews"), token)
                )

        chain = load_chain(asyncio.run(call()))
        assert verify_client_chain(chain, chain[-1])
        # the bootstrap (it holds the key) goes once discovery sees Envoy listen; the
        # port may answer a few ms before that probe runs
        private_dir = Path("/proc", str(envoy), "cwd").resolve()
        deadline = time.monotonic() + 5
        while (private_dir / "envoy.json").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        # left: the sockets and the owner file (PID and start time, for cleanup after kill -9)
        assert sorted(p.name for p in private_dir.glob("*")) == ["ca.sock", "owner", "xds.sock"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    log = err.decode()
    assert proc.returncode == 0, log
    assert f"CA alone on :{ca_port} (TLS)" in log
    assert not Path(f"/proc/{envoy}").exists()
    assert not private_dir.exists()
    assert token not in log and token.split(".")[2] not in log


def test_ca_port_and_front_envoy_off(tmp_path: Path) -> None:
    """`--no-front-envoy`: grpc.aio serves the secure port itself, no Envoy is started."""
    secure = free_port()
    argv = [
        MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
        "--xds-port", "0", "--monitoring-port", "0", "--secure-port", str(secure),
        "--ca-port", "-1", "--ca-dir", str(tmp_path / "ca"), "--no-front-envoy",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        wait_port(secure, proc)
        assert children(proc.pid) == []
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0 and "CA alone" not in err.decode()
    assert f"127.0.0.1:{secure} (TLS)," in err.decode()


def test_the_ca_port_is_opt_in() -> None:
    def port(given: int | None, moved: bool) -> int | None:
        options = CaOptions(None, None, None, None, None, given, front=True, enabled=True)
        return options.apply(Settings(), moved_ports=moved).ports.ca

    assert Settings().ports.ca is None  # library default: no Envoy unless asked
    assert port(None, moved=False) is None  # nor on Istio's ports: opt-in
    assert port(None, moved=True) is None
    assert (port(0, moved=True), port(16011, moved=False), port(-1, moved=False)) == (
        0,
        16011,
        None,
    )

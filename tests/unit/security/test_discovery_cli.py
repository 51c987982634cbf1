"""`meshpilot discovery` with its CA, as a user runs it: the real command in a subprocess,
a token from `meshpilot token issue`, a certificate over TLS on --secure-port."""

from __future__ import annotations

import asyncio
import signal
import stat
import subprocess
from pathlib import Path

from meshpilot.runtime.ports import free_port
from meshpilot.security.certs import new_key
from tests.conftest import REPO
from tests.unit.security.grpc_client import channel, create_certificate
from tests.unit.security.pki import load_chain, verify_client_chain, workload_csr
from tests.unit.security.procs import MESHPILOT, wait_port


def test_discovery_serves_the_ca_to_a_token_holder(tmp_path: Path) -> None:
    ca_dir, public = tmp_path / "ca", tmp_path / "pub" / "root-cert.pem"
    secure = free_port()
    argv = [
        MESHPILOT, "discovery", "-f", str(REPO / "examples" / "bookinfo"),
        "--xds-port", "0", "--monitoring-port", "0", "--secure-port", str(secure),
        "--ca-dir", str(ca_dir), "--root-cert-out", str(public),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        wait_port(secure, proc)
        token = subprocess.run(
            [MESHPILOT, "token", "issue", "-n", "default", "--service-account", "reviews",
             "--pod", "reviews-v1", "--ca-dir", str(ca_dir)],
            check=True, capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        root = public.read_bytes()
        assert stat.S_IMODE(public.stat().st_mode) == 0o644
        assert stat.S_IMODE((ca_dir / "ca-key.pem").stat().st_mode) == 0o600

        async def call() -> list[str]:
            async with channel(secure, root) as chan:
                return list(
                    await create_certificate(chan, workload_csr("default", "reviews"), token)
                )

        chain = load_chain(asyncio.run(call()))
        assert verify_client_chain(chain, chain[-1])
        bad_csr = workload_csr("prod", "reviews", new_key())

        async def refused() -> str:
            async with channel(secure, root) as chan:
                try:
                    await create_certificate(chan, bad_csr, token)
                except Exception as exc:  # AioRpcError
                    return str(exc)
            return ""

        assert "PERMISSION_DENIED" in asyncio.run(refused())
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    log = err.decode()
    assert proc.returncode == 0, log
    assert f"secure xDS and CA on 127.0.0.1:{secure} (TLS, through Envoy)" in log
    assert "refused CSR" in log and "token of pod reviews-v1.default" in log
    assert token not in log and token.split(".")[2] not in log

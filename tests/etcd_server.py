"""A real etcd (Debian's etcd-server) for the store tests: one member on loopback, on free
ports, its data in the test's tmp_path; `restart()` keeps both, so a watcher can resume.
Stopped at the end of the test whatever happened.

    from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401  (`etcd`)

    def test_x(etcd: EtcdServer) -> None:
        store = EtcdStore(parse_etcd_url(etcd.url("/meshpilot")))
"""

from __future__ import annotations

import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from meshpilot.runtime.ports import free_port
from tests.etcd_tls import EtcdTlsFiles

__all__ = ["EtcdServer", "etcd_binary", "etcd_fixture"]

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def etcd_binary() -> str:
    """The etcd binary; the test is skipped without one (apt-get install etcd-server)."""
    path = shutil.which("etcd")
    if path is None:
        pytest.skip("etcd is not installed (Debian: apt-get install etcd-server)")
    return path


@dataclass
class EtcdServer:
    data_dir: Path
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    extra_args: tuple[str, ...] = ()  # more etcd flags (e.g. --max-txn-ops)
    tls: EtcdTlsFiles | None = None  # clients over TLS, with client certificates
    proc: subprocess.Popen[bytes] | None = None
    name: str = "test"
    initial_cluster: str = ""  # name=peer-url,...: a member of a cluster (EtcdCluster)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def log(self) -> Path:
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def url(self, prefix: str = "/meshpilot") -> str:
        if self.tls is None:
            return f"etcd://{self.endpoint}{prefix}"
        t = self.tls
        query = f"cacert={t.ca}&cert={t.client_cert}&key={t.client_key}"
        return f"etcd+https://{self.endpoint}{prefix}?{query}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, wait: bool = True) -> EtcdServer:
        client = f"{'https' if self.tls else 'http'}://{self.endpoint}"
        peer = self.peer_url
        args = [
            etcd_binary(), "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster or f"{self.name}={peer}",
            "--logger", "zap", "--log-level", "warn", *self.extra_args,
        ]  # fmt: skip
        if self.tls is not None:
            args += ["--cert-file", str(self.tls.server_cert), "--key-file",
                     str(self.tls.server_key), "--trusted-ca-file", str(self.tls.ca),
                     "--client-cert-auth"]  # fmt: skip
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + 30
        while not self._healthy():
            if self.proc.poll() is not None:
                raise AssertionError(f"etcd exited {self.proc.returncode}: {self.log.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"etcd not healthy in 30 s: {self.log.read_text()}")
            time.sleep(0.05)

    def _healthy(self) -> bool:
        if self.tls is None:
            opener, url = _OPENER, f"http://{self.endpoint}/health"
        else:
            context = ssl.create_default_context(cafile=str(self.tls.ca))
            context.load_cert_chain(self.tls.client_cert, self.tls.client_key)
            https = urllib.request.HTTPSHandler(context=context)
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), https)
            url = f"https://{self.endpoint}/health"
        try:
            with opener.open(url, timeout=1) as response:
                return b'"true"' in response.read()
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(name="etcd")
def etcd_fixture(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(tmp_path / "etcd-data").start()
    try:
        yield server
    finally:
        server.stop()

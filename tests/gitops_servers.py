"""Real servers for the remote repo tests, all on 127.0.0.1 and stopped by their context
managers: git smart HTTP (`git http-backend` as CGI) over TLS with Basic auth, OpenSSH's
sshd serving git over ssh, and a plain HTTP Helm chart repository."""

from __future__ import annotations

import base64
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from meshpilot.runtime.ports import free_port
from meshpilot.security.certs import (
    Signer,
    ca_certificate,
    cert_pem,
    key_pem,
    new_key,
    serving_certificate,
)

SSHD = Path("/usr/sbin/sshd")


@dataclass
class TestCA:
    signer: Signer
    pem: str

    def server_files(self, folder: Path) -> tuple[Path, Path]:
        """A serving certificate for 127.0.0.1 / localhost: (cert file, key file)."""
        key = new_key()
        cert = serving_certificate(self.signer, key, ["localhost"], ["127.0.0.1"])
        folder.mkdir(parents=True, exist_ok=True)
        cert_file, key_file = folder / "server.crt", folder / "server.key"
        cert_file.write_bytes(cert_pem(cert))
        key_file.write_bytes(key_pem(key))
        key_file.chmod(0o600)
        return cert_file, key_file


def client_certificate(ca: TestCA) -> tuple[str, str]:
    """(certificate PEM, key PEM) of a TLS client issued by `ca`."""
    key = new_key()
    cert = serving_certificate(ca.signer, key, ["git-client"])
    return cert_pem(cert).decode(), key_pem(key).decode()


def make_ca(name: str = "meshpilot test git CA") -> TestCA:
    key = new_key()
    cert = ca_certificate(key, common_name=name)
    return TestCA(Signer(cert, key), cert_pem(cert).decode())


@dataclass
class RequestLog:
    entries: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, user
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, method: str, path: str, user: str) -> None:
        with self.lock:
            self.entries.append((method, path, user))

    def paths(self) -> list[str]:
        with self.lock:
            return [p for _, p, _ in self.entries]


@contextmanager
def _serving(server: ThreadingHTTPServer) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# ---- git smart HTTP over TLS with Basic auth ----------------------------------------


class _GitServer(ThreadingHTTPServer):
    daemon_threads = True
    project_root: Path
    users: dict[str, str]
    log: RequestLog


class _GitHandler(BaseHTTPRequestHandler):
    server: _GitServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _user(self) -> str:
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return ""
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        return user if self.server.users.get(user) == password else ""

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                out += self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    return out
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        path, _, query = self.path.partition("?")
        user = self._user()
        self.server.log.add(self.command, path, user)
        body = self._body()
        if not user:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        env = {
            "PATH": "/usr/bin:/bin",
            "GIT_PROJECT_ROOT": str(self.server.project_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
        ).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status = 200
        headers: list[tuple[str, str]] = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@dataclass
class GitHttpsServer:
    base_url: str  # https://127.0.0.1:<port>
    ca_pem: str
    log: RequestLog


@contextmanager
def git_https_server(
    project_root: Path,
    users: dict[str, str],
    ca: TestCA,
    tls_dir: Path,
    client_ca: TestCA | None = None,
) -> Iterator[GitHttpsServer]:
    """Serve the bare repositories under `project_root` at https://127.0.0.1:<port>/<name>
    (with `client_ca`, only to clients with a certificate it issued: mutual TLS)."""
    cert_file, key_file = ca.server_files(tls_dir)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=client_ca.pem)
    server = _GitServer(("127.0.0.1", 0), _GitHandler)
    server.project_root, server.users, server.log = project_root, users, RequestLog()
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with _serving(server):
        port = server.server_address[1]
        yield GitHttpsServer(f"https://127.0.0.1:{port}", ca.pem, server.log)


def bare_clone(source: Path, target: Path) -> Path:
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(source), str(target)],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null"},
    )
    return target


# ---- sshd -----------------------------------------------------------------------------


@dataclass
class SshKey:
    private_openssh: str
    public_line: str  # "ssh-ed25519 AAAA..."


def new_ssh_key() -> SshKey:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SshKey(private, public.decode())


@dataclass
class Sshd:
    port: int
    host_key: SshKey

    @property
    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_key.public_line}"


def _wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline and proc.poll() is None:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.02)
    return False


@contextmanager
def run_sshd(folder: Path, authorized: list[str]) -> Iterator[Sshd]:
    """OpenSSH's sshd on a free loopback port, accepting `authorized` keys for root
    (git runs as root over ssh). Skips when sshd is missing or we are not root."""
    if not SSHD.exists() or os.geteuid() != 0 or shutil.which("ssh") is None:
        pytest.skip("needs root, /usr/sbin/sshd and ssh (Debian openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    host_key = new_ssh_key()
    (folder / "host_key").write_text(host_key.private_openssh)
    (folder / "host_key").chmod(0o600)
    (folder / "authorized_keys").write_text("".join(k + "\n" for k in authorized))
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "PermitRootLogin prohibit-password\nAllowUsers root\nStrictModes no\n"
        "LogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    check = subprocess.run([str(SSHD), "-t", "-f", str(config)], capture_output=True, check=False)
    if check.returncode != 0:
        pytest.skip(f"sshd cannot run here: {check.stderr.decode().strip()}")
    proc = subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        if not _wait_listening(port, proc, time.monotonic() + 10):
            pytest.skip("sshd did not start listening")
        yield Sshd(port, host_key)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


# ---- Helm chart repository --------------------------------------------------------------


class _ChartServer(ThreadingHTTPServer):
    daemon_threads = True
    log: RequestLog


class _ChartHandler(SimpleHTTPRequestHandler):
    server: _ChartServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.log.add("GET", self.path, "")
        super().do_GET()


@dataclass
class ChartRepo:
    url: str
    log: RequestLog


@contextmanager
def chart_repo_server(directory: Path) -> Iterator[ChartRepo]:
    """Serve `directory` (index.yaml and chart archives) over plain HTTP."""

    def handler(*args: Any, **kwargs: Any) -> _ChartHandler:
        return _ChartHandler(*args, directory=str(directory), **kwargs)

    server = _ChartServer(("127.0.0.1", 0), handler)
    server.log = RequestLog()
    with _serving(server):
        yield ChartRepo(f"http://127.0.0.1:{server.server_address[1]}", server.log)

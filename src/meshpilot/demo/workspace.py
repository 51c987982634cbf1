"""The demo's private temporary directory, removed when the demo ends.

meshpilot-demo-XXXX/   0711: others may pass through, not list
  config/              0700: the mesh YAML the control plane watches (the Secret 0600)
  certs/ca.crt         0644: the CA that signed the ingress gateway's certificate
  certs/root-cert.pem  0644: the mesh root (written by the control plane's CA)
  ca/                  0700: the mesh CA's private directory (keys, token signing key)
  bin/                 0755: app.py and client.py, run inside pods by unprivileged users
  run/<n>/             0755: the proxy agents' working directories (bootstrap, SDS socket;
                       short paths: a Unix socket path holds at most 107 bytes)
  xds/xds.sock         the control plane's plaintext xDS socket
  xds/secure.sock      its TLS port (xDS + CA, istiod's 15012), connectable by the proxy UID
  discovery.log
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from meshpilot.demo import app as app_module
from meshpilot.demo import client as client_module
from meshpilot.demo.certs import GatewayCertificate, write_public
from meshpilot.demo.manifests import ConfigDir
from meshpilot.runtime.leftovers import Owner
from meshpilot.security.files import ensure_private_dir

__all__ = ["PREFIX", "Workspace", "remove_stale_workspaces", "script_python"]

SYSTEM_PYTHON = Path("/usr/bin/python3")
PREFIX = "meshpilot-demo-"
OWNER_FILE = "owner"


def remove_stale_workspaces() -> list[Path]:
    """Workspaces in the temporary directory whose demo process is gone; removed."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        owner = Owner.read(path / OWNER_FILE)
        if owner is not None and not owner.alive():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def script_python() -> str:
    """The interpreter for app.py and client.py (standard library only): the system's, which
    every user can run, else this one."""
    return str(SYSTEM_PYTHON) if SYSTEM_PYTHON.is_file() else sys.executable


@dataclass
class Workspace:
    root: Path
    config: ConfigDir
    certs: Path
    bin: Path
    xds: Path

    @classmethod
    def create(cls) -> Workspace:
        remove_stale_workspaces()
        root = Path(tempfile.mkdtemp(prefix=PREFIX))
        try:
            root.chmod(0o711)
            Owner.current().write(root / OWNER_FILE)
            certs = root / "certs"
            certs.mkdir(mode=0o755)
            bin_dir = root / "bin"
            bin_dir.mkdir(mode=0o755)
            for module in (app_module, client_module):
                source = Path(module.__file__ or "")
                write_public(bin_dir / source.name, source.read_bytes())
            xds = root / "xds"
            xds.mkdir(mode=0o755)
            (root / "run").mkdir(mode=0o755)
            ensure_private_dir(root / "ca")
            return cls(root, ConfigDir(root / "config"), certs, bin_dir, xds)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    @property
    def app(self) -> Path:
        return self.bin / "app.py"

    @property
    def client(self) -> Path:
        return self.bin / "client.py"

    @property
    def socket(self) -> Path:
        return self.xds / "xds.sock"

    def agent_dir(self, index: int) -> Path:
        return self.root / "run" / str(index)

    @property
    def secure_socket(self) -> Path:
        return self.xds / "secure.sock"

    @property
    def ca_dir(self) -> Path:
        return self.root / "ca"

    @property
    def root_cert(self) -> Path:
        return self.certs / "root-cert.pem"

    @property
    def ca_file(self) -> Path:
        return self.certs / "ca.crt"

    @property
    def discovery_log(self) -> Path:
        return self.root / "discovery.log"

    def write_certificates(self, cert: GatewayCertificate) -> None:
        """The CA (for clients) and the server certificate as files; the key only inside
        the Secret in config/ (0600)."""
        write_public(self.ca_file, cert.ca_pem)
        write_public(self.certs / f"{cert.host}.crt", cert.cert_pem)
        self.config.write_secret(cert)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

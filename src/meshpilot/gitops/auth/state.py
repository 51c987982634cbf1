"""The server's private state directory (0700; default `<store>/.gitops/server`):

    server.secretkey           the HMAC-SHA256 key of session and API tokens (0600), made once
    initial-admin-password     the generated admin password (0600; Argo CD's
                               argocd-initial-admin-secret): read it, log in, change or delete
    revoked-sessions           JSON {jti: exp} of sessions ended by logout (0600)

Another process with a copy of the key could mint tokens: the directory is the server's alone.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path

from meshpilot.security.files import dir_lock, ensure_private_dir, write_private

__all__ = ["INITIAL_PASSWORD_FILE", "ServerState"]

KEY_FILE = "server.secretkey"
INITIAL_PASSWORD_FILE = "initial-admin-password"
REVOKED_FILE = "revoked-sessions"
_KEY_BYTES = 32


class ServerState:
    def __init__(self, directory: Path) -> None:
        self.directory = ensure_private_dir(Path(directory))
        with dir_lock(self.directory):
            key_path = self.directory / KEY_FILE
            if not key_path.exists():
                write_private(key_path, secrets.token_bytes(_KEY_BYTES))
            self.key = key_path.read_bytes()
        if len(self.key) < _KEY_BYTES:
            raise ValueError(f"{key_path}: the token key is too short; delete it to make a new one")
        self._lock = threading.Lock()
        self._revoked = self._read_revoked()

    @property
    def initial_password_file(self) -> Path:
        return self.directory / INITIAL_PASSWORD_FILE

    def write_initial_password(self, password: str) -> Path:
        write_private(self.initial_password_file, password.encode() + b"\n")
        return self.initial_password_file

    # -- logout ------------------------------------------------------------------------------

    def _read_revoked(self) -> dict[str, int]:
        try:
            data = json.loads((self.directory / REVOKED_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def revoke(self, jti: str, exp: int | None) -> None:
        now = int(time.time())
        with self._lock:
            # Expired entries go: an expired token is refused anyway.
            kept = {k: v for k, v in self._revoked.items() if v > now}
            kept[jti] = exp if exp is not None else now + 10 * 365 * 86400
            write_private(self.directory / REVOKED_FILE, json.dumps(kept).encode())
            self._revoked = kept

    def is_revoked(self, jti: str) -> bool:
        with self._lock:
            return jti in self._revoked

"""Test helpers for GitOps rendering: real git repositories, real age keys, and a SOPS
encryptor (same format as the sops tool) so tests can produce encrypted files."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

from meshpilot.gitops.render.sops import age, bech32
from meshpilot.gitops.render.sops.values import plain_bytes

GIT_ENV = {
    "PATH": os.defpath + ":/usr/bin:/bin",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@dataclass
class GitRepo:
    path: Path

    def git(self, *args: str) -> str:
        out = subprocess.run(
            ["git", *args], cwd=self.path, env=GIT_ENV, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, files: dict[str, str] | None = None, message: str = "change") -> str:
        self.write(files or {})
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


def make_repo(path: Path, files: dict[str, str] | None = None) -> GitRepo:
    path.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(path)
    repo.git("init", "-q", "-b", "main")
    repo.commit(files or {"README.md": "hello\n"}, "initial")
    return repo


@dataclass(frozen=True)
class AgeKey:
    identity: str  # AGE-SECRET-KEY-1...
    recipient: str  # age1...


def new_age_key() -> AgeKey:
    private = X25519PrivateKey.generate()
    secret = bech32.encode("age-secret-key-", private.private_bytes_raw()).upper()
    public = bech32.encode("age", private.public_key().public_bytes_raw())
    return AgeKey(secret, public)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def age_encrypt(plaintext: bytes, recipients: list[str]) -> bytes:
    """age v1 with X25519 stanzas (one STREAM chunk is enough for data keys)."""
    file_key = os.urandom(16)
    header = b"age-encryption.org/v1\n"
    for recipient in recipients:
        _, pub = bech32.decode(recipient)
        eph = X25519PrivateKey.generate()
        share = eph.public_key().public_bytes_raw()
        shared = eph.exchange(X25519PublicKey.from_public_bytes(pub))
        wrap = age.hkdf(shared, share + pub, age.X25519_INFO)
        body = _b64(ChaCha20Poly1305(wrap).encrypt(bytes(12), file_key, None))
        header += f"-> X25519 {_b64(share)}\n".encode()
        lines = [body[i : i + 64] for i in range(0, len(body), 64)] or [""]
        if len(lines[-1]) == 64:
            lines.append("")
        header += "".join(line + "\n" for line in lines).encode()
    header += b"---"
    import hmac

    mac = hmac.new(age.hkdf(file_key, b"", b"header"), header, hashlib.sha256).digest()
    nonce = os.urandom(16)
    key = age.hkdf(file_key, nonce, b"payload")
    payload = ChaCha20Poly1305(key).encrypt(bytes(11) + b"\x01", plaintext, None)
    return header + b" " + _b64(mac).encode() + b"\n" + nonce + payload


def armor(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    body = "\n".join(text[i : i + 64] for i in range(0, len(text), 64))
    return f"{age.ARMOR_BEGIN}\n{body}\n{age.ARMOR_END}\n"


def _enc(value: Any, key: bytes, aad: str) -> str:
    if value == "":
        return ""
    kind = {bool: "bool", int: "int", float: "float", str: "str"}[type(value)]
    iv = os.urandom(32)
    sealed = AESGCM(key).encrypt(iv, plain_bytes(value), aad.encode())
    data, tag = sealed[:-16], sealed[-16:]
    data64, iv64, tag64 = (base64.b64encode(x).decode() for x in (data, iv, tag))
    return f"ENC[AES256_GCM,data:{data64},iv:{iv64},tag:{tag64},type:{kind}]"


def sops_encrypt(tree: dict[str, Any], recipients: list[str], suffix: str = "_unencrypted") -> str:
    """A SOPS YAML document as `sops -e` writes it for age recipients."""
    key = os.urandom(32)
    digest = hashlib.sha512()

    def walk(value: Any, path: list[str]) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, [*path, str(k)]) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, path) for v in value]
        if value is None:
            return None
        digest.update(plain_bytes(value))
        if any(p.endswith(suffix) for p in path):
            return value
        return _enc(value, key, ":".join(path) + ":")

    encrypted = walk(tree, [])
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    encrypted["sops"] = {
        "age": [{"recipient": r, "enc": armor(age_encrypt(key, [r]))} for r in recipients],
        "lastmodified": now,
        "mac": _enc(digest.hexdigest().upper(), key, now),
        "unencrypted_suffix": suffix,
        "version": "3.9.0",
    }
    return yaml.safe_dump(encrypted, sort_keys=False)

"""Decrypt age v1 files (X25519 recipients) in process, with `cryptography`.

SOPS stores its data key encrypted to each age recipient as an ASCII-armored age file.
We implement the part of age v1 that SOPS needs (https://age-encryption.org/v1): the
X25519 recipient stanza, the header MAC and the STREAM payload. Other stanza types (scrypt,
ssh-ed25519, plugins) are skipped, so a file only they can open reports "no identity".
Plaintext only ever lives in memory.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from dataclasses import dataclass
from hashlib import sha256

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from meshpilot.gitops.render.sops import bech32

__all__ = [
    "AgeError",
    "AgeIdentity",
    "NoIdentityError",
    "dearmor",
    "decrypt",
    "hkdf",
    "parse_identities",
]

VERSION_LINE = b"age-encryption.org/v1"
X25519_INFO = b"age-encryption.org/v1/X25519"
ARMOR_BEGIN = "-----BEGIN AGE ENCRYPTED FILE-----"
ARMOR_END = "-----END AGE ENCRYPTED FILE-----"
CHUNK = 64 * 1024
_SECRET_HRP = "age-secret-key-"


class AgeError(ValueError):
    """The age file is malformed or was tampered with."""


class NoIdentityError(AgeError):
    """None of the given identities can open the file."""


@dataclass(frozen=True, slots=True)
class AgeIdentity:
    """An X25519 identity (AGE-SECRET-KEY-1...). repr never shows the key."""

    private: X25519PrivateKey

    @property
    def recipient(self) -> str:
        raw = self.private.public_key().public_bytes_raw()
        return bech32.encode("age", raw)

    def __repr__(self) -> str:
        return f"AgeIdentity(recipient={self.recipient})"


def parse_identities(text: str, source: str) -> list[AgeIdentity]:
    """Identities from key-file text (SOPS_AGE_KEY_FILE format: one per line, # comments).

    Errors name the source and line, never the key material.
    """
    out: list[AgeIdentity] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            hrp, data = bech32.decode(line)
        except bech32.Bech32Error as exc:
            raise AgeError(f"{source}:{number}: not an age identity ({exc})") from None
        if hrp != _SECRET_HRP or len(data) != 32:
            raise AgeError(f"{source}:{number}: not an age X25519 identity")
        out.append(AgeIdentity(X25519PrivateKey.from_private_bytes(data)))
    return out


def hkdf(ikm: bytes, salt: bytes, info: bytes, length: int = 32) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


def _b64(text: bytes) -> bytes:
    """age's base64: standard alphabet, no padding, canonical."""
    if b"=" in text:
        raise AgeError("padded base64 in header")
    try:
        return base64.b64decode(text + b"=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        raise AgeError("invalid base64 in header") from None


def dearmor(text: str) -> bytes:
    """Strip the PEM-like armor SOPS uses around the encrypted data key."""
    body = text.strip()
    if not body.startswith(ARMOR_BEGIN) or not body.endswith(ARMOR_END):
        raise AgeError("not an armored age file")
    inner = body[len(ARMOR_BEGIN) : -len(ARMOR_END)]
    try:
        return base64.b64decode("".join(inner.split()), validate=True)
    except binascii.Error:
        raise AgeError("invalid base64 in armor") from None


@dataclass(frozen=True, slots=True)
class _Stanza:
    kind: str
    args: tuple[str, ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class _Header:
    stanzas: tuple[_Stanza, ...]
    mac: bytes
    signed: bytes  # header bytes covered by the MAC (through "---")
    payload: bytes


def _parse(data: bytes) -> _Header:
    lines = data.split(b"\n")
    if not lines or lines[0] != VERSION_LINE:
        raise AgeError("not an age v1 file")
    stanzas: list[_Stanza] = []
    index = 1
    offset = len(lines[0]) + 1
    while index < len(lines):
        line = lines[index]
        if line.startswith(b"--- "):
            signed = data[: offset + 3]
            payload = data[offset + len(line) + 1 :]
            return _Header(tuple(stanzas), _b64(line[4:]), signed, payload)
        if not line.startswith(b"-> "):
            raise AgeError("malformed header line")
        parts = line[3:].decode("ascii", "replace").split(" ")
        offset += len(line) + 1
        index += 1
        body = b""
        while True:  # body lines are 64 columns; a shorter one ends the stanza
            if index >= len(lines):
                raise AgeError("truncated header")
            chunk = lines[index]
            offset += len(chunk) + 1
            index += 1
            body += chunk
            if len(chunk) < 64:
                break
        stanzas.append(_Stanza(parts[0], tuple(parts[1:]), _b64(body)))
    raise AgeError("header has no MAC line")


def _unwrap_x25519(stanza: _Stanza, identity: AgeIdentity) -> bytes | None:
    if len(stanza.args) != 1:
        raise AgeError("malformed X25519 stanza")
    share = _b64(stanza.args[0].encode())
    if len(share) != 32 or len(stanza.body) != 32:
        raise AgeError("malformed X25519 stanza")
    shared = identity.private.exchange(X25519PublicKey.from_public_bytes(share))
    if shared == bytes(32):
        raise AgeError("X25519 stanza with a low-order share")
    ours = identity.private.public_key().public_bytes_raw()
    key = hkdf(shared, share + ours, X25519_INFO)
    try:
        return ChaCha20Poly1305(key).decrypt(bytes(12), stanza.body, None)
    except InvalidTag:
        return None  # the stanza is for another recipient


def _file_key(header: _Header, identities: list[AgeIdentity]) -> bytes:
    for stanza in header.stanzas:
        if stanza.kind != "X25519":
            continue
        for identity in identities:
            key = _unwrap_x25519(stanza, identity)
            if key is not None:
                return key
    raise NoIdentityError("no identity matched any of the recipients")


def _payload(file_key: bytes, payload: bytes) -> bytes:
    if len(payload) < 16:
        raise AgeError("truncated payload")
    nonce, body = payload[:16], payload[16:]
    aead = ChaCha20Poly1305(hkdf(file_key, nonce, b"payload"))
    out = bytearray()
    counter = 0
    size = CHUNK + 16
    while True:
        chunk, body = body[:size], body[size:]
        last = not body
        try:
            out += aead.decrypt(
                counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00"), chunk, None
            )
        except InvalidTag:
            raise AgeError("payload authentication failed") from None
        if last:
            return bytes(out)
        counter += 1


def decrypt(data: bytes, identities: list[AgeIdentity]) -> bytes:
    """Decrypt a binary age file with the first identity that matches a stanza."""
    header = _parse(data)
    file_key = _file_key(header, identities)
    mac_key = hkdf(file_key, b"", b"header")
    expected = hmac.new(mac_key, header.signed, sha256).digest()
    if not hmac.compare_digest(expected, header.mac):
        raise AgeError("header MAC mismatch (file modified)")
    return _payload(file_key, header.payload)

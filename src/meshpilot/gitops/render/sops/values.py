"""SOPS's value encoding: ENC[AES256_GCM,...] strings and the bytes the MAC covers.

Facts from the SOPS format (getsops/sops): every value is encrypted with AES-256-GCM under
the 32-byte data key, a random IV (32 bytes when SOPS writes it) and, as additional data,
the path of mapping keys to the value joined by ":" plus a trailing ":" (list items share
their list's path). The MAC is SHA-512 over the plaintext of every non-null leaf in document
order, in SOPS's text form (bools "True"/"False", floats without exponent), upper-case hex.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from decimal import Decimal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["EncryptedValue", "decrypt_value", "mac_bytes", "parse_encrypted", "plain_bytes"]

_ENC = re.compile(r"^ENC\[AES256_GCM,data:(.*),iv:(.+),tag:(.+),type:(.+)\]$")
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}

Leaf = str | int | float | bool | bytes


class ValueFormatError(ValueError):
    """A value in an encrypted position is not a well-formed ENC[...] string."""


class ValueAuthError(ValueError):
    """AES-GCM refused the value: wrong key, or value or path changed."""


@dataclass(frozen=True, slots=True)
class EncryptedValue:
    data: bytes
    iv: bytes
    tag: bytes
    type: str


def parse_encrypted(text: str) -> EncryptedValue:
    match = _ENC.match(text)
    if match is None:
        raise ValueFormatError("not a SOPS ENC[AES256_GCM,...] value")
    try:
        data, iv, tag = (base64.b64decode(match.group(i), validate=True) for i in (1, 2, 3))
    except binascii.Error:
        raise ValueFormatError("bad base64 in ENC[...] value") from None
    return EncryptedValue(data, iv, tag, match.group(4))


def decrypt_value(text: str, key: bytes, path: str) -> Leaf | None:
    """Plain value of one ENC[...] string; None for an encrypted comment."""
    if text == "":
        return ""  # SOPS leaves empty strings as they are
    value = parse_encrypted(text)
    try:
        plain = AESGCM(key).decrypt(value.iv, value.data + value.tag, path.encode())
    except (InvalidTag, ValueError):
        raise ValueAuthError("AES-GCM authentication failed") from None
    return _typed(plain, value.type)


def _typed(plain: bytes, kind: str) -> Leaf | None:
    text = plain.decode("utf-8", "replace")
    if kind == "str":
        return text
    if kind in ("int", "int64"):
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueFormatError("bad bool value")
    if kind == "bytes":
        return plain
    if kind == "comment":
        return None
    raise ValueFormatError(f"unknown SOPS value type {kind!r}")


def _float_text(value: float) -> str:
    """Go's strconv.FormatFloat(v, 'f', -1, 64): shortest digits, never an exponent."""
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def plain_bytes(value: Leaf) -> bytes:
    """The text SOPS encrypts for a value (also what its MAC hashes)."""
    if isinstance(value, bool):
        return b"True" if value else b"False"
    if isinstance(value, int):
        return str(value).encode()
    if isinstance(value, float):
        return _float_text(value).encode()
    if isinstance(value, bytes):
        return value
    return value.encode()


mac_bytes = plain_bytes

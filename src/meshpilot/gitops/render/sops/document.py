"""Decrypt a SOPS YAML/JSON document with age identities, verifying its MAC.

Only age recipients are supported (the seed team's KMS keys would need cloud access we
do not have); a file without a usable age key gets a clear error naming the file. Decrypted
values stay in memory: the result is a plain dict handed to the renderer.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from meshpilot import bounded_json
from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.gitops.render.sops import age
from meshpilot.gitops.render.sops.values import (
    Leaf,
    ValueAuthError,
    ValueFormatError,
    decrypt_value,
    mac_bytes,
)

__all__ = ["SopsError", "SopsMetadata", "decrypt_document", "is_sops_document", "load_tree"]

# SOPS writes `sops.mac` only when it hashes encrypted values only (mac_only_encrypted).
_MAC_ONLY_ENCRYPTED_INIT = hashlib.sha256(b"sops").digest()


class SopsError(ValueError):
    """A SOPS file cannot be decrypted; the message names the file, never a value."""


@dataclass(frozen=True, slots=True)
class SopsMetadata:
    age_keys: tuple[tuple[str, str], ...]  # (recipient, armored encrypted data key)
    lastmodified: str
    mac: str
    unencrypted_suffix: str
    encrypted_suffix: str
    unencrypted_regex: str
    encrypted_regex: str
    mac_only_encrypted: bool

    def should_encrypt(self, path: list[str]) -> bool:
        """SOPS's rule for which leaves are encrypted (comment regexes do not apply here)."""
        encrypted = True
        if self.unencrypted_suffix and any(p.endswith(self.unencrypted_suffix) for p in path):
            encrypted = False
        if self.encrypted_suffix:
            encrypted = any(p.endswith(self.encrypted_suffix) for p in path)
        if self.unencrypted_regex and any(re.search(self.unencrypted_regex, p) for p in path):
            encrypted = False
        if self.encrypted_regex:
            encrypted = any(re.search(self.encrypted_regex, p) for p in path)
        return encrypted


def load_tree(text: str, file: str) -> Any:
    """Parse a YAML or JSON file the way SOPS sees it (one document; timestamps stay text,
    as SOPS keeps `lastmodified`), through the bounded readers a repository's file needs."""
    try:
        if file.endswith(".json"):
            return bounded_json.loads(text)
        return load_yaml(text, file)
    except YAMLInputError as exc:
        problem = exc.message.removeprefix("invalid YAML: ")
        raise SopsError(f"{file}:{exc.line}: invalid YAML/JSON in SOPS file: {problem}") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", 1)
        raise SopsError(f"{file}:{line}: invalid YAML/JSON in SOPS file: {exc}") from None


def is_sops_document(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("sops"), dict) and "mac" in data["sops"]


def _metadata(raw: dict[str, Any], file: str) -> SopsMetadata:
    groups = raw.get("key_groups") or []
    if len(groups) > 1:
        raise SopsError(f"{file}: SOPS key groups (Shamir) are not supported")
    entries = list(raw.get("age") or []) + [e for g in groups for e in g.get("age") or []]
    keys = tuple((str(e.get("recipient", "")), str(e.get("enc", ""))) for e in entries)
    return SopsMetadata(
        age_keys=keys,
        lastmodified=str(raw.get("lastmodified", "")),
        mac=str(raw.get("mac", "")),
        unencrypted_suffix=str(raw.get("unencrypted_suffix") or ""),
        encrypted_suffix=str(raw.get("encrypted_suffix") or ""),
        unencrypted_regex=str(raw.get("unencrypted_regex") or ""),
        encrypted_regex=str(raw.get("encrypted_regex") or ""),
        mac_only_encrypted=bool(raw.get("mac_only_encrypted", False)),
    )


def _data_key(meta: SopsMetadata, identities: list[age.AgeIdentity], file: str) -> bytes:
    if not meta.age_keys:
        raise SopsError(f"{file}: SOPS file has no age recipients (only age is supported)")
    if not identities:
        raise SopsError(f"{file}: no age identity configured to decrypt this SOPS file")
    for _recipient, enc in meta.age_keys:
        try:
            return age.decrypt(age.dearmor(enc), identities)
        except age.AgeError:
            continue
    recipients = ", ".join(r for r, _ in meta.age_keys)
    raise SopsError(
        f"{file}: cannot decrypt the SOPS data key: none of the {len(identities)} age "
        f"identities matches the file's recipients ({recipients})"
    )


def _rfc3339(text: str) -> str:
    """Go's time.Format(RFC3339) of the stored time: the MAC's additional data."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    offset = when.utcoffset()
    zone = "Z" if not offset else when.strftime("%z")
    if zone != "Z":
        zone = f"{zone[:3]}:{zone[3:]}"
    return when.strftime("%Y-%m-%dT%H:%M:%S") + zone


class _Walker:
    def __init__(self, meta: SopsMetadata, key: bytes, file: str) -> None:
        self.meta, self.key, self.file = meta, key, file
        self.hash = hashlib.sha512()
        if meta.mac_only_encrypted:
            self.hash.update(_MAC_ONLY_ENCRYPTED_INIT)

    def walk(self, value: Any, path: list[str]) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                plain = self.walk(v, [*path, str(k)])
                if plain is not _DROP:
                    out[k] = plain
            return out
        if isinstance(value, list):
            items = [self.walk(v, path) for v in value]
            return [v for v in items if v is not _DROP]
        if value is None:
            return None
        return self._leaf(value, path)

    def _leaf(self, value: Leaf, path: list[str]) -> Any:
        encrypted = self.meta.should_encrypt(path)
        plain: Leaf | None = value
        if encrypted:
            if not isinstance(value, str):
                raise SopsError(f"{self.file}: {'.'.join(path)}: value is not encrypted")
            try:
                plain = decrypt_value(value, self.key, ":".join(path) + ":")
            except (ValueFormatError, ValueAuthError) as exc:
                raise SopsError(f"{self.file}: {'.'.join(path)}: {exc}") from None
            if plain is None:
                return _DROP
        if not self.meta.mac_only_encrypted or encrypted:
            self.hash.update(mac_bytes(plain))  # type: ignore[arg-type]
        return plain.decode("utf-8", "replace") if isinstance(plain, bytes) else plain


_DROP: Any = object()


def decrypt_document(
    text: str, file: str, identities: list[age.AgeIdentity], loader: Callable[..., Any] = load_tree
) -> dict[str, Any]:
    """The decrypted document without its `sops` key; raises SopsError on any problem."""
    data = loader(text, file)
    if not is_sops_document(data):
        raise SopsError(f"{file}: not a SOPS-encrypted file (no sops.mac metadata)")
    meta = _metadata(data["sops"], file)
    key = _data_key(meta, identities, file)
    walker = _Walker(meta, key, file)
    tree = {k: v for k, v in data.items() if k != "sops"}
    plain = walker.walk(tree, [])
    try:
        stored = decrypt_value(meta.mac, key, _rfc3339(meta.lastmodified))
    except (ValueFormatError, ValueAuthError):
        raise SopsError(f"{file}: SOPS MAC cannot be verified: file was modified") from None
    computed = walker.hash.hexdigest().upper()
    if not isinstance(stored, str) or not hmac.compare_digest(stored, computed):
        raise SopsError(f"{file}: SOPS MAC mismatch: file was modified after encryption")
    return plain  # type: ignore[no-any-return]

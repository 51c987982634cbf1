"""SOPS files encrypted to age recipients, decrypted in process (no sops or age binary)."""

from __future__ import annotations

from pathlib import Path

from meshpilot.gitops.render.sops.age import AgeError, AgeIdentity, parse_identities
from meshpilot.gitops.render.sops.document import (
    SopsError,
    decrypt_document,
    is_sops_document,
    load_tree,
)

__all__ = [
    "AgeError",
    "AgeIdentity",
    "SopsError",
    "decrypt_document",
    "is_sops_document",
    "load_identities",
    "load_tree",
]


def load_identities(key_file: Path | None = None, key_text: str | None = None) -> list[AgeIdentity]:
    """Identities from SOPS_AGE_KEY_FILE-style file and/or SOPS_AGE_KEY-style text.

    The CLI layer reads those variables and passes the values in; errors name the file or
    "SOPS_AGE_KEY", never key material.
    """
    identities: list[AgeIdentity] = []
    if key_text:
        identities += parse_identities(key_text, "SOPS_AGE_KEY")
    if key_file is not None:
        try:
            text = key_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise AgeError(f"{key_file}: cannot read age key file: {exc.strerror}") from None
        identities += parse_identities(text, str(key_file))
    return identities

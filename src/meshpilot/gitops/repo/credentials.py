"""Repository credentials from repo-creds / repository Secrets (spec §3.4).

A `repository` Secret whose url equals the repo URL wins; otherwise the `repo-creds`
template with the longest URL prefix. Secret values never appear in repr or errors.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from meshpilot.gitops.repo.errors import RepoError
from meshpilot.gitops.repo.urls import normalize_url

__all__ = ["RepoCredential", "credential_from_secret", "select_credential"]

SECRET_TYPE_LABEL = "argocd.argoproj.io/secret-type"


@dataclass(frozen=True, slots=True)
class RepoCredential:
    url: str
    template: bool = True  # repo-creds (prefix) vs repository (exact URL)
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    ssh_private_key: str = field(default="", repr=False)
    insecure: bool = False  # https: skip certificate checks; ssh: skip the host key check
    tls_client_cert_data: str = field(default="", repr=False)  # PEM, for mutual TLS
    tls_client_cert_key: str = field(default="", repr=False)
    source: str = ""  # the Secret it came from (namespace/name), for error messages

    @property
    def secrets(self) -> tuple[str, ...]:
        values = (self.password, self.ssh_private_key, self.tls_client_cert_key)
        return tuple(s for s in values if s)

    @property
    def has_auth(self) -> bool:
        return bool(
            self.username or self.password or self.ssh_private_key or self.tls_client_cert_key
        )


def _field(secret: Mapping[str, Any], key: str, name: str) -> str:
    plain = (secret.get("stringData") or {}).get(key)
    if plain is not None:
        return str(plain)
    encoded = (secret.get("data") or {}).get(key)
    if encoded is None:
        return ""
    try:
        return base64.b64decode(str(encoded), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise RepoError(f"Secret {name}: data.{key} is not base64-encoded UTF-8") from None


def credential_from_secret(secret: Mapping[str, Any]) -> RepoCredential | None:
    """A credential from an Argo CD repo-creds or repository Secret; None for other Secrets."""
    meta = secret.get("metadata") or {}
    kind = (meta.get("labels") or {}).get(SECRET_TYPE_LABEL)
    if kind not in ("repo-creds", "repository"):
        return None
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    url = _field(secret, "url", name)
    if not url:
        raise RepoError(f"Secret {name}: no url")
    return RepoCredential(
        url=url,
        template=kind == "repo-creds",
        username=_field(secret, "username", name),
        password=_field(secret, "password", name),
        ssh_private_key=_field(secret, "sshPrivateKey", name),
        insecure=_field(secret, "insecure", name).lower() == "true",
        tls_client_cert_data=_field(secret, "tlsClientCertData", name),
        tls_client_cert_key=_field(secret, "tlsClientCertKey", name),
        source=name,
    )


def select_credential(url: str, creds: Iterable[RepoCredential]) -> RepoCredential | None:
    target = normalize_url(url)
    best: RepoCredential | None = None
    for cred in creds:
        prefix = normalize_url(cred.url)
        if not cred.template:
            if prefix == target and cred.has_auth:
                return cred
            continue
        if target.startswith(prefix) and (
            best is None or len(prefix) > len(normalize_url(best.url))
        ):
            best = cred
    return best

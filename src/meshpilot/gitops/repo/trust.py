"""What a repository server is trusted by, as Argo CD configures it with two ConfigMaps.

- `argocd-tls-certs-cm`: each data key is a server name (host, no port), its value the PEM
  certificate(s) git must trust for HTTPS to that host (used instead of the system CAs).
- `argocd-ssh-known-hosts-cm`: data `ssh_known_hosts` in OpenSSH known_hosts format
  (`[host]:port` for a port other than 22). A host not listed is refused, unless the
  repository's Secret says `insecure: "true"`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from meshpilot.gitops.repo.errors import RepoError

__all__ = [
    "KNOWN_HOSTS_CONFIGMAP",
    "TLS_CERTS_CONFIGMAP",
    "RepoTrust",
    "is_ssh",
    "ssh_host",
    "trust_from_configmaps",
    "url_host",
]

TLS_CERTS_CONFIGMAP = "argocd-tls-certs-cm"
KNOWN_HOSTS_CONFIGMAP = "argocd-ssh-known-hosts-cm"
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?!//)")


def url_host(url: str) -> str:
    """The host of an http(s)/ssh URL or of scp-like `user@host:path`; '' when none."""
    if "://" in url:
        return (urlsplit(url).hostname or "").lower()
    match = _SCP_LIKE.match(url)
    return match.group("host").lower() if match else ""


def ssh_host(url: str) -> tuple[str, int]:
    """(host, port) an ssh URL connects to (port 22 unless the URL names one)."""
    if "://" in url:
        parts = urlsplit(url)
        return (parts.hostname or "").lower(), parts.port or 22
    return url_host(url), 22


def is_ssh(url: str) -> bool:
    return url.startswith(("ssh://", "git+ssh://", "ssh+git://")) or (
        "://" not in url and _SCP_LIKE.match(url) is not None
    )


@dataclass(frozen=True, slots=True)
class RepoTrust:
    tls_certs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    ssh_known_hosts: str = ""

    def ca_for(self, url: str) -> str:
        """PEM to trust for an https URL ('' when the host has no entry)."""
        return self.tls_certs.get(url_host(url), "") if url.startswith("https://") else ""


def _data(obj: Mapping[str, Any], where: str) -> dict[str, str]:
    data = obj.get("data") or {}
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise RepoError(f"ConfigMap {where}: data must map keys to strings")
    return {str(k): v for k, v in data.items()}


def trust_from_configmaps(objects: Iterable[Mapping[str, Any]]) -> RepoTrust:
    """Argo CD's argocd-tls-certs-cm and argocd-ssh-known-hosts-cm among `objects`
    (other objects are ignored)."""
    certs: dict[str, str] = {}
    known_hosts: list[str] = []
    for obj in objects:
        if obj.get("kind") != "ConfigMap":
            continue
        meta = obj.get("metadata") or {}
        where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if meta.get("name") == TLS_CERTS_CONFIGMAP:
            for host, pem in _data(obj, where).items():
                if "-----BEGIN CERTIFICATE-----" not in pem:
                    raise RepoError(f"ConfigMap {where}: data.{host} is not a PEM certificate")
                certs[host.lower()] = pem
        elif meta.get("name") == KNOWN_HOSTS_CONFIGMAP:
            known_hosts.append(_data(obj, where).get("ssh_known_hosts", ""))
    text = "\n".join(h.strip() for h in known_hosts if h.strip())
    return RepoTrust(MappingProxyType(certs), text + "\n" if text else "")

"""Clear messages for a repository that could not be reached: what git said (scrubbed by
run_git), plus what to change for the usual causes (refused credentials, unknown SSH host
key, untrusted TLS certificate). Never a credential: only where it came from."""

from __future__ import annotations

from meshpilot.gitops.repo.credentials import RepoCredential
from meshpilot.gitops.repo.trust import KNOWN_HOSTS_CONFIGMAP, TLS_CERTS_CONFIGMAP, ssh_host
from meshpilot.gitops.repo.urls import scrub

__all__ = ["unreachable_message"]


def _origin(cred: RepoCredential | None) -> str:
    if cred is None:
        return "no repository credentials match this URL"
    kind = "repo-creds" if cred.template else "repository"
    where = f" {cred.source}" if cred.source else ""
    return f"credentials from {kind} Secret{where} (url {scrub(cred.url)})"


def unreachable_message(url: str, detail: str, cred: RepoCredential | None) -> str:
    shown = scrub(url)
    low = detail.lower()
    if "host key verification failed" in low or "host key is known" in low:
        host, port = ssh_host(url)
        entry = host if port == 22 else f"[{host}]:{port}"
        return (
            f"{shown}: ssh host key of {entry} is unknown (knownhosts: key is unknown): add it "
            f"to data.ssh_known_hosts of ConfigMap {KNOWN_HOSTS_CONFIGMAP}, or set "
            'insecure: "true" in the repository Secret to skip the check'
        )
    if "authentication failed" in low or "permission denied" in low:
        return f"{shown}: authentication failed with {_origin(cred)}: {detail}"
    if "server certificate verification failed" in low or "ssl certificate problem" in low:
        return (
            f"{shown}: the server's TLS certificate is not trusted: add its CA to "
            f"ConfigMap {TLS_CERTS_CONFIGMAP} under the server name, or set "
            f'insecure: "true" in the repository Secret: {detail}'
        )
    return f"{shown}: repository not reachable: {detail}"

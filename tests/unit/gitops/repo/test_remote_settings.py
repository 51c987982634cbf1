"""Repository settings from Argo CD's objects: Secrets (credentials) and ConfigMaps (trust)."""

from __future__ import annotations

import pytest
import yaml

from meshpilot.gitops.repo import RepoError, repo_settings, select_credential

OBJECTS = """
apiVersion: v1
kind: Secret
metadata:
  name: org-creds
  namespace: argocd
  labels: {argocd.argoproj.io/secret-type: repo-creds}
stringData: {url: "https://git.example.com/org", username: bot, password: s3cret-pw}
---
apiVersion: v1
kind: Secret
metadata: {name: unrelated, namespace: argocd}
stringData: {token: x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-ssh-known-hosts-cm, namespace: argocd}
data:
  ssh_known_hosts: |
    git.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB
---
apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-tls-certs-cm, namespace: argocd}
data:
  Git.Example.com: |
    -----BEGIN CERTIFICATE-----
    MIIB
    -----END CERTIFICATE-----
"""


def test_settings_from_objects() -> None:
    settings = repo_settings(yaml.safe_load_all(OBJECTS))
    assert [c.source for c in settings.credentials] == ["argocd/org-creds"]
    cred = select_credential("https://git.example.com/org/app.git", settings.credentials)
    assert cred is not None and cred.username == "bot"
    assert "s3cret-pw" not in repr(cred)
    assert settings.trust.ssh_known_hosts.startswith("git.example.com ssh-ed25519")
    assert "BEGIN CERTIFICATE" in settings.trust.ca_for("https://git.example.com:8443/org/a")
    assert settings.trust.ca_for("https://other.example.com/a") == ""
    assert settings.trust.ca_for("ssh://git.example.com/a") == ""


def test_bad_certificate_names_the_configmap_and_key() -> None:
    bad = {
        "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": "argocd"},
        "data": {"git.example.com": "not a certificate"},
    }
    with pytest.raises(RepoError, match=r"ConfigMap argocd/argocd-tls-certs-cm: data.git.example"):
        repo_settings([bad])

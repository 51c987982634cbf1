"""Where a Kubernetes store is: `kube://` (the kubeconfig's current context, or the pod's
service account in a cluster) or `kube://CONTEXT` (a context of the kubeconfig; KUBECONFIG
is honoured as kubectl does); `?kubeconfig=FILE` names the kubeconfig instead."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from meshpilot.errors import MeshpilotError

__all__ = ["KUBE_SCHEME", "KubeError", "KubeTarget", "parse_kube_url"]

KUBE_SCHEME = "kube"


class KubeError(MeshpilotError):
    """The API server could not be reached, refused a request, or the URL is malformed."""


@dataclass(frozen=True, slots=True)
class KubeTarget:
    context: str | None  # None: the current context, or in-cluster config without a kubeconfig
    kubeconfig: Path | None = None  # None: $KUBECONFIG, else ~/.kube/config

    def display(self) -> str:
        return f"kube://{self.context or ''}"


def parse_kube_url(url: str) -> KubeTarget:
    parts = urlsplit(url)
    if parts.scheme.lower() != KUBE_SCHEME:
        raise KubeError(f"{url!r} is not a Kubernetes store URL (kube://[context])")
    if parts.path.strip("/") or parts.fragment:
        raise KubeError(f"{url!r}: a Kubernetes store URL names a context: kube://[context]")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"kubeconfig"})
    if unknown:
        raise KubeError(f"{url!r}: unknown parameter {unknown[0]!r} (known: kubeconfig)")
    kubeconfig = Path(query["kubeconfig"][-1]).expanduser() if "kubeconfig" in query else None
    context = unquote(parts.netloc).strip()
    return KubeTarget(context or None, kubeconfig)

"""The Kubernetes API backend: the live store on a cluster's API server (`kube://[context]`).

target.py    kube:// URLs and the errors (no client import: store/open.py needs them always)
kinds.py     each kind's API group, version and resource path
client.py    requests through the `kubernetes` client's configured ApiClient
backend.py   KubeStore; watch.py list + watch per kind; codec.py objects through the loader
"""

from __future__ import annotations

from meshpilot.store.kube.target import KUBE_SCHEME, KubeError, KubeTarget, parse_kube_url

__all__ = ["KUBE_SCHEME", "KubeError", "KubeTarget", "parse_kube_url"]

"""A control plane's webhook configurations in the live store, as istiod keeps them in a
cluster: its own `istio-sidecar-injector[-<rev>]` (caBundle: the mesh root; url: where its
webhook listens on this machine) and the client config of every revision tag pointing at it
(spec checklist C.22: the caBundle of owned tag MWCs kept in step), written in one store write.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.inject.webhook_config import mutating_webhook_configuration
from meshpilot.store.writes import ApplyResult

__all__ = ["TAG_LABEL", "publish_webhook"]

TAG_LABEL = "istio.io/tag"
REV_LABEL = "istio.io/rev"
Manifest = dict[str, Any]


class _Store(Protocol):
    def snapshot(self) -> Any: ...

    def manifest(self, key: ConfigKey) -> Manifest | None: ...

    def apply(self, documents: list[RawDocument]) -> list[ApplyResult]: ...


def _retargeted(tag: Manifest, client: Manifest) -> Manifest:
    out = copy.deepcopy(tag)
    for hook in out.get("webhooks") or []:
        if isinstance(hook, dict):
            hook["clientConfig"] = copy.deepcopy(client)
    return out


def publish_webhook(store: _Store, root_pem: bytes, revision: str, url: str) -> list[str]:
    """Write the revision's injector MWC and retarget its tags; returns the names written."""
    own = mutating_webhook_configuration(root_pem, revision, url=url)
    rev = revision or "default"
    client = own["webhooks"][0]["clientConfig"]
    documents = [own]
    for key in sorted(store.snapshot().objects):
        if key.kind is not Kind.MUTATING_WEBHOOK_CONFIGURATION:
            continue
        manifest = store.manifest(key) or {}
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        if TAG_LABEL in labels and labels.get(REV_LABEL) == rev:
            documents.append(_retargeted(manifest, client))
    store.apply([RawDocument(f"<discovery {rev}>", 1, doc, {}) for doc in documents])
    return [str(doc["metadata"]["name"]) for doc in documents]

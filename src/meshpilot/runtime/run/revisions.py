"""Which control plane a pod started by `meshpilot run` belongs to: its revision.

Injection: the pod's and its namespace's labels choose a tag or revision, as the API server
chooses a webhook (`inject.webhook_target`, the store's `istio-revision-tag-<tag>` and
`istio-sidecar-injector[-<rev>]` webhook configurations); the pod is then injected by that
revision's injector ConfigMap, which writes the revision into `sidecar.istio.io/status`.
Without a webhook configuration for the label, the store's default injector decides (the
behaviour before revisions).

Connection: the agent of a pod of revision R dials R's control plane: the TLS socket in
the record of a running `meshpilot discovery --revision R`, or the operator's socket
(`install.operator_record.revision_socket_dir`); `--secure-uds` when R has neither.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.inject.config import Injector
from meshpilot.inject.policy import REV_LABEL, STATUS_ANNOTATION
from meshpilot.inject.store_injector import StoreInjector
from meshpilot.inject.webhook_target import served_names, webhook_target
from meshpilot.install.operator_record import revision_socket_dir
from meshpilot.security.control_plane_record import live_records
from meshpilot.store.base import StoreSnapshot

__all__ = ["RevisionInjectors", "pod_revision", "revision_socket"]

JSON = dict[str, Any]
_TAG_PREFIX = "istio-revision-tag-"


class _Snapshots(Protocol):
    def snapshot(self) -> StoreSnapshot: ...


class RevisionInjectors:
    """The injector (and the names it serves) of the revision a pod's labels select."""

    def __init__(self, store: _Snapshots) -> None:
        self.store = store
        self._injectors: dict[str, StoreInjector] = {}

    def __call__(
        self, namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str]
    ) -> tuple[Injector, frozenset[str]] | None:
        """None: no webhook configuration serves the selected tag or revision."""
        objects = self.store.snapshot().objects
        target = webhook_target(objects, namespace_labels, pod_labels)
        if target is None:
            return None
        revision = target.revision or "default"
        injector = self._injectors.setdefault(revision, StoreInjector(self.store, revision))
        return injector(), served_names(objects, revision) | {target.chosen}

    def revision_of(self, pod: JSON) -> str:
        """The revision whose control plane the pod's proxy dials: the injecting one, or
        for a pod that runs its own proxy (a gateway) its `istio.io/rev` label, a tag
        there standing for the tag's revision (Istio's gateway injection)."""
        injected = pod_revision(pod)
        if injected:
            return injected
        label = ((pod.get("metadata") or {}).get("labels") or {}).get(REV_LABEL) or ""
        if not label:
            return ""
        tag = self.store.snapshot().objects.get(
            ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", _TAG_PREFIX + label)
        )
        if tag is not None:
            return str(tag.model.metadata.labels.get(REV_LABEL) or label)
        return str(label)


def pod_revision(pod: JSON) -> str:
    """The revision that injected the pod (its status annotation); "" if not injected."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        status = json.loads(annotations.get(STATUS_ANNOTATION) or "{}")
    except ValueError:
        return ""
    revision = status.get("revision") if isinstance(status, dict) else None
    return revision if isinstance(revision, str) else ""


def revision_socket(ca_dir: Path, revision: str) -> Path | None:
    """The TLS Unix socket of `revision`'s control plane on this machine; None if none runs.
    Only records that name a revision count: a plain `meshpilot discovery` is --secure-uds."""
    if not revision:
        return None
    found = [r for r in live_records(ca_dir) if r.revision == revision and r.secure_uds]
    if found:
        return Path(found[-1].secure_uds)
    operator_socket = revision_socket_dir(ca_dir, revision) / "secure.sock"
    return operator_socket if operator_socket.exists() else None

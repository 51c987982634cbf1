"""Which control plane injects a pod created on this machine: the API server's choice,
made from the store's MutatingWebhookConfigurations (for `meshpilot run`).

The pod's and its namespace's labels choose a revision or tag (`policy.webhook_revision`);
a tag's configuration `istio-revision-tag-<tag>` names its revision (label `istio.io/rev`)
and carries the client config of that revision's webhook; a revision's own configuration
is `istio-sidecar-injector[-<rev>]`. The url and caBundle there are the ones the control
plane published when it started (inject/webhook_store.py).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.webhook_configuration import MutatingWebhookConfiguration
from meshpilot.config.objects import ConfigObject
from meshpilot.inject.policy import webhook_revision
from meshpilot.inject.webhook_config import webhook_config_name

__all__ = ["WebhookTarget", "served_names", "webhook_target"]

_TAG_PREFIX = "istio-revision-tag-"


@dataclass(frozen=True, slots=True)
class WebhookTarget:
    chosen: str  # the label value that selected it: a tag or a revision
    revision: str  # the revision whose control plane injects
    url: str  # "" when the control plane has not published its address yet
    ca_bundle_pem: bytes
    configuration: str  # the MutatingWebhookConfiguration's name


def _config(objects: Mapping[ConfigKey, ConfigObject[Any]], name: str) -> Any:
    found = objects.get(ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", name))
    model = found.model if found is not None else None
    return model if isinstance(model, MutatingWebhookConfiguration) else None


def webhook_target(
    objects: Mapping[ConfigKey, ConfigObject[Any]],
    namespace_labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
) -> WebhookTarget | None:
    """The webhook the pod goes to; None when no label selects one or nothing serves the
    selected tag or revision (Kubernetes: no webhook matches, the pod runs uninjected)."""
    chosen, _ = webhook_revision(namespace_labels, pod_labels)
    if chosen is None:
        return None
    config = _config(objects, _TAG_PREFIX + chosen)
    if config is None:
        config = _config(objects, webhook_config_name(chosen))
    if config is None or not config.webhooks:
        return None
    client = config.webhooks[0].client_config
    revision = config.metadata.labels.get("istio.io/rev", chosen)
    return WebhookTarget(
        chosen,
        revision,
        client.url or "",
        base64.b64decode(client.ca_bundle) if client.ca_bundle else b"",
        config.metadata.name,
    )


def served_names(objects: Mapping[ConfigKey, ConfigObject[Any]], revision: str) -> frozenset[str]:
    """The revision and every tag pointing at it: `should_inject`'s `revisions` for the
    control plane of `revision`."""
    rev = revision or "default"
    tags = {
        obj.model.metadata.labels.get("istio.io/tag", "")
        for key, obj in objects.items()
        if key.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION
        and key.name.startswith(_TAG_PREFIX)
        and obj.model.metadata.labels.get("istio.io/rev") == rev
    }
    return frozenset({rev} | tags) - {""}

"""Revision tags (istioctl tag, spec lifecycle §5.4, checklist D): MutatingWebhookConfiguration
`istio-revision-tag-<tag>` labelled `istio.io/tag=<tag>`, `istio.io/rev=<rev>`, whose webhooks
select the tag (namespaces labelled `istio.io/rev=<tag>`) and call the revision's webhook.

Refusals: the revision has no (or more than one) canonical webhook configuration (labelled
`istio.io/rev=<rev>`, no `istio.io/tag`); the tag is the name of a revision (except
`default`); the tag exists and `overwrite` is off. Tag `default` also deactivates the legacy
`istio-injection=enabled` webhooks of the default revision's own configuration.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.kube.core import Namespace
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.inject.webhook_config import mutating_webhook_configuration, webhook_config_name

__all__ = [
    "TAG_PREFIX",
    "TagError",
    "TagRow",
    "canonical_webhooks",
    "deactivated_default",
    "revisions",
    "tag_manifest",
    "tag_rows",
]

TAG_PREFIX = "istio-revision-tag-"
REV_LABEL = "istio.io/rev"
TAG_LABEL = "istio.io/tag"
_NEVER_MATCH = {"matchLabels": {"istio.io/deactivated": "never-match"}}
Manifest = dict[str, Any]
Objects = Mapping[ConfigKey, ConfigObject[Any]]


class TagError(MeshpilotError):
    """A tag that cannot be set or removed; nothing was written."""


@dataclass(frozen=True, slots=True)
class TagRow:
    tag: str
    revision: str
    namespaces: tuple[str, ...]


def _labels(obj: ConfigObject[Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = obj.model.metadata.labels
    return labels


def _webhook_configs(objects: Objects) -> list[tuple[ConfigKey, ConfigObject[Any]]]:
    return [
        (k, o) for k, o in sorted(objects.items()) if k.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION
    ]


def canonical_webhooks(objects: Objects, revision: str) -> list[ConfigKey]:
    """The revision's own injector configurations: `istio.io/rev=<rev>,!istio.io/tag`."""
    return [
        k
        for k, o in _webhook_configs(objects)
        if _labels(o).get(REV_LABEL) == revision and TAG_LABEL not in _labels(o)
    ]


def revisions(objects: Objects) -> set[str]:
    return {
        _labels(o)[REV_LABEL]
        for _, o in _webhook_configs(objects)
        if REV_LABEL in _labels(o) and TAG_LABEL not in _labels(o)
    }


def tag_manifest(
    objects: Objects, manifests: Mapping[ConfigKey, Manifest], tag: str, revision: str,
    *, overwrite: bool,
) -> Manifest:  # fmt: skip
    """The tag's configuration, checked against the store (`manifests`: raw objects)."""
    canonical = canonical_webhooks(objects, revision)
    if len(canonical) != 1:
        found = "no" if not canonical else "more than one"
        raise TagError(
            f'cannot set tag "{tag}": {found} MutatingWebhookConfiguration with revision '
            f'"{revision}" (labelled istio.io/rev={revision}, without istio.io/tag); '
            "is the revision installed?"
        )
    if tag != "default" and tag in revisions(objects):
        raise TagError(
            f'cannot create revision tag "{tag}": there is already a revision named "{tag}"'
        )
    key = ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", TAG_PREFIX + tag)
    if key in objects and not overwrite:
        raise TagError(f'revision tag "{tag}" already exists, and --overwrite is false')
    source = manifests[canonical[0]]
    client = copy.deepcopy(((source.get("webhooks") or [{}])[0]).get("clientConfig") or {})
    out = mutating_webhook_configuration(b"", tag)
    for hook in out["webhooks"]:
        hook["clientConfig"] = copy.deepcopy(client)
    out["metadata"] = {
        "name": TAG_PREFIX + tag,
        "labels": {"app": "sidecar-injector", REV_LABEL: revision, TAG_LABEL: tag},
    }
    return out


def deactivated_default(manifests: Mapping[ConfigKey, Manifest]) -> Manifest | None:
    """The default revision's own configuration with its legacy webhooks (`namespace.`,
    `object.`) never matching, as `istioctl tag set default` leaves it; None if none."""
    key = ConfigKey(Kind.MUTATING_WEBHOOK_CONFIGURATION, "", webhook_config_name(""))
    source = manifests.get(key)
    if source is None:
        return None
    out = copy.deepcopy(source)
    for hook in out.get("webhooks") or []:
        if str(hook.get("name", "")).split(".")[0] in ("namespace", "object"):
            hook["namespaceSelector"] = copy.deepcopy(_NEVER_MATCH)
            hook["objectSelector"] = copy.deepcopy(_NEVER_MATCH)
    return None if out == source else out


def tag_rows(objects: Objects) -> list[TagRow]:
    """Every tag, its revision and the namespaces labelled `istio.io/rev=<tag>`."""
    using: dict[str, list[str]] = {}
    for key, obj in sorted(objects.items()):
        if isinstance(obj.model, Namespace) and REV_LABEL in _labels(obj):
            using.setdefault(_labels(obj)[REV_LABEL], []).append(key.name)
    rows = []
    for key, obj in _webhook_configs(objects):
        tag = _labels(obj).get(TAG_LABEL)
        if tag is not None and key.name.startswith(TAG_PREFIX):
            rows.append(TagRow(tag, _labels(obj).get(REV_LABEL, ""), tuple(using.get(tag, ()))))
    return rows

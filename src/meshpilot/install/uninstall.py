"""What `meshpilot uninstall` removes from the store.

`--revision R`: R's IstioOperators and every object an install of R wrote (labelled
`istio.io/rev=R` with an `operator.istio.io/component`), and R's injector webhook
configuration; revision tags stay (istioctl keeps `istio-revision-tag-*`), with a warning
for each one still pointing at R. `--purge`: every IstioOperator, installed object, injector
webhook configuration and tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.install.spec import IstioOperator

__all__ = ["Removal", "plan_purge", "plan_uninstall"]

REV_LABEL = "istio.io/rev"
TAG_LABEL = "istio.io/tag"
COMPONENT_LABEL = "operator.istio.io/component"
_INJECTOR = "istio-sidecar-injector"


@dataclass(frozen=True, slots=True)
class Removal:
    keys: list[ConfigKey]
    warnings: list[str]


def _labels(obj: ConfigObject[Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = obj.model.metadata.labels
    return labels


def plan_uninstall(objects: Mapping[ConfigKey, ConfigObject[Any]], revision: str) -> Removal:
    """The keys of `revision` ("" or "default": the default revision); a revision nothing
    was installed for is a clear error (MeshpilotError raised by the caller)."""
    rev = revision if revision and revision != "default" else ""
    label = rev or "default"
    keys: list[ConfigKey] = []
    warnings: list[str] = []
    for key, obj in sorted(objects.items()):
        labels = _labels(obj)
        if isinstance(obj.model, IstioOperator):
            if obj.model.revision == rev:
                keys.append(key)
        elif labels.get(REV_LABEL) == label and TAG_LABEL in labels:
            warnings.append(
                f'revision tag "{labels[TAG_LABEL]}" still points at revision {label}: move '
                f"it (meshpilot tag set {labels[TAG_LABEL]} --revision <other> --overwrite) "
                f"or remove it (meshpilot tag remove {labels[TAG_LABEL]})"
            )
        elif labels.get(REV_LABEL) == label and (
            COMPONENT_LABEL in labels
            or (key.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION and key.name.startswith(_INJECTOR))
        ):
            keys.append(key)
    return Removal(keys, warnings)


def plan_purge(objects: Mapping[ConfigKey, ConfigObject[Any]]) -> Removal:
    keys = [
        key
        for key, obj in sorted(objects.items())
        if isinstance(obj.model, IstioOperator)
        or COMPONENT_LABEL in _labels(obj)
        or (
            key.kind is Kind.MUTATING_WEBHOOK_CONFIGURATION
            and key.name.startswith((_INJECTOR, "istio-revision-tag-"))
        )
    ]
    return Removal(keys, [])

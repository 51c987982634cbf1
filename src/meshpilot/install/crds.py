"""The Istio CustomResourceDefinitions, with schemas generated from meshpilot's typed models.

One CRD per Istio kind meshpilot reads (config/models.py) and the IstioOperator's own; every
API version meshpilot accepts is served, the first one stored. kubectl then refuses, at
apply time, what meshpilot would refuse when it reads the object.
"""

from __future__ import annotations

from typing import Any

from meshpilot.config.kinds import ISTIO_API_GROUPS, Kind, accepted_api_versions, api_group
from meshpilot.config.models import MODEL_BY_KIND
from meshpilot.install.schema import structural_schema
from meshpilot.install.spec import OperatorSpec

__all__ = ["istio_crds"]

_SHORT_NAMES: dict[str, list[str]] = {
    "VirtualService": ["vs"],
    "DestinationRule": ["dr"],
    "Gateway": ["gw"],
    "ServiceEntry": ["se"],
    "WorkloadEntry": ["we"],
    "WorkloadGroup": ["wg"],
    "PeerAuthentication": ["pa"],
    "RequestAuthentication": ["ra"],
    "AuthorizationPolicy": ["ap"],
    "IstioOperator": ["iop", "io"],
}


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"


def _crd(kind: str, group: str, versions: list[str], spec_schema: dict[str, Any]) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": spec_schema,
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    plural = _plural(kind)
    names: dict[str, Any] = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "categories": ["istio-io"],
    }
    if kind in _SHORT_NAMES:
        names["shortNames"] = _SHORT_NAMES[kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{group}",
            "labels": {"app": "istio-pilot", "chart": "istio", "heritage": "meshpilot"},
        },
        "spec": {
            "group": group,
            "names": names,
            "scope": "Namespaced",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
                for i, version in enumerate(versions)
            ],
        },
    }


def istio_crds() -> list[dict[str, Any]]:
    """Every Istio CRD, sorted by name (the order of Istio's crd-all.gen.yaml)."""
    out = []
    for kind, model in MODEL_BY_KIND.items():
        api_versions = accepted_api_versions(Kind(kind))
        group = api_group(api_versions[0])
        if group not in ISTIO_API_GROUPS:
            continue
        versions = [v.rpartition("/")[2] for v in api_versions]
        spec_type = model.model_fields["spec"].annotation
        out.append(_crd(str(kind), group, versions, structural_schema(spec_type)))
    out.append(
        _crd("IstioOperator", "install.istio.io", ["v1alpha1"], structural_schema(OperatorSpec))
    )
    return sorted(out, key=lambda crd: str(crd["metadata"]["name"]))

"""What `meshpilot install` writes into the live store, in one write: the IstioOperator as
installed state, the revision's mesh config and injector ConfigMaps and its injector
MutatingWebhookConfiguration (the control plane fills in caBundle and url when it starts),
and, once the store knows Deployments, the gateways for `meshpilot run` to start.

`plan_install` refuses what istioctl refuses (a second IstioOperator for one revision, an
upgrade of more than two minor versions without --force) before anything is written.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.objects import ConfigObject
from meshpilot.install.load import ResolvedOperator
from meshpilot.install.manifest import manifest_objects
from meshpilot.install.render.context import K8sObject
from meshpilot.install.spec import IstioOperator, IstioOperatorError
from meshpilot.install.versions import installed_version, minor_skew

__all__ = [
    "VERSION_ANNOTATION",
    "InstallPlan",
    "installed_operators",
    "installed_state_name",
    "plan_install",
    "store_kind",
]

VERSION_ANNOTATION = "install.meshpilot.io/version"
_GATEWAY_COMPONENTS = ("IngressGateways", "EgressGateways")
_COMPONENT_LABEL = "operator.istio.io/component"


@dataclass(frozen=True, slots=True)
class InstallPlan:
    revision: str  # "" for the default revision
    version: str
    documents: list[K8sObject]
    warnings: list[str] = field(default_factory=list)
    gateways: list[str] = field(default_factory=list)  # names of the gateways written
    gateways_left: list[str] = field(default_factory=list)  # enabled, but not storable


def store_kind(obj: K8sObject) -> Kind | None:
    """The store kind of a rendered object, if the store holds that kind (Deployment is
    added by `meshpilot run`'s work; until then gateways are not written)."""
    try:
        return Kind(str(obj.get("kind", "")))
    except ValueError:
        return None


def installed_state_name(revision: str) -> str:
    """istioctl's name of the installed state: `installed-state[-<rev>]`."""
    return f"installed-state-{revision}" if revision else "installed-state"


def installed_operators(objects: dict[ConfigKey, ConfigObject[Any]]) -> list[IstioOperator]:
    return [
        obj.model
        for key, obj in sorted(objects.items())
        if key.kind is Kind.ISTIO_OPERATOR and isinstance(obj.model, IstioOperator)
    ]


def _operator_document(resolved: ResolvedOperator, version: str) -> K8sObject:
    operator = resolved.operator
    revision = operator.revision
    metadata = operator.metadata.model_dump(by_alias=True, exclude_defaults=True)
    metadata["name"] = metadata.get("name") or installed_state_name(revision)
    metadata["namespace"] = operator.spec.namespace
    metadata.setdefault("annotations", {})[VERSION_ANNOTATION] = version
    return {
        "apiVersion": "install.istio.io/v1alpha1",
        "kind": "IstioOperator",
        "metadata": metadata,
        "spec": copy.deepcopy(resolved.spec_tree),
    }


def _checks(
    current: list[IstioOperator], name: str, namespace: str, revision: str, version: str
) -> tuple[list[str], list[str]]:
    """(refusals, warnings) of installing `revision` at `version` beside `current`."""
    refusals: list[str] = []
    warnings: list[str] = []
    for other in current:
        same = (other.metadata.name, other.metadata.namespace) == (name, namespace)
        if other.revision == revision and not same:
            refusals.append(
                f"IstioOperator {other.metadata.namespace}/{other.metadata.name} already "
                f"installs revision {revision or 'default'!r}: two IstioOperators cannot "
                "share a revision; edit that one, or install with another --revision"
            )
        old = other.metadata.annotations.get(VERSION_ANNOTATION) or installed_version(other)
        skew = minor_skew(old, version)
        if skew is None:
            continue
        warnings.append(f"Istio is being upgraded from {skew.old} -> {skew.new}")
        if skew.too_far:
            refusals.append(
                f"upgrade from {skew.old} to {skew.new} skips more than two minor versions "
                "(a canary upgrade may move at most two); upgrade in steps, or pass --force"
            )
    return refusals, sorted(set(warnings))


def plan_install(
    resolved: ResolvedOperator,
    current: dict[ConfigKey, ConfigObject[Any]],
    *,
    force: bool = False,
) -> InstallPlan:
    """The documents of one install, or IstioOperatorError naming why it is refused."""
    operator = resolved.operator
    revision = operator.revision
    version = installed_version(operator)
    document = _operator_document(resolved, version)
    name, namespace = document["metadata"]["name"], document["metadata"]["namespace"]
    refusals, warnings = _checks(installed_operators(current), name, namespace, revision, version)
    too_far = [r for r in refusals if "--force" in r]
    if force:
        refusals = [r for r in refusals if r not in too_far]
    if refusals:
        raise IstioOperatorError("; ".join(refusals))
    if warnings:
        warnings.append(
            "Before upgrading, you may wish to use 'meshpilot analyze' to check for IST0002 "
            "and IST0135 deprecation warnings."
        )
    documents: list[K8sObject] = [document]
    gateways: list[str] = []
    left: list[str] = []
    deployable = store_kind({"kind": "Deployment"}) is not None
    for obj in manifest_objects(resolved):
        component = obj["metadata"].get("labels", {}).get(_COMPONENT_LABEL, "")
        kind = store_kind(obj)
        if component == "Pilot" and kind in (Kind.CONFIG_MAP, Kind.MUTATING_WEBHOOK_CONFIGURATION):
            documents.append(obj)
        elif component in _GATEWAY_COMPONENTS:
            if obj["kind"] == "Deployment":
                (gateways if deployable else left).append(obj["metadata"]["name"])
            if deployable and kind is not None:
                documents.append(obj)
    return InstallPlan(revision, version, documents, warnings, gateways, left)

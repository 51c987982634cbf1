"""`manifest generate`: the Kubernetes objects of every enabled component, ordered for apply.

Components come in istioctl's order (Base, Pilot, IngressGateways, EgressGateways,
IstiodRemote); within one, objects are ordered as istioctl's DefaultObjectOrder puts them
(CRDs first, accounts and roles before their bindings, ConfigMaps before the Deployments that
mount them, HPAs after their Deployment, Services last), then by the order rendered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from meshpilot.install.load import ResolvedOperator
from meshpilot.install.render.base import base_objects
from meshpilot.install.render.configmaps import injector_config_map, mesh_config_map
from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.render.gateways import gateway_objects
from meshpilot.install.render.istiod import istiod_objects
from meshpilot.install.render.overlay import apply_overlay
from meshpilot.install.render.rbac import istiod_rbac
from meshpilot.install.render.remote import remote_objects
from meshpilot.install.render.webhooks import injector_webhook, validating_webhook
from meshpilot.install.spec import IstioOperatorError
from meshpilot.install.values import GlobalValues, PilotValues

__all__ = ["COMPONENTS", "NoAliasDumper", "manifest_objects", "manifest_yaml", "object_key"]

_KIND_ORDER = {
    "CustomResourceDefinition": -1000,
    "ServiceAccount": 1,
    "ClusterRole": 1,
    "ClusterRoleBinding": 2,
    "ValidatingWebhookConfiguration": 3,
    "ConfigMap": 100,
    "Secret": 100,
    "Deployment": 1000,
    "HorizontalPodAutoscaler": 1001,
    "Service": 10000,
}


def _pilot(ctx: Context) -> list[K8sObject]:
    pilot = ctx.values.pilot or PilotValues()
    global_values = ctx.global_values or GlobalValues()
    objects = istiod_rbac(ctx, "Pilot")
    if pilot.config_map is not False:
        objects.append(mesh_config_map(ctx, "Pilot"))
    if not global_values.omit_sidecar_injector_config_map:
        objects.append(injector_config_map(ctx, "Pilot"))
    objects += istiod_objects(ctx)
    objects += [injector_webhook(ctx, "Pilot"), validating_webhook(ctx, "Pilot")]
    return apply_overlay(objects, ctx.operator.spec.components.pilot.k8s, ctx.istiod)


def _ingress(ctx: Context) -> list[K8sObject]:
    return gateway_objects(ctx, "IngressGateways", ctx.operator.spec.components.ingress_gateways)


def _egress(ctx: Context) -> list[K8sObject]:
    return gateway_objects(ctx, "EgressGateways", ctx.operator.spec.components.egress_gateways)


# name -> (is it enabled, its objects)
COMPONENTS: dict[str, tuple[Callable[[Context], bool], Callable[[Context], list[K8sObject]]]] = {
    "Base": (lambda c: bool(c.operator.spec.components.base.enabled), base_objects),
    "Pilot": (lambda c: bool(c.operator.spec.components.pilot.enabled), _pilot),
    "IngressGateways": (lambda c: True, _ingress),
    "EgressGateways": (lambda c: True, _egress),
    "IstiodRemote": (
        lambda c: bool(c.operator.spec.components.istiod_remote.enabled),
        remote_objects,
    ),
}
_ALIASES = {
    "istiod": "Pilot",
    "crds": "Base",
    "ingressgateway": "IngressGateways",
    "egressgateway": "EgressGateways",
}


def _component_name(name: str) -> str:
    by_lower = {n.lower(): n for n in COMPONENTS}
    found = by_lower.get(name.lower()) or _ALIASES.get(name.lower())
    if found is None:
        if name.lower() == "cni":
            raise IstioOperatorError("component Cni is not supported (meshpilot uses istio-init)")
        raise IstioOperatorError(f"unknown component {name!r}; components: {', '.join(COMPONENTS)}")
    return found


def object_key(obj: K8sObject) -> tuple[str, str, str, str]:
    """(apiVersion group, kind, namespace, name): an object's identity in a manifest."""
    meta = obj.get("metadata") or {}
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    return (
        group,
        str(obj.get("kind", "")),
        str(meta.get("namespace", "")),
        str(meta.get("name", "")),
    )


def manifest_objects(resolved: ResolvedOperator, component: str | None = None) -> list[K8sObject]:
    """The objects of every enabled component (or of `component` only), in apply order."""
    ctx = Context(resolved)
    wanted = _component_name(component) if component else None
    out: list[K8sObject] = []
    for name, (enabled, render) in COMPONENTS.items():
        if (wanted is None or wanted == name) and enabled(ctx):
            objects = render(ctx)
            order = sorted(
                range(len(objects)), key=lambda i: (_KIND_ORDER.get(objects[i]["kind"], 1000), i)
            )
            out.extend(objects[i] for i in order)
    return out


class NoAliasDumper(yaml.SafeDumper):
    # a value shared by two webhooks is written twice, never as a YAML anchor
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text_block(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # ConfigMap texts (mesh, config, values) read as blocks, as istioctl prints them
    style = (
        "|"
        if "\n" in text and not any(line != line.rstrip() for line in text.splitlines())
        else None
    )
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


NoAliasDumper.add_representer(str, _text_block)


def manifest_yaml(objects: list[K8sObject]) -> str:
    """The YAML stream istioctl prints: one document per object, keys in a stable order."""

    def dump(obj: Any) -> str:
        return yaml.dump(
            obj, Dumper=NoAliasDumper, sort_keys=False, default_flow_style=False, width=1_000_000
        )

    return "".join(f"---\n{dump(obj)}" for obj in objects)

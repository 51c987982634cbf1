"""ConfigMaps `istio-<rev>` (key `mesh`: the mesh config) and `istio-sidecar-injector-<rev>`
(keys `config` and `values`), in the layout the control plane and `kube-inject` read."""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml

from meshpilot.inject.config import InjectorConfig
from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.values import ProxyValues, WebhookValues

__all__ = ["injector_config_map", "mesh_config_map", "mesh_tree"]

_TRACER_ADDRESS = {
    "zipkin": ("zipkin", "zipkin.{ns}:9411"),
    "datadog": ("datadog", "$(HOST_IP):8126"),
    "lightstep": ("lightstep", "lightstep-satellite.lightstep:9411"),
}


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=1_000_000)


def mesh_tree(ctx: Context) -> dict[str, Any]:
    """The mesh config as istiod's chart writes it: the spec's meshConfig over the chart's
    defaults (discovery address of this revision's istiod, root namespace, trust domain)."""
    user = copy.deepcopy(ctx.resolved.spec_tree.get("meshConfig") or {})
    mesh: dict[str, Any] = {
        "rootNamespace": ctx.namespace,
        "trustDomain": "cluster.local",
        "enablePrometheusMerge": True,
        **user,
    }
    default_config = dict(mesh.get("defaultConfig") or {})
    default_config.setdefault("discoveryAddress", f"{ctx.istiod}.{ctx.namespace}.svc:15012")
    proxy = ctx.global_values.proxy or ProxyValues()
    if proxy.tracer in _TRACER_ADDRESS and "tracing" not in default_config:
        name, address = _TRACER_ADDRESS[proxy.tracer]
        default_config["tracing"] = {name: {"address": address.format(ns=ctx.namespace)}}
    mesh["defaultConfig"] = default_config
    return mesh


def mesh_config_map(ctx: Context, component: str) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.meta(ctx.suffixed("istio"), component),
        "data": {"mesh": _yaml(mesh_tree(ctx)), "meshNetworks": "networks: {}\n"},
    }


def _injector_values(ctx: Context) -> dict[str, Any]:
    values = copy.deepcopy(ctx.resolved.spec_tree.get("values") or {})
    global_values = values.setdefault("global", {})
    global_values["hub"], global_values["tag"] = ctx.hub, ctx.tag
    global_values.setdefault("istioNamespace", ctx.namespace)
    values["revision"] = ctx.revision
    return values


def injector_config_map(ctx: Context, component: str) -> K8sObject:
    webhook = ctx.values.sidecar_injector_webhook or WebhookValues()
    proxy = ctx.global_values.proxy or ProxyValues()
    config = InjectorConfig.model_validate(
        {
            "policy": proxy.auto_inject or "enabled",
            "defaultTemplates": webhook.default_templates or ["sidecar"],
            "injectedAnnotations": webhook.injected_annotations or {},
            "neverInjectSelector": webhook.never_inject_selector or [],
            "alwaysInjectSelector": webhook.always_inject_selector or [],
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": ctx.meta(ctx.suffixed("istio-sidecar-injector"), component),
        "data": {
            "config": _yaml(config.model_dump(by_alias=True, mode="json", exclude_defaults=False)),
            "values": json.dumps(_injector_values(ctx), indent=2, sort_keys=True) + "\n",
        },
    }

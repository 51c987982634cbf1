"""The injector MutatingWebhookConfiguration `istio-sidecar-injector-<rev>` and the
ValidatingWebhookConfiguration `istio-validator-<rev>-<ns>`, selectors as in seed spec §5.2."""

from __future__ import annotations

from typing import Any

from meshpilot.install.render.context import Context, K8sObject
from meshpilot.install.values import WebhookValues

__all__ = ["injector_webhook", "validating_webhook"]


def _exists(key: str, present: bool) -> dict[str, Any]:
    return {"key": key, "operator": "Exists" if present else "DoesNotExist"}


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


_NOT_OPTED_OUT = {"key": "sidecar.istio.io/inject", "operator": "NotIn", "values": ["false"]}


def _webhook(
    name: str, client: dict[str, Any], ns: list[Any], obj: list[Any], reinvoke: str
) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": client,
        "sideEffects": "None",
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "*",
            }
        ],
        "failurePolicy": "Fail",
        "reinvocationPolicy": reinvoke,
        "admissionReviewVersions": ["v1beta1", "v1"],
        "namespaceSelector": {"matchExpressions": ns},
        "objectSelector": {"matchExpressions": obj},
    }


def injector_webhook(
    ctx: Context, component: str, client: dict[str, Any] | None = None
) -> K8sObject:
    """The per-revision injector MWC; `client` replaces the istiod Service (istiodRemote)."""
    values = ctx.values.sidecar_injector_webhook or WebhookValues()
    reinvoke = values.reinvocation_policy or "Never"
    client = client or {
        "service": {"name": ctx.istiod, "namespace": ctx.namespace, "path": "/inject", "port": 443}
    }
    rev = ctx.revision_label
    hooks = [
        _webhook(
            "rev.namespace.sidecar-injector.istio.io",
            client,
            [_in("istio.io/rev", rev), _exists("istio-injection", False)],
            [_NOT_OPTED_OUT],
            reinvoke,
        ),
        _webhook(
            "rev.object.sidecar-injector.istio.io",
            client,
            [_exists("istio.io/rev", False), _exists("istio-injection", False)],
            [_NOT_OPTED_OUT, _in("istio.io/rev", rev)],
            reinvoke,
        ),
    ]
    if not ctx.revision:  # the default revision also serves the legacy istio-injection label
        hooks.append(
            _webhook(
                "namespace.sidecar-injector.istio.io",
                client,
                [_in("istio-injection", "enabled")],
                [_NOT_OPTED_OUT],
                reinvoke,
            )
        )
        hooks.append(
            _webhook(
                "object.sidecar-injector.istio.io",
                client,
                [_exists("istio-injection", False), _exists("istio.io/rev", False)],
                [_in("sidecar.istio.io/inject", "true"), _exists("istio.io/rev", False)],
                reinvoke,
            )
        )
        if values.enable_namespaces_by_default:
            hooks.append(
                _webhook(
                    "auto.sidecar-injector.istio.io",
                    client,
                    [_exists("istio-injection", False), _exists("istio.io/rev", False)],
                    [_exists("sidecar.istio.io/inject", False), _exists("istio.io/rev", False)],
                    reinvoke,
                )
            )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": ctx.meta(
            ctx.suffixed("istio-sidecar-injector"), component, False, app="sidecar-injector"
        ),
        "webhooks": hooks,
    }


def validating_webhook(ctx: Context, component: str) -> K8sObject:
    selector = (
        [_in("istio.io/rev", ctx.revision)] if ctx.revision else [_exists("istio.io/rev", False)]
    )
    groups = [
        "security.istio.io",
        "networking.istio.io",
        "telemetry.istio.io",
        "extensions.istio.io",
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": ctx.meta(
            f"{ctx.suffixed('istio-validator')}-{ctx.namespace}",
            component,
            False,
            app="istiod",
            istio="istiod",
        ),
        "webhooks": [
            {
                "name": "rev.validation.istio.io",
                "clientConfig": {
                    "service": {
                        "name": ctx.istiod,
                        "namespace": ctx.namespace,
                        "path": "/validate",
                        "port": 443,
                    }
                },
                "rules": [
                    {
                        "operations": ["CREATE", "UPDATE"],
                        "apiGroups": groups,
                        "apiVersions": ["*"],
                        "resources": ["*"],
                    }
                ],
                "objectSelector": {"matchExpressions": selector},
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1beta1", "v1"],
            }
        ],
    }

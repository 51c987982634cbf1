"""MutatingWebhookConfiguration `istio-sidecar-injector[-<rev>]`, as Istio's chart writes it.

Two webhooks select by the revision label (spec lifecycle §5.2): `rev.namespace.` (namespace
`istio.io/rev In [<rev>]`, no `istio-injection` label) and `rev.object.` (neither namespace
label, pod `istio.io/rev In [<rev>]`); the default revision adds the two of the legacy label,
`namespace.` (`istio-injection=enabled`) and `object.` (pod `sidecar.istio.io/inject=true`).
Every pod labelled `sidecar.istio.io/inject=false` is left out by the selectors already.

failurePolicy is Istio's `Fail`: kube-apiserver refuses to create a pod it could not send
to the webhook (unreachable, a TLS error, over timeoutSeconds, a non-200 answer), so a pod
is never created without the sidecar it should have; the client (a ReplicaSet) retries.
`Ignore` would create such a pod without a sidecar. The caBundle is the mesh CA's root.
"""

from __future__ import annotations

import base64
from typing import Any

__all__ = ["mutating_webhook_configuration", "webhook_config_name"]

JSON = dict[str, Any]
_GROUP = "sidecar-injector.istio.io"


def webhook_config_name(revision: str = "") -> str:
    suffix = f"-{revision}" if revision and revision != "default" else ""
    return f"istio-sidecar-injector{suffix}"


def _exists(key: str) -> JSON:
    return {"key": key, "operator": "DoesNotExist"}


def _webhook(name: str, client: JSON, namespaces: list[JSON], objects: list[JSON]) -> JSON:
    return {
        "name": f"{name}.{_GROUP}",
        "clientConfig": client,
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ],
        "failurePolicy": "Fail",
        "reinvocationPolicy": "Never",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1beta1", "v1"],
        "namespaceSelector": {"matchExpressions": namespaces},
        "objectSelector": {"matchExpressions": objects},
    }


def mutating_webhook_configuration(
    ca_bundle_pem: bytes, revision: str = "", url: str = "", path: str = "/inject"
) -> JSON:
    """The MutatingWebhookConfiguration of `revision` ("" for the default). The webhook is
    reached at `url` when given (outside Kubernetes, e.g. https://127.0.0.1:15017/inject),
    else through the Service istiod[-<rev>] in istio-system on port 443 and `path`."""
    rev = revision or "default"
    service = f"istiod-{revision}" if revision and revision != "default" else "istiod"
    client: JSON = {"caBundle": base64.b64encode(ca_bundle_pem).decode()}
    if url:
        client["url"] = url
    else:
        client["service"] = {
            "name": service,
            "namespace": "istio-system",
            "path": path,
            "port": 443,
        }
    opt_out = {"key": "sidecar.istio.io/inject", "operator": "NotIn", "values": ["false"]}
    rev_in = {"key": "istio.io/rev", "operator": "In", "values": [rev]}
    webhooks = [
        _webhook("rev.namespace", client, [rev_in, _exists("istio-injection")], [opt_out]),
        _webhook(
            "rev.object",
            client,
            [_exists("istio.io/rev"), _exists("istio-injection")],
            [opt_out, rev_in],
        ),
    ]
    if rev == "default":
        legacy = {"key": "istio-injection", "operator": "In", "values": ["enabled"]}
        forced = {"key": "sidecar.istio.io/inject", "operator": "In", "values": ["true"]}
        webhooks += [
            _webhook("namespace", client, [legacy], [opt_out]),
            _webhook(
                "object",
                client,
                [_exists("istio-injection"), _exists("istio.io/rev")],
                [forced, _exists("istio.io/rev")],
            ),
        ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {
            "name": webhook_config_name(revision),
            "labels": {"app": "sidecar-injector", "istio.io/rev": rev},
        },
        "webhooks": webhooks,
    }

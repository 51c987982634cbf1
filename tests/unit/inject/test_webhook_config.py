"""The MutatingWebhookConfiguration selects exactly the pods the one policy sends to its
revision (spec lifecycle §5.2), and carries the CA root and the webhook's address."""

from __future__ import annotations

import base64
import itertools
from typing import Any

import pytest

from meshpilot.inject.policy import webhook_revision
from meshpilot.inject.selector import LabelSelector
from meshpilot.inject.webhook_config import mutating_webhook_configuration

ROOT = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
NAMESPACE_LABELS: list[dict[str, str]] = [
    {},
    {"istio-injection": "enabled"},
    {"istio-injection": "disabled"},
    {"istio.io/rev": "canary"},
    {"istio.io/rev": "default"},
    {"istio-injection": "enabled", "istio.io/rev": "canary"},
]
POD_LABELS: list[dict[str, str]] = [
    {},
    {"sidecar.istio.io/inject": "true"},
    {"sidecar.istio.io/inject": "false"},
    {"istio.io/rev": "canary"},
    {"istio.io/rev": "default"},
    {"istio.io/rev": "canary", "sidecar.istio.io/inject": "false"},
    {"istio.io/rev": "canary", "sidecar.istio.io/inject": "true"},
]


def matching(config: dict[str, Any], namespace: dict[str, str], pod: dict[str, str]) -> list[str]:
    """The webhooks of `config` kube-apiserver calls for a pod CREATE."""
    return [
        hook["name"]
        for hook in config["webhooks"]
        if LabelSelector.model_validate(hook["namespaceSelector"]).matches(namespace)
        and LabelSelector.model_validate(hook["objectSelector"]).matches(pod)
    ]


@pytest.mark.parametrize("revision", ["", "canary"])
def test_selectors_agree_with_the_policy(revision: str) -> None:
    config = mutating_webhook_configuration(ROOT, revision)
    rev = revision or "default"
    for namespace, pod in itertools.product(NAMESPACE_LABELS, POD_LABELS):
        chosen, _ = webhook_revision(namespace, pod)
        called = matching(config, namespace, pod)
        assert len(called) <= 1, (namespace, pod, called)  # never injected twice
        assert bool(called) == (chosen == rev), (namespace, pod, called, chosen)


def test_default_and_revision_configurations() -> None:
    default = mutating_webhook_configuration(ROOT)
    assert default["metadata"]["name"] == "istio-sidecar-injector"
    assert default["metadata"]["labels"] == {"app": "sidecar-injector", "istio.io/rev": "default"}
    assert [w["name"] for w in default["webhooks"]] == [
        "rev.namespace.sidecar-injector.istio.io",
        "rev.object.sidecar-injector.istio.io",
        "namespace.sidecar-injector.istio.io",
        "object.sidecar-injector.istio.io",
    ]
    canary = mutating_webhook_configuration(ROOT, "canary", url="https://127.0.0.1:15017/inject")
    assert canary["metadata"]["name"] == "istio-sidecar-injector-canary"
    assert len(canary["webhooks"]) == 2
    for hook in default["webhooks"] + canary["webhooks"]:
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1beta1", "v1"]
        assert hook["rules"] == [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            }
        ]
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ROOT
    assert default["webhooks"][0]["clientConfig"]["service"] == {
        "name": "istiod",
        "namespace": "istio-system",
        "path": "/inject",
        "port": 443,
    }
    assert canary["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:15017/inject"
    assert "service" not in canary["webhooks"][0]["clientConfig"]
    canary_service = mutating_webhook_configuration(ROOT, "canary")["webhooks"][1]
    assert canary_service["clientConfig"]["service"]["name"] == "istiod-canary"

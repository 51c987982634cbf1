"""The pods `meshpilot run` makes of Pods and Deployments: replicas named as a ReplicaSet's,
new names for a changed template (rollout restart), injection decided by the namespace's
labels as the webhook selectors decide in a cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from meshpilot.inject.config import parse_injector
from meshpilot.inject.kube_inject import inject_object
from meshpilot.runtime.run.env import RunSpecError
from meshpilot.runtime.run.workloads import pods_of, template_hash

INJECTOR = parse_injector()
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "command": ["sleep", "1000"]}]},
        },
    },
}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "solo", "namespace": "other"},
    "spec": {"containers": [{"name": "solo", "command": ["true"]}]},
}
ENABLED = {"shop": {"istio-injection": "enabled"}, "other": {"istio.io/rev": "default"}}


def test_replicas_named_and_injected_like_kube_inject() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
    pods = pods_of([DEPLOYMENT, service, {"kind": "List", "items": [POD]}], INJECTOR, ENABLED)
    assert [(p.namespace, p.injected) for p in pods] == [("shop", True)] * 3 + [("other", True)]
    hash_ = template_hash(DEPLOYMENT["spec"]["template"])
    names = [p.name for p in pods[:3]]
    assert len(set(names)) == 3 and all(n.startswith(f"web-{hash_}-") for n in names)
    assert all(len(n.rsplit("-", 1)[1]) == 5 for n in names)
    first = pods[0].pod
    assert first["metadata"]["labels"]["pod-template-hash"] == hash_
    assert first["metadata"]["ownerReferences"][0]["name"] == f"web-{hash_}"
    # the same containers as kube-inject of the Deployment (the owner is the Deployment)
    expected = inject_object(DEPLOYMENT, INJECTOR, [])["spec"]["template"]["spec"]
    assert first["spec"] == expected
    # the same input, the same names: a restart of `meshpilot run` finds its pods again
    assert [p.name for p in pods_of([DEPLOYMENT], INJECTOR, ENABLED)] == names


def test_changed_template_gives_new_names() -> None:
    restarted = copy.deepcopy(DEPLOYMENT)
    restarted["spec"]["template"]["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/restartedAt": "2026-11-29T02:00:00Z"
    }
    before = {p.name for p in pods_of([DEPLOYMENT], INJECTOR, ENABLED)}
    after = {p.name for p in pods_of([restarted], INJECTOR, ENABLED)}
    assert before.isdisjoint(after)


def test_namespace_labels_decide_as_the_webhook_selectors() -> None:
    pods = pods_of([DEPLOYMENT, POD], INJECTOR, {})
    assert not any(p.injected for p in pods)
    assert pods[0].reason == "no injection label selects an injector"
    opted_in = copy.deepcopy(POD)
    opted_in["metadata"]["labels"] = {"sidecar.istio.io/inject": "true"}
    assert pods_of([opted_in], INJECTOR, {})[0].injected
    canary = pods_of([POD], INJECTOR, {"other": {"istio.io/rev": "canary"}})[0]
    assert not canary.injected and "canary" in canary.reason


def test_bad_deployments_are_named() -> None:
    bad = copy.deepcopy(DEPLOYMENT)
    bad["spec"]["replicas"] = "two"
    with pytest.raises(RunSpecError, match=r"Deployment shop/web: spec.replicas must be"):
        pods_of([bad], INJECTOR, ENABLED)
    del bad["spec"]["template"]
    with pytest.raises(RunSpecError, match=r"Deployment shop/web: spec.template.spec"):
        pods_of([bad], INJECTOR, ENABLED)
    zero = copy.deepcopy(DEPLOYMENT)
    zero["spec"]["replicas"] = 0
    assert pods_of([zero], INJECTOR, ENABLED) == []

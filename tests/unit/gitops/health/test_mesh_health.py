"""The mesh's own kinds: Healthy when meshpilot accepts them, Degraded with the analyzer's
message when they point at nothing; the app's health follows."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff import ResourceKey, compare_app
from meshpilot.gitops.diff.tracking import with_tracking
from meshpilot.gitops.health import (
    HealthStatusCode,
    analyze_manifests,
    assess_app,
    overlay,
    resource_health,
)

VS_KEY = ResourceKey("networking.istio.io", "VirtualService", "shop", "reviews")


def _service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "reviews"},
        "spec": {"ports": [{"name": "http", "port": 9080}], "selector": {"app": "reviews"}},
    }


def _rule() -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "DestinationRule",
        "metadata": {"name": "reviews"},
        "spec": {"host": "reviews", "subsets": [{"name": "v1", "labels": {"version": "v1"}}]},
    }


def _vs(subset: str, gateway: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "hosts": ["reviews"],
        "http": [{"route": [{"destination": {"host": "reviews", "subset": subset}}]}],
    }
    if gateway:
        spec["gateways"] = [gateway]
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": "reviews"},
        "spec": spec,
    }


def _synced(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from meshpilot.gitops.diff import key_of

    out = []
    for obj in objs:
        key = key_of(obj, "shop")
        synced = with_tracking(obj, "shop-app", key)
        synced["metadata"]["namespace"] = key.namespace or None
        out.append(synced)
    return out


def test_accepted_istio_objects_are_healthy() -> None:
    targets = [_service(), _rule(), _vs("v1")]
    live = _synced(targets)
    findings = analyze_manifests(overlay(live, targets, "shop"))
    health = assess_app(compare_app("shop-app", targets, live, namespace="shop"), findings)
    assert health.status is HealthStatusCode.HEALTHY
    assert health.resources[VS_KEY] is not None


def test_virtual_service_to_missing_subset_and_gateway_is_degraded() -> None:
    targets = [_service(), _rule(), _vs("v2", gateway="shop-gateway")]
    live = _synced(targets)
    findings = analyze_manifests(overlay(live, targets, "shop"))
    health = resource_health(live[2], VS_KEY, findings)
    assert health is not None and health.status is HealthStatusCode.DEGRADED
    assert (
        'IST0101: spec.gateways[0]: Referenced gateway not found: "shop-gateway"' in health.message
    )
    assert 'Referenced host+subset in destinationrule not found: "reviews+v2"' in health.message
    app = assess_app(compare_app("shop-app", targets, live, namespace="shop"), findings)
    assert app.status is HealthStatusCode.DEGRADED
    assert app.message.startswith("networking.istio.io/VirtualService/shop/reviews: IST0101")


def test_objects_of_other_apps_in_the_store_count() -> None:
    """The gateway lives in the store, synced by another app: the reference resolves."""
    gateway = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "shop-gateway", "namespace": "shop"},
        "spec": {
            "selector": {"istio": "ingressgateway"},
            "servers": [
                {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}
            ],
        },
    }
    targets = [_service(), _rule(), _vs("v1", gateway="shop-gateway")]
    findings = analyze_manifests(overlay([gateway], targets, "shop"))
    messages = [d.message for d in findings.get(VS_KEY, ())]
    assert not any("gateway not found" in m for m in messages)


def test_invalid_live_object_is_degraded_with_the_validation_message() -> None:
    bad = {**_vs("v1"), "spec": {"hosts": [], "http": []}}
    live = _synced([bad])
    findings = analyze_manifests(live)
    health = resource_health(live[0], VS_KEY, findings)
    assert health is not None and health.status is HealthStatusCode.DEGRADED
    assert health.message == "spec: http, tcp or tls must be provided in virtual service"


def test_missing_target_makes_the_app_missing() -> None:
    targets = [_service()]
    health = assess_app(compare_app("shop-app", targets, [], namespace="shop"))
    assert health.status is HealthStatusCode.MISSING

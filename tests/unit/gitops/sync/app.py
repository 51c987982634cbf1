"""A realistic mesh app for the sync tests: Namespace, Secret, Service, ServiceEntry,
DestinationRule, Gateway and VirtualService, with sync waves -1/0/1."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff import key_of
from meshpilot.gitops.diff.tracking import with_tracking

WAVE = "argocd.argoproj.io/sync-wave"
SECRET_VALUE = "c3VwZXItc2VjcmV0LWtleQ=="


def manifest(
    api: str, kind: str, name: str, wave: int | None = None, **fields: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if wave is not None:
        meta["annotations"] = {WAVE: str(wave)}
    return {"apiVersion": api, "kind": kind, "metadata": meta, **fields}


def shop_app() -> list[dict[str, Any]]:
    net = "networking.istio.io/v1"
    return [
        manifest(net, "VirtualService", "reviews", 1, spec={"hosts": ["reviews"]}),
        manifest(net, "Gateway", "shop-gateway", 0, spec={"servers": []}),
        manifest(net, "DestinationRule", "reviews", 0, spec={"host": "reviews"}),
        manifest(net, "ServiceEntry", "payments", 0, spec={"hosts": ["pay.example.com"]}),
        manifest("v1", "Service", "reviews", spec={"ports": [{"port": 9080}]}),
        manifest("v1", "Secret", "shop-tls", -1, data={"tls.key": SECRET_VALUE}),
        manifest("v1", "Namespace", "shop"),
    ]


def synced(objs: list[dict[str, Any]], app: str = "shop-app") -> list[dict[str, Any]]:
    """The store after `app` synced `objs` into namespace shop."""
    out = []
    for obj in objs:
        key = key_of(obj, "shop")
        stored = with_tracking(obj, app, key)
        if key.namespace:
            stored["metadata"]["namespace"] = key.namespace
        out.append(stored)
    return out

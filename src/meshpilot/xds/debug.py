"""Data of the control plane's debug API (istiod's /debug/syncz, configz, registryz and
config_dump), as plain JSON-ready values; discovery/http.py serves them.

syncz: one entry per connected proxy with istiod's flat `<type>_sent` / `<type>_acked`
nonces (what `istioctl proxy-status` reads) plus, per type, the versions and nonces sent,
ACKed and NACKed, the NACK's error and a status (SYNCED, NOT SENT, STALE, NACKED).
config_dump: the shape of Envoy's /config_dump (typed dumps of clusters, listeners, routes,
endpoints and secrets, private keys redacted) for the config that proxy would get now.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.kube.core import Secret
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.registry.model import Service
from meshpilot.store.base import StoreSnapshot
from meshpilot.xds.connection import SHORT_TYPE, Connection, WatchedResource
from meshpilot.xds.generate import generate_proxy_config
from meshpilot.xds.patch import patch_problems
from meshpilot.xds.protos import TypeUrl

__all__ = ["config_dump", "configz", "registryz", "syncz"]

# istiod's SyncStatus field prefixes.
_FLAT = {
    TypeUrl.CLUSTER: "cluster",
    TypeUrl.LISTENER: "listener",
    TypeUrl.ROUTE: "route",
    TypeUrl.ENDPOINT: "endpoint",
    TypeUrl.SECRET: "secret",
    TypeUrl.EXTENSION_CONFIG: "extensionconfig",
}
_ADMIN = "type.googleapis.com/envoy.admin.v3."


def _time(stamp: float | None) -> str | None:
    return datetime.fromtimestamp(stamp, UTC).isoformat() if stamp else None


def _watched(w: WatchedResource) -> dict[str, Any]:
    return {
        "type_url": w.type_url,
        "status": w.status,
        "resource_names": ["*"] if w.wildcard else sorted(w.names),
        "version_sent": w.version_sent,
        "nonce_sent": w.nonce_sent,
        "version_acked": w.version_acked,
        "nonce_acked": w.nonce_acked,
        "nonce_nacked": w.nonce_nacked,
        "last_error": w.last_error,
        "sent_at": _time(w.sent_at),
        "acked_at": _time(w.acked_at),
    }


def syncz(connections: Iterable[Connection], control_plane: str = "") -> list[dict[str, Any]]:
    """`control_plane` is this control plane's id (istioctl's ISTIOD column)."""
    out = []
    for conn in sorted(connections, key=lambda c: c.id):
        entry: dict[str, Any] = {
            "proxy": conn.proxy.id,
            "connection_id": conn.id,
            "proxy_type": str(conn.proxy.type),
            "istio_version": conn.proxy.istio_version,
            "node_id": conn.node.node_id,
            "cluster_id": conn.node.cluster_id,
            "control_plane": control_plane,
            "stream": "delta" if conn.delta else "sotw",
            "peer": conn.peer,
            "connected_at": conn.connected_at.isoformat(),
            "push_version": conn.push.version,
            "types": {SHORT_TYPE.get(t, t): _watched(w) for t, w in sorted(conn.watched.items())},
        }
        for type_url, prefix in _FLAT.items():
            w = conn.watched.get(type_url)
            entry[f"{prefix}_sent"] = w.nonce_sent if w else ""
            entry[f"{prefix}_acked"] = w.nonce_acked if w else ""
        if (
            conn.generation_errors
        ):  # types not sent: the proxy keeps its last (xds/generation_errors.py)
            entry["generation_errors"] = {
                SHORT_TYPE.get(t, t): message for t, message in conn.generation_errors.items()
            }
        out.append(entry)
    return out


def _diagnostic(d: Diagnostic) -> dict[str, Any]:
    return {
        "file": d.file,
        "line": d.line,
        "severity": str(d.severity),
        "kind": d.kind,
        "namespace": d.namespace,
        "name": d.name,
        "field": d.field,
        "message": d.message,
        "text": str(d),
    }


def _public(model: Any) -> dict[str, Any]:
    """An object for the debug page; Secret values never leave the process."""
    if isinstance(model, Secret):
        return model.public_dump()
    dump: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return dump


def configz(snapshot: StoreSnapshot, push: PushContext | None) -> dict[str, Any]:
    """The objects in use (the last good version of invalid ones) and the latest problems,
    EnvoyFilter patches skipped included."""
    objects = [
        {
            "kind": str(key.kind),
            "namespace": key.namespace,
            "name": key.name,
            "file": obj.origin.file,
            "line": obj.origin.line,
            "stale": key in snapshot.stale,
            # An invalid security policy's deny-all/STRICT stand-in: why (config/fail_closed.py)
            **({"fail_closed": obj.fail_closed} if obj.fail_closed else {}),
            "object": _public(obj.model),
        }
        for key, obj in sorted(snapshot.objects.items())
    ]
    return {
        "store_version": snapshot.version,
        "push_version": push.version if push else None,
        "error": snapshot.error,
        "failing_closed": [
            f"{key.kind} {key.namespace}/{key.name}: {obj.fail_closed}"
            for key, obj in sorted(snapshot.objects.items())
            if obj.fail_closed
        ],
        "diagnostics": [_diagnostic(d) for d in snapshot.diagnostics],
        # EnvoyFilter patches skipped so far in this push (xds/patch/reports.py)
        "skipped_patches": [str(p) for p in patch_problems(push)] if push else [],
        "mesh": snapshot.mesh.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        "objects": objects,
    }


def _service(push: PushContext, svc: Service) -> dict[str, Any]:
    return {
        "hostname": svc.hostname,
        "namespace": svc.namespace,
        "addresses": list(svc.addresses),
        "resolution": str(svc.resolution),
        "mesh_external": svc.mesh_external,
        "ports": [{"name": p.name, "port": p.port, "protocol": str(p.protocol)} for p in svc.ports],
        "service_accounts": list(svc.service_accounts),
        "endpoints": {
            str(p.port): [f"{ep.address}:{ep.port}" for ep in push.endpoints(svc, p.port)]
            for p in svc.ports
        },
    }


def registryz(push: PushContext) -> list[dict[str, Any]]:
    return [_service(push, svc) for svc in push.registry.services]


def config_dump(push: PushContext, proxy: Proxy) -> dict[str, Any]:
    """Envoy's /config_dump shape for what `proxy` would receive from `push`."""
    config = generate_proxy_config(push, proxy).to_dict()
    version = push.version

    def typed(section: str, type_name: str) -> list[dict[str, Any]]:
        return [{"@type": f"type.googleapis.com/{type_name}", **r} for r in config[section]]

    clusters = typed("clusters", "envoy.config.cluster.v3.Cluster")
    listeners = typed("listeners", "envoy.config.listener.v3.Listener")
    routes = typed("routes", "envoy.config.route.v3.RouteConfiguration")
    endpoints = typed("endpoints", "envoy.config.endpoint.v3.ClusterLoadAssignment")
    secrets = typed("secrets", "envoy.extensions.transport_sockets.tls.v3.Secret")
    # Envoy's EcdsConfigDump, only when the proxy gets extension configs (as Envoy's dump).
    extensions = (
        typed("extension_configs", "envoy.config.core.v3.TypedExtensionConfig")
        if "extension_configs" in config
        else []
    )
    ecds = (
        [
            {
                "@type": _ADMIN + "EcdsConfigDump",
                "ecds_filters": [{"version_info": version, "ecds_filter": e} for e in extensions],
            }
        ]
        if extensions
        else []
    )
    return {
        "configs": [
            {
                "@type": _ADMIN + "ClustersConfigDump",
                "version_info": version,
                "dynamic_active_clusters": [
                    {"version_info": version, "cluster": c} for c in clusters
                ],
            },
            {
                "@type": _ADMIN + "ListenersConfigDump",
                "version_info": version,
                "dynamic_listeners": [
                    {
                        "name": lst["name"],
                        "active_state": {"version_info": version, "listener": lst},
                    }
                    for lst in listeners
                ],
            },
            {
                "@type": _ADMIN + "RoutesConfigDump",
                "dynamic_route_configs": [
                    {"version_info": version, "route_config": r} for r in routes
                ],
            },
            {
                "@type": _ADMIN + "EndpointsConfigDump",
                "dynamic_endpoint_configs": [
                    {"version_info": version, "endpoint_config": e} for e in endpoints
                ],
            },
            {
                "@type": _ADMIN + "SecretsConfigDump",
                "dynamic_active_secrets": [
                    {"name": s["name"], "version_info": version, "secret": s} for s in secrets
                ],
            },
            *ecds,
        ]
    }

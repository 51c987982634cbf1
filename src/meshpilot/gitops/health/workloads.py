"""Deployment, StatefulSet and DaemonSet: rollout progress as kubectl rollout status reads it
(gitops-engine health_deployment.go, health_statefulset.go, health_daemonset.go), basic form."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.health.status import Health, HealthStatusCode, healthy, progressing

__all__ = ["daemon_set_health", "deployment_health", "stateful_set_health"]

_WAIT = "Waiting for rollout to finish: "


def _parts(obj: Manifest) -> tuple[dict[str, Any], dict[str, Any], str, int]:
    meta = obj.get("metadata") or {}
    return (
        obj.get("spec") or {},
        obj.get("status") or {},
        str(meta.get("name") or ""),
        int(meta.get("generation") or 0),
    )


def deployment_health(obj: Manifest) -> Health:
    spec, status, name, generation = _parts(obj)
    if spec.get("paused"):
        return Health(HealthStatusCode.SUSPENDED, "Deployment is paused")
    if generation > int(status.get("observedGeneration") or 0):
        return progressing(_WAIT + "observed deployment generation less than desired generation")
    conditions = status.get("conditions") or []
    if any(
        c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
        for c in conditions
    ):
        return Health(
            HealthStatusCode.DEGRADED, f"Deployment {name!r} exceeded its progress deadline"
        )
    replicas = int(spec.get("replicas", 1))
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if updated < replicas:
        return progressing(_WAIT + f"{updated} out of {replicas} new replicas have been updated...")
    if total > updated:
        return progressing(_WAIT + f"{total - updated} old replicas are pending termination...")
    if available < updated:
        return progressing(_WAIT + f"{available} of {updated} updated replicas are available...")
    return healthy()


def stateful_set_health(obj: Manifest) -> Health:
    spec, status, _, generation = _parts(obj)
    observed = int(status.get("observedGeneration") or 0)
    if observed == 0 or generation > observed:
        return progressing("Waiting for statefulset spec update to be observed...")
    replicas = int(spec.get("replicas", 1))
    ready = int(status.get("readyReplicas") or 0)
    if ready < replicas:
        return progressing(f"Waiting for {replicas - ready} pods to be ready...")
    strategy = spec.get("updateStrategy") or {}
    if strategy.get("type") == "OnDelete":
        return healthy(f"statefulset has {ready} ready pods")
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if update and current != update:
        updated = int(status.get("updatedReplicas") or 0)
        return progressing(
            f"waiting for statefulset rolling update to complete {updated} pods "
            f"at revision {update}..."
        )
    return healthy(f"statefulset rolling update complete {ready} pods at revision {current}...")


def daemon_set_health(obj: Manifest) -> Health:
    spec, status, name, generation = _parts(obj)
    if generation > int(status.get("observedGeneration") or 0):
        return progressing(_WAIT + "observed daemon set generation less than desired generation")
    desired = int(status.get("desiredNumberScheduled") or 0)
    updated = int(status.get("updatedNumberScheduled") or 0)
    available = int(status.get("numberAvailable") or 0)
    if (spec.get("updateStrategy") or {}).get("type") == "OnDelete":
        return healthy(f"daemon set {updated} out of {desired} new pods have been updated")
    if updated < desired:
        return progressing(
            f"Waiting for daemon set {name!r} rollout to finish: "
            f"{updated} out of {desired} new pods have been updated..."
        )
    if available < desired:
        return progressing(
            f"Waiting for daemon set {name!r} rollout to finish: "
            f"{available} of {desired} updated pods are available..."
        )
    return healthy()

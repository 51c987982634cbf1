"""Pod health, as gitops-engine's health_pod.go decides it: phase first; a container waiting
on an error or back-off degrades an always-restarting Pod; a Pod that runs to completion
(a hook) is progressing until it succeeds."""

from __future__ import annotations

from typing import Any

from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.health.status import Health, HealthStatusCode, healthy, progressing

__all__ = ["pod_health"]


def pod_health(obj: Manifest) -> Health:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    restart = spec.get("restartPolicy") or "Always"
    containers = list(status.get("containerStatuses") or [])
    message = str(status.get("message") or "")
    if restart == "Always":
        waiting = [_waiting_error(c) for c in containers]
        errors = [w for w in waiting if w is not None]
        if errors:
            return Health(HealthStatusCode.DEGRADED, ", ".join(errors))
    phase = status.get("phase")
    if not phase:
        # Universal mode: a Pod declared in YAML that nothing reports on is taken as it is.
        return healthy("no phase reported")
    if phase == "Pending":
        return progressing(message)
    if phase == "Succeeded":
        return healthy(message)
    if phase == "Failed":
        return Health(HealthStatusCode.DEGRADED, message or _fail_message(status))
    if phase == "Running":
        if restart != "Always":
            return progressing(message)
        if _ready(status):
            return healthy(message)
        if any((c.get("lastState") or {}).get("terminated") for c in containers):
            return Health(HealthStatusCode.DEGRADED, message)
        return progressing(message)
    return Health(HealthStatusCode.UNKNOWN, message)


def _waiting_error(container: dict[str, Any]) -> str | None:
    waiting = (container.get("state") or {}).get("waiting")
    if not isinstance(waiting, dict):
        return None
    reason = str(waiting.get("reason") or "")
    if reason.startswith("Err") or reason.endswith(("Error", "BackOff")):
        return str(waiting.get("message") or reason)
    return None


def _ready(status: dict[str, Any]) -> bool:
    """The Ready condition (podutils.IsPodReady); with no conditions at all nothing reports
    readiness (universal mode), and a running Pod is taken as ready."""
    if "conditions" not in status:
        return True
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _fail_message(status: dict[str, Any]) -> str:
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        terminated = (container.get("state") or {}).get("terminated")
        if not isinstance(terminated, dict):
            continue
        if terminated.get("message"):
            return str(terminated["message"])
        if terminated.get("reason") == "OOMKilled":
            return "OOMKilled"
        if terminated.get("exitCode"):
            code = terminated["exitCode"]
            return f"container {container.get('name')!r} failed with exit code {code}"
    return ""

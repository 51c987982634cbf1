"""Endpoints: healthy with ready addresses; progressing while only not-ready ones exist.
(gitops-engine has no check for this kind; in a mesh without Kubernetes it is how a
workload's readiness shows, so we give it one.)"""

from __future__ import annotations

from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.health.status import Health, healthy, progressing

__all__ = ["endpoints_health"]


def endpoints_health(obj: Manifest) -> Health:
    subsets = obj.get("subsets") or []
    ready = sum(len(s.get("addresses") or []) for s in subsets if isinstance(s, dict))
    not_ready = sum(len(s.get("notReadyAddresses") or []) for s in subsets if isinstance(s, dict))
    if ready:
        return healthy()
    if not_ready:
        return progressing(f"Waiting for endpoints: {not_ready} addresses not ready")
    return healthy("no endpoints")

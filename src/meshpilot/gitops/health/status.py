"""The health of one resource: a status code (gitops/model/status.py) and a message."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from meshpilot.gitops.diff.keys import Manifest
from meshpilot.gitops.model.status import HealthStatusCode

__all__ = ["Check", "Health", "HealthStatusCode", "healthy", "progressing"]


@dataclass(frozen=True, slots=True)
class Health:
    status: HealthStatusCode
    message: str = ""


# A health check of one kind (gitops-engine `health_<kind>.go`): live object -> health.
Check = Callable[[Manifest], Health]


def healthy(message: str = "") -> Health:
    return Health(HealthStatusCode.HEALTHY, message)


def progressing(message: str) -> Health:
    return Health(HealthStatusCode.PROGRESSING, message)

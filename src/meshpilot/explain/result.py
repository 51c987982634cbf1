"""What explain answers: the hops a request takes, each naming the config that made it.

The JSON form (`Explanation.to_dict`) is a stable schema, `meshpilot.io/explain/v1`: keys are
only added, never renamed. Hops are in the order the request meets them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from meshpilot.explain.request import Request

__all__ = ["SCHEMA", "Explanation", "Hop", "ObjectRef", "Outcome"]

SCHEMA = "meshpilot.io/explain/v1"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The Istio or Kubernetes object (and field) behind a hop: where to go and edit."""

    kind: str
    namespace: str
    name: str
    file: str = ""
    line: int = 0
    field: str = ""

    def __str__(self) -> str:
        where = f" at {self.file}:{self.line}" if self.file else ""
        at = f" {self.field}" if self.field else ""
        return f"{self.kind} {self.namespace}/{self.name}{at}{where}"


@dataclass(frozen=True, slots=True)
class Hop:
    """One step: `stage` is what it is (listener, route, cluster...), `envoy` the Envoy
    resource's name, `summary` what happened and why, `details` the settings that apply."""

    side: str  # "outbound" (the source proxy) or "inbound" (the destination's sidecar)
    stage: str
    envoy: str
    summary: str
    details: tuple[str, ...] = ()
    objects: tuple[ObjectRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Outcome:
    """Where the request ends: delivered to `destination`, or dead at `dies_at` with `code`."""

    delivered: bool
    code: int | None  # the HTTP status the caller sees; None for a TCP connection
    cluster: str  # Envoy's %UPSTREAM_CLUSTER% on the source proxy ("" when none)
    reason: str
    dies_at: str = ""  # the stage that stopped it
    destination: str = ""  # pod and port, when delivered
    # Envoy's %RESPONSE_FLAGS% on the source proxy ("" for none, logged "-"): NR, FI, UH, UC...
    flags: str = ""
    # A weighted route's branches (cluster, weight > 0): Envoy picks one at random per request
    # with these shares; `cluster` is the heaviest, the one the walk follows.
    branches: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Explanation:
    proxy: str  # POD.NAMESPACE of the source
    proxy_type: str  # sidecar or router
    request: Request
    hops: tuple[Hop, ...]
    outcome: Outcome
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["request"]["headers"] = [list(h) for h in self.request.headers]
        data["request"]["url"] = self.request.url
        return {"schema": SCHEMA, **data}

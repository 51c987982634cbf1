"""Graceful drain on termination, as pilot-agent does before Envoy is stopped.

1. `POST /healthcheck/fail`: Envoy reports itself unhealthy (health-check filters and
   upstream health checks see it failing) and the agent's readiness answers 503;
2. `POST /drain_listeners?graceful` (sidecars: `?inboundonly&graceful`, so the application
   can still call out while its inbound connections drain, as Istio does): Envoy starts its
   drain sequence (`--drain-strategy immediate` tells clients at once, `Connection: close` /
   GOAWAY) and stops the listeners after `--drain-time-s`;
3. wait `terminationDrainDuration` (Istio's default 5s), then the caller stops Envoy.
"""

from __future__ import annotations

import asyncio
import logging

from meshpilot.agent.admin import EnvoyAdmin
from meshpilot.errors import EnvoyError

__all__ = ["drain_envoy", "drain_path"]

log = logging.getLogger(__name__)


def drain_path(inbound_only: bool) -> str:
    return "/drain_listeners?inboundonly&graceful" if inbound_only else "/drain_listeners?graceful"


async def drain_envoy(admin: EnvoyAdmin, *, inbound_only: bool, duration: float) -> bool:
    """Drain and wait `duration` seconds; False (without waiting) if Envoy is unreachable,
    since there is then nothing left to drain."""
    try:
        await admin.post("/healthcheck/fail")
        response = await admin.post(drain_path(inbound_only))
    except EnvoyError as exc:
        log.warning("cannot drain Envoy: %s", exc)
        return False
    if response.status != 200:
        log.warning("Envoy refused to drain: %d %s", response.status, response.body.strip())
    log.info("draining Envoy for %.1fs (%s)", duration, drain_path(inbound_only))
    await asyncio.sleep(duration)
    return True

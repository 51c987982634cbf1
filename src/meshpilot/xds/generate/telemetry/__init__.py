"""Telemetry in generated config: access logs (access_log.py), HCM tracing (tracing.py,
tags.py), put into a proxy's listeners after generation (apply.py). Which settings hold
for a workload comes from model/indexes/telemetry.py."""

from __future__ import annotations

from meshpilot.xds.generate.telemetry.apply import apply_telemetry

__all__ = ["apply_telemetry"]

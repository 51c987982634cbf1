"""The control plane process: store, ADS server and the monitoring port, wired together."""

from __future__ import annotations

from meshpilot.discovery.process import Discovery, run_discovery

__all__ = ["Discovery", "run_discovery"]

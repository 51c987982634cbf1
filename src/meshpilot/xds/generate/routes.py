"""Sidecar outbound route configurations (stub until the route builders land)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext


def generate_sidecar_routes(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[Any]:
    return []

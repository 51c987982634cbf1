"""A generator that fails for one proxy and one xDS type: reported, and contained.

Validation keeps most bad input out (config/ranges.py), but a generator can still raise for
one proxy (a value no check foresaw, a bug). That must not end the stream, nor the push to
the other proxies: the type is not sent (the proxy keeps the last config of it that it
has), the other types are, and the failure is logged with the object being translated
when it raised (found in the traceback), counted in `pilot_total_xds_internal_errors`
and shown by /debug/syncz. Every later push to the stream tries the type again, so a fix
of the object reaches the proxy whatever else the push changed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from meshpilot.config.base import TopLevel
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import Proxy
from meshpilot.xds.connection import SHORT_TYPE, Connection
from meshpilot.xds.generate import PUSH_ORDER
from meshpilot.xds.metrics import Metrics

__all__ = ["GenerationError", "culprit", "generation_failed", "with_retries"]

log = logging.getLogger(__name__)
Plan = list[tuple[str, Any]]


class GenerationError(MeshpilotError):
    """Generating one xDS type for one proxy raised `cause` (kept as __cause__)."""

    def __init__(self, type_url: str, proxy: Proxy, cause: BaseException) -> None:
        self.type_url = type_url
        self.culprit = culprit(cause.__traceback__)
        short = SHORT_TYPE.get(type_url, type_url)
        what = f" while translating {self.culprit}" if self.culprit else ""
        super().__init__(
            f"generating {short} for {proxy.id} failed{what}: {type(cause).__name__}: {cause}"
        )


def culprit(tb: TracebackType | None) -> str:
    """The config object the innermost generator frame was working on, as
    `<Kind> <namespace>/<name> (<file>:<line>)`; "" when no frame holds one."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if isinstance(value, ConfigObject):
                key = value.key
                return f"{key.kind} {key.namespace}/{key.name} ({value.location})"
            if isinstance(value, TopLevel):
                meta = value.metadata
                return f"{value.kind} {meta.namespace}/{meta.name}"
    return ""


def generation_failed(conn: Connection, err: GenerationError, metrics: Metrics) -> None:
    """Report a failed type of one stream; it is retried with the stream's next push."""
    short = SHORT_TYPE.get(err.type_url, err.type_url)
    metrics.internal_errors.inc(short)
    conn.generation_errors[err.type_url] = str(err)
    log.error(
        "ADS: %s; not sent to %s, which keeps its last %s", err, conn.id, short,
        exc_info=err.__cause__,
    )  # fmt: skip


def with_retries(plan: Sequence[tuple[str, Any]], conn: Connection) -> Plan:
    """A push's plan plus every watched type whose generation failed before (all names)."""
    failed = conn.generation_errors
    planned = {type_url for type_url, _ in plan}
    extra = [(t, None) for t in failed if t not in planned and t in conn.watched]
    if not extra:
        return list(plan)
    order = {t: i for i, t in enumerate(PUSH_ORDER)}
    return sorted([*plan, *extra], key=lambda item: order.get(item[0], len(order)))

"""PushTimeline: when each stage of one push happened, for finding where a push's time goes.

Stages, all `time.monotonic()` (one clock for every process of the machine, so a benchmark
can set them against its own timestamps): the store change behind the push was handed to
the debouncer (`changed`), the debounce let it go (`debounced`), the PushContext was built
(`built`), every connection was queued (`queued`), the last of the push's responses was
built and handed to gRPC (`handed`), gRPC reported them written (first and last `sent`: in
its buffers, not necessarily at the client), and ACKs of its version came back (last
`acked`). The ADS server keeps the recent ones and logs each once its ACKs had a moment to
come in (xds/server.py).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass

__all__ = ["PushTimeline", "PushTimelines"]

CPU_EVERY_S = 0.002


@dataclass(slots=True)
class PushTimeline:
    version: str
    full: bool
    changed: float
    debounced: float
    built: float = 0.0
    queued: float = 0.0
    streams: int = 0
    handed: float = 0.0
    sent: int = 0  # responses handed to gRPC
    first_sent: float = 0.0
    last_sent: float = 0.0
    acked: int = 0  # ACKs of this version (one per type sent)
    last_acked: float = 0.0
    # The process's CPU seconds (time.process_time()) once queued and at the last ACK: the
    # fan-out's cost, which a busy machine does not inflate as it does the wall times. Read
    # at most every CPU_EVERY_S of ACKs (and at the first): it sums every thread's time,
    # and costs microseconds a call while gRPC's threads run: read per ACK, it would add
    # up over the thousand ACKs of a push.
    cpu_queued: float = 0.0
    cpu_last_acked: float = 0.0
    cpu_read_at: float = 0.0

    def record_handed(self) -> None:
        self.handed = time.monotonic()

    def record_sent(self) -> None:
        now = time.monotonic()
        if not self.sent:
            self.first_sent = now
        self.sent += 1
        self.last_sent = now

    def record_queued(self, streams: int) -> None:
        self.queued, self.streams, self.cpu_queued = time.monotonic(), streams, time.process_time()

    def record_ack(self) -> None:
        self.acked += 1
        self.last_acked = now = time.monotonic()
        if now - self.cpu_read_at >= CPU_EVERY_S:
            self.cpu_read_at, self.cpu_last_acked = now, time.process_time()

    def stages_ms(self) -> dict[str, float]:
        """Each stage's end, in ms after the change (0 for a stage not reached)."""

        def after(stamp: float) -> float:
            return round((stamp - self.changed) * 1e3, 1) if stamp else 0.0

        return {
            "debounced": after(self.debounced),
            "built": after(self.built),
            "queued": after(self.queued),
            "handed": after(self.handed),
            "first_sent": after(self.first_sent),
            "last_sent": after(self.last_sent),
            "last_acked": after(self.last_acked),
            "fan_out_cpu": round((self.cpu_last_acked - self.cpu_queued) * 1e3, 1)
            if self.cpu_last_acked
            else 0.0,
        }

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "ms": self.stages_ms()}, sort_keys=True)


class PushTimelines:
    """The timelines of the latest pushes, by version."""

    def __init__(self, keep: int = 16) -> None:
        self.keep = keep
        self._by_version: OrderedDict[str, PushTimeline] = OrderedDict()

    def add(self, timeline: PushTimeline) -> None:
        self._by_version[timeline.version] = timeline
        while len(self._by_version) > self.keep:
            self._by_version.popitem(last=False)

    def get(self, version: str) -> PushTimeline | None:
        return self._by_version.get(version)

    def latest(self) -> PushTimeline | None:
        return next(reversed(self._by_version.values()), None)

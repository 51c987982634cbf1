"""Control plane metrics with Istio's names, in the Prometheus text format.

Hand-rolled (counters, gauges and histograms with labels; about a hundred lines) rather than
prometheus-client, because that library always appends `_total` to counters, while istiod
exposes `pilot_xds_pushes`, `pilot_total_xds_rejects` and so on without it; dashboards and
alerts written for Istio query those names.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["Counter", "Gauge", "Histogram", "Metrics"]

Labels = tuple[str, ...]

# Istio's bucket boundaries (pilot/pkg/xds/monitoring.go).
CONVERGENCE_BUCKETS = (0.1, 0.5, 1, 3, 5, 10, 20, 30)
PUSH_TIME_BUCKETS = (0.01, 0.1, 1, 3, 5, 10, 20, 30)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Labels, extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


@dataclass(slots=True)
class _Metric:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    kind: str = "untyped"

    def header(self) -> Iterator[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} {self.kind}"


@dataclass(slots=True)
class Counter(_Metric):
    kind: str = "counter"
    values: dict[Labels, float] = field(default_factory=dict)

    def inc(self, *labels: str, amount: float = 1) -> None:
        self.values[labels] = self.values.get(labels, 0) + amount

    def get(self, *labels: str) -> float:
        return self.values.get(labels, 0)

    def render(self) -> Iterator[str]:
        yield from self.header()
        for labels, value in sorted(self.values.items()):
            yield f"{self.name}{_labels(self.label_names, labels)} {_number(value)}"


@dataclass(slots=True)
class Gauge(Counter):
    kind: str = "gauge"

    def set(self, *labels: str, value: float) -> None:
        self.values[labels] = value


@dataclass(slots=True)
class _Series:
    counts: list[int]
    total: float = 0.0
    count: int = 0


@dataclass(slots=True)
class Histogram(_Metric):
    kind: str = "histogram"
    buckets: tuple[float, ...] = PUSH_TIME_BUCKETS
    series: dict[Labels, _Series] = field(default_factory=dict)

    def observe(self, value: float, *labels: str) -> None:
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = _Series([0] * len(self.buckets))
        index = bisect.bisect_left(self.buckets, value)
        for i in range(index, len(self.buckets)):
            series.counts[i] += 1
        series.total += value
        series.count += 1

    def count(self, *labels: str) -> int:
        series = self.series.get(labels)
        return series.count if series else 0

    def render(self) -> Iterator[str]:
        yield from self.header()
        for labels, s in sorted(self.series.items()):
            for bound, n in zip((*self.buckets, math.inf), (*s.counts, s.count), strict=True):
                le = f'le="{_number(bound)}"'
                yield f"{self.name}_bucket{_labels(self.label_names, labels, le)} {n}"
            yield f"{self.name}_sum{_labels(self.label_names, labels)} {_number(s.total)}"
            yield f"{self.name}_count{_labels(self.label_names, labels)} {s.count}"


class Metrics:
    """Every metric of one DiscoveryServer (no globals: tests run several servers)."""

    def __init__(self) -> None:
        self.xds_clients = Gauge(
            "pilot_xds", "Number of endpoints connected to this pilot using XDS.", ("version",)
        )
        self.pushes = Counter(
            "pilot_xds_pushes", "Pilot build and send errors for lds, rds, cds and eds.", ("type",)
        )
        self.push_time = Histogram(
            "pilot_xds_push_time",
            "Total time in seconds Pilot takes to push lds, rds, cds and eds.",
            ("type",),
        )
        self.convergence = Histogram(
            "pilot_proxy_convergence_time",
            "Delay in seconds between config change and a proxy receiving all required "
            "configuration.",
            buckets=CONVERGENCE_BUCKETS,
        )
        self.rejects = Counter(
            "pilot_total_xds_rejects",
            "Total number of XDS responses from pilot rejected by proxy.",
            ("type",),
        )
        self.expired_nonce = Counter(
            "pilot_xds_expired_nonce",
            "Total number of XDS requests with an expired nonce.",
            ("type",),
        )
        self.push_triggers = Counter(
            "pilot_push_triggers",
            "Total number of times a push was triggered, labeled by reason for the push.",
            ("type",),
        )
        self.debounce_time = Histogram(
            "pilot_debounce_time",
            "Delay in seconds between the first config enters debouncing "
            "and the merged push request is pushed into the push queue.",
        )
        self.push_context_init = Histogram(
            "pilot_pushcontext_init_seconds",
            "Total time in seconds Pilot takes to init pushContext.",
        )
        self.config_events = Counter(
            "pilot_k8s_cfg_events",
            "Events from the config sources (files), by kind and event.",
            ("type", "event"),
        )
        self.speculations = Counter(
            "meshpilot_push_speculations",
            "Pushes made ready while their change was debounced, by what became of them "
            "(adopted by the push, or dropped for a newer change).",
            ("result",),
        )
        self.prepared = Counter(
            "meshpilot_push_prepared",
            "Streams whose push was worked out while its change was debounced, by what "
            "became of it (applied, or redone: the stream's state moved meanwhile).",
            ("result",),
        )
        self.internal_errors = Counter(
            "pilot_total_xds_internal_errors",
            "Total number of internal XDS errors in pilot (a generator failed for a proxy).",
            ("type",),
        )
        self.config_errors = Gauge(
            "meshpilot_config_errors", "Input objects and files with errors in the latest read."
        )

    def all(self) -> tuple[Counter | Histogram, ...]:
        return (
            self.xds_clients, self.pushes, self.push_time, self.convergence, self.rejects,
            self.expired_nonce, self.push_triggers, self.debounce_time, self.push_context_init,
            self.config_events, self.speculations, self.prepared, self.config_errors,
            self.internal_errors,
        )  # fmt: skip

    def render(self) -> str:
        lines = [line for metric in self.all() for line in metric.render()]
        return "\n".join(lines) + "\n"

"""Telemetry by scope: the access logging and tracing that apply to one workload.

Istio's precedence: the oldest selector-less Telemetry of the root namespace (mesh), then
the oldest selector-less one of the workload's namespace, then the oldest one in that
namespace whose selector matches the workload's labels (or whose targetRef names the
Gateway API Gateway the pod runs for). Each level overrides the one above, field by field;
entries whose `match.mode` excludes the traffic direction (CLIENT: outbound and gateways,
SERVER: inbound) are skipped. With no applicable entry and no `defaultProviders`, the
legacy mesh settings (accessLogFile, enableTracing) apply: `None` says so.

Built once per push and kept in `push.memo` (`telemetry_index(push)`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import cast

from meshpilot.config.istio.telemetry import (
    AccessLogging,
    CustomTag,
    Metrics,
    MetricsOverrides,
    Telemetry,
    Tracing,
)
from meshpilot.config.kinds import Kind
from meshpilot.config.mesh_telemetry import DefaultProviders
from meshpilot.config.objects import ConfigObject
from meshpilot.model.push_context import PushContext

__all__ = [
    "PROMETHEUS",
    "LogChoice",
    "MetricsChoice",
    "Mode",
    "TelemetryIndex",
    "TracingChoice",
    "telemetry_index",
]

_Policy = ConfigObject[Telemetry]
_MEMO_KEY = "telemetry.index"
GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name"
# The metrics provider meshpilot builds (Istio's default one): Envoy stats on 15090.
PROMETHEUS = "prometheus"


class Mode(StrEnum):
    CLIENT = "CLIENT"
    SERVER = "SERVER"


@dataclass(frozen=True, slots=True)
class LogChoice:
    """One access log provider that is on, with its CEL filter if any."""

    provider: str
    filter: str = ""


@dataclass(frozen=True, slots=True)
class TracingChoice:
    provider: str | None = None
    sampling: float | None = None
    custom_tags: Mapping[str, CustomTag] = field(default_factory=dict)
    disabled: bool = False
    use_request_id_for_trace_sampling: bool = True
    enable_istio_tags: bool = True


@dataclass(frozen=True, slots=True)
class MetricsChoice:
    """Istio's standard metrics are on for this direction; the overrides that apply (mesh
    first), each already matched to the direction."""

    overrides: tuple[MetricsOverrides, ...] = ()


def _age(policy: _Policy) -> tuple[str, str]:
    return (policy.model.metadata.creation_timestamp or "", policy.name)


def _selects(policy: _Policy, labels: Mapping[str, str]) -> bool:
    spec = policy.model.spec
    if spec.selector is not None:
        return all(labels.get(k) == v for k, v in spec.selector.match_labels.items())
    refs = [*spec.target_refs, *([spec.target_ref] if spec.target_ref else [])]
    return any(ref.kind == "Gateway" and labels.get(GATEWAY_NAME_LABEL) == ref.name for ref in refs)


def _applies(match_mode: str, mode: Mode) -> bool:
    return match_mode in ("", "CLIENT_AND_SERVER") or match_mode == mode


@dataclass(frozen=True, slots=True)
class TelemetryIndex:
    root_namespace: str
    defaults: DefaultProviders
    scoped: Mapping[str, _Policy]
    selecting: Mapping[str, tuple[_Policy, ...]]

    @classmethod
    def build(
        cls, policies: Sequence[_Policy], root_namespace: str, defaults: DefaultProviders
    ) -> TelemetryIndex:
        scoped: dict[str, _Policy] = {}
        selecting: dict[str, list[_Policy]] = {}
        for policy in sorted(policies, key=_age):
            spec = policy.model.spec
            if spec.selector is None and spec.target_ref is None and not spec.target_refs:
                scoped.setdefault(policy.namespace, policy)
            else:
                selecting.setdefault(policy.namespace, []).append(policy)
        return cls(root_namespace, defaults, scoped, {k: tuple(v) for k, v in selecting.items()})

    @property
    def empty(self) -> bool:
        return not self.scoped and not self.selecting

    def chain(self, namespace: str, labels: Mapping[str, str]) -> tuple[_Policy, ...]:
        """The Telemetry objects that apply, mesh first, workload last."""
        out = [self.scoped.get(self.root_namespace)]
        if namespace != self.root_namespace:
            out.append(self.scoped.get(namespace))
        out.append(
            next((p for p in self.selecting.get(namespace, ()) if _selects(p, labels)), None)
        )
        return tuple(p for p in out if p is not None)

    def _entries(
        self, namespace: str, labels: Mapping[str, str], mode: Mode, section: str
    ) -> Iterator[AccessLogging | Tracing | Metrics]:
        for policy in self.chain(namespace, labels):
            for entry in getattr(policy.model.spec, section):
                match = getattr(entry, "match", None)
                if _applies(match.mode if match else "", mode):
                    yield entry

    def access_logging(
        self, namespace: str, labels: Mapping[str, str], mode: Mode
    ) -> tuple[LogChoice, ...] | None:
        """The providers logging this workload's traffic in `mode`; None: use the mesh's
        accessLogFile. A child's `providers` replaces its parent's list; `disabled` and
        `filter` apply to the providers the entry names, or to the inherited ones."""
        entries = cast(
            list[AccessLogging], list(self._entries(namespace, labels, mode, "access_logging"))
        )
        if not entries and not self.defaults.access_logging:
            return None
        current = list(self.defaults.access_logging)
        enabled = dict.fromkeys(current, True)
        filters: dict[str, str] = {}
        for entry in entries:
            if entry.providers:
                current = [p.name for p in entry.providers]
            for name in current:
                enabled[name] = not entry.disabled
                if entry.filter is not None:
                    filters[name] = entry.filter.expression
        return tuple(LogChoice(name, filters.get(name, "")) for name in current if enabled[name])

    def tracing(
        self, namespace: str, labels: Mapping[str, str], mode: Mode
    ) -> TracingChoice | None:
        """The tracing of this workload in `mode`; None: use the mesh's enableTracing."""
        entries = cast(list[Tracing], list(self._entries(namespace, labels, mode, "tracing")))
        if not entries and not self.defaults.tracing:
            return None
        provider = self.defaults.tracing[0] if self.defaults.tracing else None
        sampling: float | None = None
        tags: dict[str, CustomTag] = {}
        disabled, use_request_id, istio_tags = False, True, True
        for entry in entries:
            if entry.providers:
                provider = entry.providers[0].name
            if entry.random_sampling_percentage is not None:
                sampling = entry.random_sampling_percentage
            tags.update({k: v for k, v in entry.custom_tags.items() if v is not None})
            if entry.disable_span_reporting is not None:
                disabled = entry.disable_span_reporting
            if entry.use_request_id_for_trace_sampling is not None:
                use_request_id = entry.use_request_id_for_trace_sampling
            if entry.enable_istio_tags is not None:
                istio_tags = entry.enable_istio_tags
        return TracingChoice(provider, sampling, tags, disabled, use_request_id, istio_tags)

    def metrics(
        self, namespace: str, labels: Mapping[str, str], mode: Mode
    ) -> MetricsChoice | None:
        """Whether the prometheus provider is on for this direction (defaultProviders.metrics,
        replaced by a child's `providers`), with the overrides whose match takes `mode`."""
        entries = cast(list[Metrics], list(self._entries(namespace, labels, mode, "metrics")))
        providers = list(self.defaults.metrics)
        overrides: list[MetricsOverrides] = []
        for entry in entries:
            if entry.providers:
                providers = [p.name for p in entry.providers]
            overrides.extend(
                o for o in entry.overrides if _applies(o.match.mode if o.match else "", mode)
            )
        return MetricsChoice(tuple(overrides)) if PROMETHEUS in providers else None


def telemetry_index(push: PushContext) -> TelemetryIndex:
    """The push's index, built on first use and kept in the push's memo."""
    index = push.memo.get(_MEMO_KEY)
    if index is None:
        policies = cast(Sequence[_Policy], push.of_kind(Kind.TELEMETRY))
        index = push.memo[_MEMO_KEY] = TelemetryIndex.build(
            policies, push.mesh.root_namespace, push.mesh.default_providers
        )
    assert isinstance(index, TelemetryIndex)
    return index

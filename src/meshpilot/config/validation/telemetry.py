"""Telemetry: selector or targetRefs, tracing, metrics overrides and access logging
(Istio's validateTelemetry)."""

from __future__ import annotations

from meshpilot.config.istio.telemetry import (
    AccessLogging,
    Metrics,
    MetricsOverrides,
    Telemetry,
    Tracing,
    WorkloadModeMatch,
)
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_duration,
    check_enum,
    check_selector_or_targets,
    quoted,
)
from meshpilot.config.validation.target_refs import GATEWAY_OR_SERVICE, check_target_refs

__all__ = ["validate_telemetry"]

SPEC: Path = ("spec",)
MODES = ("CLIENT_AND_SERVER", "CLIENT", "SERVER")
METRICS = (
    "ALL_METRICS",
    "REQUEST_COUNT",
    "REQUEST_DURATION",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "TCP_OPENED_CONNECTIONS",
    "TCP_CLOSED_CONNECTIONS",
    "TCP_SENT_BYTES",
    "TCP_RECEIVED_BYTES",
    "GRPC_REQUEST_MESSAGES",
    "GRPC_RESPONSE_MESSAGES",
)
TAG_OPERATIONS = ("UPSERT", "REMOVE")


def validate_telemetry(telemetry: Telemetry, p: Problems) -> None:
    spec = telemetry.spec
    labels = spec.selector.match_labels if spec.selector is not None else None
    check_selector_or_targets(
        p, labels, spec.target_ref is not None, bool(spec.target_refs), "Telemetry"
    )
    check_target_refs(p, spec.target_ref, spec.target_refs, GATEWAY_OR_SERVICE)
    for index, tracing in enumerate(spec.tracing):
        _check_tracing(p, (*SPEC, "tracing", index), tracing)
    if len(spec.tracing) > 1:
        p.warning((*SPEC, "tracing"), "multiple tracing is not currently supported")
    for index, metrics in enumerate(spec.metrics):
        _check_metrics(p, (*SPEC, "metrics", index), metrics)
    for index, logging in enumerate(spec.access_logging):
        _check_access_logging(p, (*SPEC, "accessLogging", index), logging)


def _check_mode(p: Problems, path: Path, match: WorkloadModeMatch | None) -> None:
    if match is not None:
        check_enum(p, (*path, "match", "mode"), match.mode, MODES)


def _check_providers(p: Problems, path: Path, names: list[str]) -> None:
    for index, name in enumerate(names):
        if not name:
            p.error((*path, "providers", index, "name"), "provider name must not be empty")


def _check_tracing(p: Problems, path: Path, tracing: Tracing) -> None:
    _check_mode(p, path, tracing.match)
    _check_providers(p, path, [provider.name for provider in tracing.providers])
    if len(tracing.providers) > 1:
        p.warning((*path, "providers"), "multiple providers is not currently supported")
    percent = tracing.random_sampling_percentage
    if percent is not None and not 0.0 <= percent <= 100.0:
        p.error(
            (*path, "randomSamplingPercentage"),
            f"randomSamplingPercentage {percent} must be in range [0.0, 100.0]",
        )
    for name, tag in tracing.custom_tags.items():
        where = (*path, "customTags", name)
        if tag is None:
            p.error(where, f"tag {quoted(name)} may not have a nil value")
            continue
        kinds = [k for k in (tag.literal, tag.environment, tag.header) if k is not None]
        if len(kinds) != 1:
            p.error(where, "a custom tag must set exactly one of literal, environment or header")
        elif tag.literal is not None and not tag.literal.value:
            p.error((*where, "literal", "value"), "literal tag value may not be empty")
        elif tag.environment is not None and not tag.environment.name:
            p.error((*where, "environment", "name"), "environment tag name may not be empty")
        elif tag.header is not None and not tag.header.name:
            p.error((*where, "header", "name"), "header tag name may not be empty")


def _check_metrics(p: Problems, path: Path, metrics: Metrics) -> None:
    _check_providers(p, path, [provider.name for provider in metrics.providers])
    check_duration(p, (*path, "reportingInterval"), metrics.reporting_interval)
    for index, override in enumerate(metrics.overrides):
        _check_override(p, (*path, "overrides", index), override)


def _check_override(p: Problems, path: Path, override: MetricsOverrides) -> None:
    match = override.match
    if match is not None:
        where = (*path, "match")
        if match.metric and match.custom_metric:
            p.error(where, "only one of metric or customMetric can be set")
        if match.metric:
            check_enum(p, (*where, "metric"), match.metric, METRICS)
        check_enum(p, (*where, "mode"), match.mode, MODES)
    for name, tag in override.tag_overrides.items():
        where = (*path, "tagOverrides", name)
        if not name:
            p.error(where, "tag name must not be empty")
        check_enum(p, (*where, "operation"), tag.operation, TAG_OPERATIONS)
        if tag.operation == "UPSERT" and not tag.value:
            p.error((*where, "value"), "must set value when operation is UPSERT")
        if tag.operation == "REMOVE" and tag.value:
            p.error((*where, "value"), "must not set value when operation is REMOVE")


def _check_access_logging(p: Problems, path: Path, logging: AccessLogging) -> None:
    _check_mode(p, path, logging.match)
    _check_providers(p, path, [provider.name for provider in logging.providers])
    if logging.filter is not None and not logging.filter.expression.strip():
        p.error((*path, "filter", "expression"), "access log filter expression must not be empty")

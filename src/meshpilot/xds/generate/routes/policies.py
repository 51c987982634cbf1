"""Per-route filter policies: fault injection and CORS (typed_per_filter_config)."""

from __future__ import annotations

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.common.fault.v3 import fault_pb2 as common_fault_pb2
from envoy.extensions.filters.http.cors.v3 import cors_pb2
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from envoy.type.matcher.v3 import string_pb2
from envoy.type.v3 import percent_pb2

from meshpilot.config.istio.grpc_status import GRPC_STATUS_CODES
from meshpilot.config.istio.virtual_service import (
    CorsPolicy,
    FaultAbort,
    FaultDelay,
    HTTPFaultInjection,
    Percent,
)
from meshpilot.xds.generate.routes.match import string_matcher
from meshpilot.xds.protos import boolean, duration

__all__ = ["cors_policy", "fault", "fraction_of_hundred", "fraction_of_percent"]

GRPC_STATUS = GRPC_STATUS_CODES


def fraction_of_percent(p: Percent) -> percent_pb2.FractionalPercent:
    """A `Percent` (double) as parts per million, truncated like Istio's uint32 conversion."""
    return percent_pb2.FractionalPercent(
        numerator=int(p.value * 10000), denominator=percent_pb2.FractionalPercent.MILLION
    )


def fraction_of_hundred(value: int) -> percent_pb2.FractionalPercent:
    return percent_pb2.FractionalPercent(
        numerator=value, denominator=percent_pb2.FractionalPercent.HUNDRED
    )


def _delay(d: FaultDelay) -> common_fault_pb2.FaultDelay | None:
    if d.fixed_delay is None:
        return None  # exponential delays are not supported by Istio either
    return common_fault_pb2.FaultDelay(
        fixed_delay=duration(d.fixed_delay),
        percentage=(
            fraction_of_percent(d.percentage)
            if d.percentage is not None
            else fraction_of_hundred(d.percent or 0)
        ),
    )


def _abort(a: FaultAbort) -> fault_pb2.FaultAbort | None:
    out = fault_pb2.FaultAbort()
    if a.percentage is not None:
        out.percentage.CopyFrom(fraction_of_percent(a.percentage))
    if a.http_status is not None:
        out.http_status = a.http_status
    elif a.grpc_status is not None:
        # Validation admits only known names; Istio maps anything else to OK (0).
        out.grpc_status = GRPC_STATUS.get(a.grpc_status, 0)
    else:
        return None  # http2Error aborts are not supported by Istio
    return out


def fault(f: HTTPFaultInjection) -> fault_pb2.HTTPFault:
    out = fault_pb2.HTTPFault()
    delay = _delay(f.delay) if f.delay is not None else None
    abort = _abort(f.abort) if f.abort is not None else None
    if delay is not None:
        out.delay.CopyFrom(delay)
    if abort is not None:
        out.abort.CopyFrom(abort)
    return out


def cors_policy(c: CorsPolicy) -> cors_pb2.CorsPolicy:
    out = cors_pb2.CorsPolicy(
        # Envoy's pre-1.30 default, which Istio keeps unless unmatchedPreflights is IGNORE.
        forward_not_matching_preflights=boolean(c.unmatched_preflights != "IGNORE"),
        filter_enabled=base_pb2.RuntimeFractionalPercent(default_value=fraction_of_hundred(100)),
        allow_headers=",".join(c.allow_headers),
        allow_methods=",".join(c.allow_methods),
        expose_headers=",".join(c.expose_headers),
    )
    if c.allow_origins:
        matchers = (string_matcher(m) for m in c.allow_origins)
        out.allow_origin_string_match.extend(m for m in matchers if m is not None)
    else:
        out.allow_origin_string_match.extend(
            string_pb2.StringMatcher(exact=o) for o in c.allow_origin
        )
    if c.allow_credentials is not None:
        out.allow_credentials.CopyFrom(boolean(c.allow_credentials))
    if c.max_age is not None:
        out.max_age = str(c.max_age // 1_000_000_000)
    return out

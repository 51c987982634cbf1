"""Per-route HTTP policies of a VirtualService: redirect, rewrite, direct response, retries,
fault injection, mirroring and CORS (Istio's validateHTTPRedirect, validateHTTPRewrite,
validateHTTPDirectResponse, validateHTTPRetry, validateHTTPFaultInjection, validateHTTPMirrors,
validateCORSPolicy)."""

from __future__ import annotations

import base64
import binascii

from meshpilot.config.istio.grpc_status import GRPC_STATUS_NAMES
from meshpilot.config.istio.virtual_service import (
    CorsPolicy,
    FaultAbort,
    FaultDelay,
    HTTPDirectResponse,
    HTTPRedirect,
    HTTPRetry,
    HTTPRewrite,
    HTTPRoute,
    Percent,
)
from meshpilot.config.validation.common import (
    Path,
    Problems,
    check_duration,
    check_enum,
    check_percent,
    check_port,
    quoted,
)
from meshpilot.config.validation.destinations import check_destination
from meshpilot.config.validation.http_headers import check_string_match, is_header_name
from meshpilot.config.validation.re2 import regex_error

__all__ = [
    "check_cors",
    "check_direct_response",
    "check_fault",
    "check_mirrors",
    "check_redirect",
    "check_retries",
    "check_rewrite",
]

# Envoy's x-envoy-retry-on and x-envoy-retry-grpc-on policies.
RETRY_ON = frozenset(
    {
        "5xx",
        "gateway-error",
        "reset",
        "reset-before-request",
        "connect-failure",
        "retriable-4xx",
        "refused-stream",
        "retriable-status-codes",
        "retriable-headers",
        "envoy-ratelimited",
        "http3-post-connect-failure",
        "cancelled",
        "deadline-exceeded",
        "internal",
        "resource-exhausted",
        "unavailable",
    }
)
# Status codes with a registered reason phrase (Go's http.StatusText).
HTTP_STATUS_CODES = frozenset(
    {
        *(100, 101, 102, 103, *range(200, 209), 226),
        *(300, 301, 302, 303, 304, 305, 307, 308),
        *(*range(400, 419), 421, 422, 423, 424, 425, 426, 428, 429, 431, 451),
        *(*range(500, 509), 510, 511),
    }
)
GRPC_STATUSES = frozenset(GRPC_STATUS_NAMES)
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE")
_KB, _MB = 1024, 1024 * 1024


def _value(percent: Percent | None) -> float | None:
    return percent.value if percent is not None else None


def _status_error(status: int) -> str | None:
    if not 200 <= status <= 599:
        return f"HTTP status {status} is not in range 200-599"
    return None


def check_redirect(p: Problems, path: Path, redirect: HTTPRedirect | None) -> None:
    if redirect is None:
        return
    targets = (
        redirect.uri,
        redirect.authority,
        redirect.scheme,
        redirect.port,
        redirect.derive_port,
    )
    if not any(targets):
        p.error(path, "redirect must specify uri, authority, scheme, port or derivePort")
    if redirect.redirect_code and not 300 <= redirect.redirect_code <= 399:
        p.error(
            (*path, "redirectCode"),
            f"{redirect.redirect_code} is not a valid redirect code, must be 3xx",
        )
    if redirect.scheme and redirect.scheme not in ("http", "https"):
        p.error((*path, "scheme"), 'invalid redirect scheme, must be "http" or "https"')
    if redirect.port:
        check_port(p, (*path, "port"), redirect.port)
    if redirect.derive_port:
        check_enum(
            p,
            (*path, "derivePort"),
            redirect.derive_port,
            ("FROM_PROTOCOL_DEFAULT", "FROM_REQUEST_PORT"),
        )
        if redirect.port:
            p.error(path, "only one of port or derivePort may be set")


def check_rewrite(p: Problems, path: Path, rewrite: HTTPRewrite | None) -> None:
    if rewrite is None:
        return
    regex = rewrite.uri_regex_rewrite
    if rewrite.uri and regex is not None:
        p.error(path, "rewrite may only contain one of uri or uriRegexRewrite")
    if not rewrite.uri and regex is None and not rewrite.authority:
        p.error(path, "rewrite must specify at least one of uri, uriRegexRewrite or authority")
    if regex is not None:
        where = (*path, "uriRegexRewrite")
        if not regex.match or not regex.rewrite:
            p.error(where, "uriRegexRewrite requires both match and rewrite")
        if regex.match:
            p.add((*where, "match"), regex_error(regex.match))


def check_direct_response(p: Problems, path: Path, response: HTTPDirectResponse | None) -> None:
    if response is None:
        return
    p.add((*path, "status"), _status_error(response.status))
    body = response.body
    if body is None:
        return
    if body.string is not None and body.bytes is not None:
        p.error((*path, "body"), "only one of string or bytes may be set")
    size = len(body.string.encode()) if body.string is not None else 0
    if body.bytes is not None:
        try:
            size = len(base64.b64decode(body.bytes, validate=True))
        except (binascii.Error, ValueError):
            p.error((*path, "body", "bytes"), "bytes must be base64-encoded")
    if size > _MB:
        p.error((*path, "body"), "direct response body must be less than 1MB")
    elif size > 100 * _KB:
        p.warning((*path, "body"), "large direct responses may impact control plane performance")


def check_retries(p: Problems, path: Path, retries: HTTPRetry | None) -> None:
    if retries is None:
        return
    if retries.attempts < 0:
        p.error((*path, "attempts"), "attempts cannot be negative")
    configured = (
        retries.per_try_timeout is not None
        or retries.retry_on
        or retries.retry_remote_localities is not None
    )
    if retries.attempts == 0 and configured:
        p.error(path, "http retry policy configured when attempts are set to 0 (disabled)")
    check_duration(p, (*path, "perTryTimeout"), retries.per_try_timeout)
    if retries.retry_on:
        for policy in retries.retry_on.split(","):
            code = int(policy) if policy.isdigit() and len(policy) <= 3 else 0
            if code not in HTTP_STATUS_CODES and policy not in RETRY_ON:
                hint = " (remove the spaces around ',')" if policy != policy.strip() else ""
                p.error((*path, "retryOn"), f"{quoted(policy)} is not a valid retryOn policy{hint}")


def check_fault(p: Problems, path: Path, route: HTTPRoute) -> None:
    fault = route.fault
    if fault is None:
        return
    if fault.abort is None and fault.delay is None:
        p.error(path, "HTTP fault injection must have an abort and/or a delay")
    if fault.abort is not None:
        _check_abort(p, (*path, "abort"), fault.abort)
    if fault.delay is not None:
        _check_delay(p, (*path, "delay"), fault.delay)


def _check_abort(p: Problems, path: Path, abort: FaultAbort) -> None:
    check_percent(p, (*path, "percentage", "value"), _value(abort.percentage))
    kinds = [
        name
        for name, value in (
            ("httpStatus", abort.http_status),
            ("grpcStatus", abort.grpc_status),
            ("http2Error", abort.http2_error),
        )
        if value is not None
    ]
    if len(kinds) > 1:
        p.error(
            path,
            f"only one of httpStatus, grpcStatus or http2Error may be set, got {', '.join(kinds)}",
        )
    if abort.http_status is not None:
        p.add((*path, "httpStatus"), _status_error(abort.http_status))
    if abort.grpc_status is not None and abort.grpc_status not in GRPC_STATUSES:
        p.error(
            (*path, "grpcStatus"),
            (
                f"gRPC status {quoted(abort.grpc_status)} is "
                "not supported; use a name such as 'NOT_FOUND'"
            ),
        )
    if abort.http2_error is not None:
        p.error((*path, "http2Error"), "HTTP/2 abort fault injection is not supported yet")
    if not kinds:
        p.warning(path, "abort configured, but no httpStatus or grpcStatus set; it has no effect")


def _check_delay(p: Problems, path: Path, delay: FaultDelay) -> None:
    check_percent(p, (*path, "percentage", "value"), _value(delay.percentage))
    check_percent(p, (*path, "percent"), delay.percent, "percent")
    if delay.fixed_delay is not None and delay.exponential_delay is not None:
        p.error(path, "only one of fixedDelay or exponentialDelay may be set")
    check_duration(p, (*path, "fixedDelay"), delay.fixed_delay)
    if delay.exponential_delay is not None:
        p.error((*path, "exponentialDelay"), "exponentialDelay is not supported yet")
    elif delay.fixed_delay is None:
        p.warning(path, "delay configured, but no fixedDelay set; it has no effect")


def check_mirrors(p: Problems, path: Path, route: HTTPRoute) -> None:
    check_destination(p, (*path, "mirror"), route.mirror)
    if route.mirror is not None and route.mirrors:
        p.error(path, "HTTP route cannot contain both mirror and mirrors")
    if route.mirror_percent is not None:
        check_percent(p, (*path, "mirrorPercent"), route.mirror_percent, "mirrorPercent")
        p.warning(
            (*path, "mirrorPercent"),
            'using deprecated setting "mirrorPercent", use "mirrorPercentage" instead',
        )
    if route.mirror_percentage is not None:
        check_percent(
            p,
            (*path, "mirrorPercentage", "value"),
            route.mirror_percentage.value,
            "mirrorPercentage",
        )
    for index, mirror in enumerate(route.mirrors):
        item = (*path, "mirrors", index)
        check_destination(p, (*item, "destination"), mirror.destination)
        if mirror.percentage is not None:
            check_percent(p, (*item, "percentage", "value"), mirror.percentage.value)


def check_cors(p: Problems, path: Path, cors: CorsPolicy | None) -> None:
    if cors is None:
        return
    for index, origin in enumerate(cors.allow_origins):
        where = (*path, "allowOrigins", index)
        if not (origin.exact or origin.prefix or origin.regex):
            p.error(where, "allowOrigins entries need a non-empty exact, prefix or regex")
        else:
            check_string_match(p, where, origin)
    for index, method in enumerate(cors.allow_methods):
        if method not in HTTP_METHODS:
            p.error(
                (*path, "allowMethods", index), f"{quoted(method)} is not a supported HTTP method"
            )
    for field, names in (
        ("allowHeaders", cors.allow_headers),
        ("exposeHeaders", cors.expose_headers),
    ):
        for index, name in enumerate(names):
            if name != "*" and not is_header_name(name):
                p.error(
                    (*path, field, index), f"header name {quoted(name)} is not a valid header name"
                )
    check_duration(p, (*path, "maxAge"), cors.max_age)
    if cors.max_age is not None and cors.max_age >= 1_000_000 and cors.max_age % 1_000_000_000:
        p.error((*path, "maxAge"), "maxAge is accurate only to seconds precision")
    if cors.unmatched_preflights:
        check_enum(
            p,
            (*path, "unmatchedPreflights"),
            cors.unmatched_preflights,
            ("UNSPECIFIED", "FORWARD", "IGNORE"),
        )

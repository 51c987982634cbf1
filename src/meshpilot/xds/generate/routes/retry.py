"""Retry policies: Istio's default and the VirtualService `retries` conversion."""

from __future__ import annotations

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.retry.host.previous_hosts.v3 import previous_hosts_pb2
from envoy.extensions.retry.priority.previous_priorities.v3 import (
    previous_priorities_config_pb2 as pp_pb2,
)

from meshpilot.config.istio.virtual_service import HTTPRetry
from meshpilot.xds.protos import duration, pack, u32

__all__ = ["DEFAULT_RETRY_ON", "default_retry_policy", "retry_policy"]

# Current Istio (EXCLUDE_UNSAFE_503_FROM_DEFAULT_RETRY defaults to true): no blanket 503 retry.
DEFAULT_RETRY_ON = "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
PREVIOUS_HOSTS = "envoy.retry_host_predicates.previous_hosts"
PREVIOUS_PRIORITIES = "envoy.retry_priorities.previous_priorities"

# The codes Go's http.StatusText knows: only these count as status codes in `retryOn`.
_HTTP_STATUS = frozenset(
    (
        *(100, 101, 102, 103, *range(200, 209), 226, *range(300, 306), 307, 308),
        *(*range(400, 419), *range(421, 427), 428, 429, 431, 451, *range(500, 509), 510, 511),
    )
)


def default_retry_policy(consistent_hash: bool = False) -> rc.RetryPolicy:
    """With consistent hashing, retries stay on the same host (no previous_hosts). Copied
    from a template: building the nested message anew is several times slower."""
    policy = rc.RetryPolicy()
    policy.CopyFrom(_TEMPLATES[consistent_hash])
    return policy


def _build_default_retry_policy(consistent_hash: bool) -> rc.RetryPolicy:
    policy = rc.RetryPolicy(
        retry_on=DEFAULT_RETRY_ON, num_retries=u32(2), host_selection_retry_max_attempts=5
    )
    if not consistent_hash:
        policy.retry_host_predicate.append(_previous_hosts())
    return policy


def _previous_hosts() -> rc.RetryPolicy.RetryHostPredicate:
    return rc.RetryPolicy.RetryHostPredicate(
        name=PREVIOUS_HOSTS, typed_config=pack(previous_hosts_pb2.PreviousHostsPredicate())
    )


_TEMPLATES = {flag: _build_default_retry_policy(flag) for flag in (False, True)}


def _parse_retry_on(retry_on: str) -> tuple[str, list[int]]:
    """Split `retryOn` into Envoy retry conditions and numeric status codes."""
    conditions, codes = [], []
    for part in (p.strip() for p in retry_on.split(",")):
        if not part:
            continue
        if part.isdigit() and int(part) in _HTTP_STATUS:
            codes.append(int(part))
        else:
            conditions.append(part)
    return ",".join(conditions), codes


def retry_policy(retries: HTTPRetry | None, consistent_hash: bool) -> rc.RetryPolicy | None:
    """Istio's ConvertPolicy: no `retries` -> default; `attempts: 0` -> no retry policy.
    Callers pass the mesh's defaultHttpRetryPolicy when the route sets no `retries`."""
    out = default_retry_policy(consistent_hash)
    if retries is None:
        return out
    if retries.attempts <= 0:
        return None
    out.num_retries.CopyFrom(u32(retries.attempts))
    if retries.retry_on:
        retry_on, codes = _parse_retry_on(retries.retry_on)
        out.retry_on = retry_on
        out.ClearField("retriable_status_codes")
        out.retriable_status_codes.extend(codes)
        if codes and "retriable-status-codes" not in retry_on:
            out.retry_on += ",retriable-status-codes"
    if retries.per_try_timeout is not None:
        out.per_try_timeout.CopyFrom(duration(retries.per_try_timeout))
    if retries.retry_ignore_previous_hosts is not None:
        out.ClearField("retry_host_predicate")
        if retries.retry_ignore_previous_hosts:
            out.retry_host_predicate.append(_previous_hosts())
    if retries.backoff is not None:
        out.retry_back_off.base_interval.CopyFrom(duration(retries.backoff))
    if retries.retry_remote_localities:
        out.retry_priority.CopyFrom(
            rc.RetryPolicy.RetryPriority(
                name=PREVIOUS_PRIORITIES,
                typed_config=pack(pp_pb2.PreviousPrioritiesConfig(update_frequency=2)),
            )
        )
    return out

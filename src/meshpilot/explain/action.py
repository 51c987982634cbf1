"""What a matched route does: the cluster(s) with their shares, and every setting on the way
(retries, timeout, fault, mirror, rewrite, redirect, header edits)."""

from __future__ import annotations

from dataclasses import dataclass

from envoy.config.route.v3 import route_components_pb2 as rc
from envoy.extensions.filters.http.fault.v3 import fault_pb2
from google.protobuf import duration_pb2

__all__ = ["Action", "route_action"]

FAULT = "envoy.filters.http.fault"
_DENOMINATORS = {0: 100, 1: 10_000, 2: 1_000_000}


@dataclass(frozen=True, slots=True)
class Action:
    clusters: tuple[tuple[str, int], ...]  # (cluster, weight); one entry with weight 100 if plain
    details: tuple[str, ...]
    direct_code: int | None = None  # a redirect or a direct response: no upstream
    abort_code: int | None = None  # a fault abort that hits every request
    abort_share: float = 0.0

    @property
    def chosen(self) -> str:
        """The cluster most requests go to (the heaviest weight)."""
        return max(self.clusters, key=lambda c: c[1])[0] if self.clusters else ""


def _seconds(d: duration_pb2.Duration) -> str:
    total = d.seconds + d.nanos / 1e9
    return f"{total:g}s"


def route_action(route: rc.Route) -> Action:
    details: list[str] = []
    which = route.WhichOneof("action")
    if which == "redirect":
        r = route.redirect
        target = r.host_redirect or "(same host)"
        path = r.path_redirect or r.prefix_rewrite or "(same path)"
        code = {0: 301, 1: 302, 2: 303, 3: 307, 4: 308}[r.response_code]
        scheme = r.scheme_redirect or ("https" if r.https_redirect else "")
        details.append(f"redirect {code} to {scheme + '://' if scheme else ''}{target}{path}")
        return Action((), tuple(details), direct_code=code)
    if which == "direct_response":
        details.append(f"direct response {route.direct_response.status}")
        return Action((), tuple(details), direct_code=route.direct_response.status)
    action = route.route
    if action.HasField("weighted_clusters"):
        total = sum(c.weight.value for c in action.weighted_clusters.clusters) or 1
        clusters = tuple((c.name, c.weight.value) for c in action.weighted_clusters.clusters)
        for name, weight in clusters:
            details.append(f"weight {weight} ({100 * weight / total:g}%) -> {name}")
    else:
        clusters = ((action.cluster, 100),)
    details.extend(_action_settings(action))
    details.extend(_header_edits(route))
    abort_code, share = _fault(route, details)
    return Action(
        clusters,
        tuple(details),
        abort_code=abort_code if share >= 1.0 else None,
        abort_share=share,
    )


def _action_settings(action: rc.RouteAction) -> list[str]:
    out: list[str] = []
    if action.HasField("timeout"):
        t = _seconds(action.timeout)
        out.append("timeout: none (0s)" if t == "0s" else f"timeout {t}")
    if action.HasField("retry_policy"):
        rp = action.retry_policy
        per_try = (
            f", per try {_seconds(rp.per_try_timeout)}" if rp.HasField("per_try_timeout") else ""
        )
        out.append(f"retries {rp.num_retries.value} on {rp.retry_on}{per_try}")
    if action.prefix_rewrite:
        out.append(f"rewrite path prefix to {action.prefix_rewrite}")
    if action.HasField("regex_rewrite"):
        rr = action.regex_rewrite
        out.append(f"rewrite path {rr.pattern.regex} -> {rr.substitution}")
    if action.host_rewrite_literal:
        out.append(f"rewrite host to {action.host_rewrite_literal}")
    for mirror in action.request_mirror_policies:
        pct = ""
        if mirror.HasField("runtime_fraction"):
            f = mirror.runtime_fraction.default_value
            pct = f" ({100 * f.numerator / _DENOMINATORS[f.denominator]:g}%)"
        out.append(f"mirror to {mirror.cluster}{pct}")
    return out


def _header_edits(route: rc.Route) -> list[str]:
    out = [
        f"set request header {h.header.key}: {h.header.value}" for h in route.request_headers_to_add
    ]
    out += [f"remove request header {name}" for name in route.request_headers_to_remove]
    out += [
        f"set response header {h.header.key}: {h.header.value}"
        for h in route.response_headers_to_add
    ]
    out += [f"remove response header {name}" for name in route.response_headers_to_remove]
    return out


def _fault(route: rc.Route, details: list[str]) -> tuple[int | None, float]:
    """The abort status and the share of requests it hits; delays go to `details`."""
    if FAULT not in route.typed_per_filter_config:
        return None, 0.0
    fault = fault_pb2.HTTPFault()
    route.typed_per_filter_config[FAULT].Unpack(fault)
    if fault.HasField("delay"):
        pct = _percent(fault.delay.percentage)
        details.append(f"fault: delay {_seconds(fault.delay.fixed_delay)} for {pct:g}% of requests")
    if fault.HasField("abort") and fault.abort.http_status:
        pct = _percent(fault.abort.percentage)
        details.append(f"fault: abort with {fault.abort.http_status} for {pct:g}% of requests")
        return fault.abort.http_status, pct / 100
    return None, 0.0


def _percent(p: object) -> float:
    numerator = getattr(p, "numerator", 0)
    denominator = _DENOMINATORS.get(getattr(p, "denominator", 0), 100)
    return float(100 * numerator / denominator)

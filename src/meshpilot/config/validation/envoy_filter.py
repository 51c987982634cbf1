"""EnvoyFilter: selector, patch kinds and operations, matches that fit the patched object
(Istio's validateEnvoyFilter)."""

from __future__ import annotations

from typing import Any

from meshpilot.config.istio.envoy_filter import EnvoyConfigObjectPatch, EnvoyFilter, ProxyMatch
from meshpilot.config.validation.common import Path, Problems, check_enum, check_selector
from meshpilot.config.validation.re2 import regex_error

__all__ = ["validate_envoy_filter"]

SPEC: Path = ("spec",)
APPLY_TO = (
    "LISTENER",
    "FILTER_CHAIN",
    "NETWORK_FILTER",
    "HTTP_FILTER",
    "ROUTE_CONFIGURATION",
    "VIRTUAL_HOST",
    "HTTP_ROUTE",
    "CLUSTER",
    "EXTENSION_CONFIG",
    "BOOTSTRAP",
    "LISTENER_FILTER",
)
OPERATIONS = (
    "MERGE",
    "ADD",
    "REMOVE",
    "INSERT_BEFORE",
    "INSERT_AFTER",
    "INSERT_FIRST",
    "REPLACE",
)
CONTEXTS = ("ANY", "SIDECAR_INBOUND", "SIDECAR_OUTBOUND", "GATEWAY")
FILTER_CLASSES = ("UNSPECIFIED", "AUTHN", "AUTHZ", "STATS")
_LISTENER_CLASS = ("LISTENER", "FILTER_CHAIN", "NETWORK_FILTER", "HTTP_FILTER", "LISTENER_FILTER")
_ROUTE_CLASS = ("ROUTE_CONFIGURATION", "VIRTUAL_HOST", "HTTP_ROUTE")
_INSERTABLE = ("NETWORK_FILTER", "HTTP_FILTER", "HTTP_ROUTE", "LISTENER_FILTER")
_INSERTS = ("INSERT_BEFORE", "INSERT_AFTER", "INSERT_FIRST")
_REPLACEABLE = ("HTTP_FILTER", "NETWORK_FILTER")
_HCM = ("envoy.filters.network.http_connection_manager", "envoy.http_connection_manager")


def validate_envoy_filter(envoy_filter: EnvoyFilter, p: Problems) -> None:
    spec = envoy_filter.spec
    if spec.workload_selector is not None:
        if spec.target_refs:
            p.error(
                (*SPEC, "workloadSelector"), "only one of targetRefs or workloadSelector can be set"
            )
        check_selector(
            p, (*SPEC, "workloadSelector", "labels"), spec.workload_selector.labels, "EnvoyFilter"
        )
    if not spec.config_patches:
        p.error((*SPEC, "configPatches"), "Envoy filter: configPatches must not be empty")
    for index, patch in enumerate(spec.config_patches):
        path = (*SPEC, "configPatches", index)
        if patch is None:
            p.error(path, "Envoy filter: null config patch")
            continue
        _check_patch(p, path, patch)


def _check_patch(p: Problems, path: Path, cp: EnvoyConfigObjectPatch) -> None:
    apply_to = cp.apply_to
    if apply_to == "INVALID":
        p.error((*path, "applyTo"), "Envoy filter: missing applyTo")
    else:
        check_enum(p, (*path, "applyTo"), apply_to, APPLY_TO)
    if cp.match is not None:
        match, where = cp.match, (*path, "match")
        check_enum(p, (*where, "context"), match.context, CONTEXTS)
        if match.proxy is not None:
            _check_proxy(p, (*where, "proxy"), match.proxy)
        _check_match_class(p, where, apply_to, cp)
        if isinstance(match.listener, dict):
            _check_filter_match(
                p, (*where, "listener", "filterChain", "filter"), apply_to, match.listener
            )
    if cp.patch is None:
        p.error((*path, "patch"), "Envoy filter: missing patch")
        return
    patch, where = cp.patch, (*path, "patch")
    operation = patch.operation
    if operation == "INVALID":
        p.error((*where, "operation"), "Envoy filter: missing operation")
        return
    check_enum(p, (*where, "operation"), operation, OPERATIONS)
    check_enum(p, (*where, "filterClass"), patch.filter_class, FILTER_CLASSES)
    if operation != "REMOVE" and patch.value is None:
        p.error((*where, "value"), "Envoy filter: missing patch value for non-remove operation")
    if operation in _INSERTS and apply_to not in _INSERTABLE:
        p.error(
            (*where, "operation"),
            "Envoy filter: Insert operation supported only for listener filters, network "
            "filters, http filters and http routes",
        )
    if operation == "REPLACE" and apply_to not in _REPLACEABLE:
        p.error(
            (*where, "operation"),
            "Envoy filter: Replace operation is only valid for HTTP_FILTER and NETWORK_FILTER",
        )
    elif (
        apply_to in APPLY_TO
        and operation in OPERATIONS
        and operation != "REMOVE"
        and (operation not in _INSERTS or apply_to in _INSERTABLE)
    ):
        _check_value(p, (*where, "value"), apply_to, operation, patch.value)


def _check_value(
    p: Problems, path: Path, apply_to: str, operation: str, value: dict[str, Any] | None
) -> None:
    """The value must parse as the message applyTo names (Istio's strict
    BuildXDSObjectFromStruct); a whole object (not a MERGE) must also keep the rules Envoy
    checks."""
    from meshpilot.xds.patch.checks import first_violation
    from meshpilot.xds.patch.values import PatchValueError, parse_value

    try:
        parsed = parse_value(apply_to, value)
    except PatchValueError as exc:
        p.error(path, f"Envoy filter: {exc}")
        return
    problem = first_violation(parsed) if operation != "MERGE" else None
    if problem is not None:
        p.error(path, f"Envoy filter: Envoy would reject this {apply_to} value: {problem}")


def _check_proxy(p: Problems, path: Path, proxy: ProxyMatch) -> None:
    if proxy.proxy_version:
        message = regex_error(proxy.proxy_version)
        if message is not None:
            p.error(
                (*path, "proxyVersion"), f"Envoy filter: invalid regex for proxy version, {message}"
            )


def _check_match_class(p: Problems, path: Path, apply_to: str, cp: EnvoyConfigObjectPatch) -> None:
    match = cp.match
    assert match is not None
    listener = match.listener is not None
    route = match.route_configuration is not None
    cluster = match.cluster is not None
    if apply_to in _LISTENER_CLASS and (route or cluster):
        p.error(
            path, "Envoy filter: applyTo for listener class objects cannot have non listener match"
        )
    elif apply_to in _ROUTE_CLASS and (listener or cluster):
        p.error(
            path,
            "Envoy filter: applyTo for http route class objects cannot have non route "
            "configuration match",
        )
    elif apply_to == "CLUSTER" and (listener or route):
        p.error(
            path, "Envoy filter: applyTo for cluster class objects cannot have non cluster match"
        )


def _check_filter_match(p: Problems, path: Path, apply_to: str, listener: dict[str, Any]) -> None:
    """The network filter (and HTTP sub-filter) a listener match names."""
    chain = listener.get("filterChain")
    match = chain.get("filter") if isinstance(chain, dict) else None
    if not isinstance(match, dict):
        return
    if apply_to in ("LISTENER", "FILTER_CHAIN"):
        p.warning(path, f"Envoy filter: filter match has no effect when used with {apply_to}")
    name = match.get("name")
    sub = match.get("subFilter")
    if not name:
        p.error((*path, "name"), "Envoy filter: filter match has no name to match on")
    elif sub is not None:
        where = (*path, "subFilter")
        if apply_to != "HTTP_FILTER":
            p.error(
                where, "Envoy filter: subfilter match can be used with applyTo HTTP_FILTER only"
            )
        if name not in _HCM:
            p.error(where, f"Envoy filter: subfilter match requires filter match with {_HCM[0]}")
        if not (isinstance(sub, dict) and sub.get("name")):
            p.error((*where, "name"), "Envoy filter: subfilter match has no name to match on")

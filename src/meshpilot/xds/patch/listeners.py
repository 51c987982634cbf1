"""Listener patches, level by level as Istio applies them: LISTENER, LISTENER_FILTER,
FILTER_CHAIN, NETWORK_FILTER, HTTP_FILTER (inside HTTP connection managers), then the
route patches on route configurations inlined in connection managers (sidecar inbound).

Each `Step` changes one listener in place and says whether it did (or that the listener is
removed); xds/patch/engine.py runs the steps on copies, so a failing patch is skipped.
"""

from __future__ import annotations

from collections.abc import Callable

from envoy.config.listener.v3 import listener_components_pb2, listener_pb2
from envoy.extensions.filters.network.http_connection_manager.v3 import (
    http_connection_manager_pb2 as hcm_pb2,
)

from meshpilot.xds.patch.lists import apply_list_operation
from meshpilot.xds.patch.matching import (
    canonical_filter_name,
    chain_matches,
    context_matches,
    field,
    listener_matches,
)
from meshpilot.xds.patch.merge import merge_message
from meshpilot.xds.patch.routes import patch_route_config
from meshpilot.xds.patch.selection import ConfigPatch

__all__ = ["LISTENER_LEVELS", "REMOVED", "Outcome", "patch_listener"]

REMOVED = "removed"
Outcome = bool | str
LISTENER_LEVELS = (
    "LISTENER",
    "LISTENER_FILTER",
    "FILTER_CHAIN",
    "NETWORK_FILTER",
    "HTTP_FILTER",
    "ROUTE_CONFIGURATION",
    "VIRTUAL_HOST",
    "HTTP_ROUTE",
)
_HCM = "envoy.filters.network.http_connection_manager"


def patch_listener(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    if not context_matches(patch, context) or (
        patch.operation == "ADD" and patch.apply_to == "LISTENER"
    ):
        return False
    if not listener_matches(listener, patch.listener):
        return False
    return _LEVEL[patch.apply_to](listener, patch, context)


def _listener(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    if patch.operation == "REMOVE":
        return REMOVED
    if patch.operation == "MERGE" and patch.value is not None:
        merge_message(listener, patch.value)
        return True
    return False


def _listener_filter(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    wanted = field(patch.listener, "listenerFilter")
    return apply_list_operation(
        listener.listener_filters,
        patch.operation,
        patch.value,
        lambda f: canonical_filter_name(f.name) == canonical_filter_name(wanted),
        bool(wanted),
    )


def _all_chains(listener: listener_pb2.Listener) -> list[listener_components_pb2.FilterChain]:
    """The filter chains and the default chain (patched like the others, as Istio does)."""
    chains = list(listener.filter_chains)
    if listener.HasField("default_filter_chain"):
        chains.append(listener.default_filter_chain)
    return chains


def _chains(
    listener: listener_pb2.Listener, patch: ConfigPatch
) -> list[listener_components_pb2.FilterChain]:
    return [c for c in _all_chains(listener) if chain_matches(listener, c, patch.listener)]


def _filter_chain(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    if patch.operation == "ADD":
        assert patch.value is not None
        listener.filter_chains.add().CopyFrom(patch.value)
        return True
    changed = apply_list_operation(
        listener.filter_chains,
        patch.operation,
        patch.value,
        lambda c: chain_matches(listener, c, patch.listener),
        True,
    )
    default = listener.default_filter_chain
    if listener.HasField("default_filter_chain") and chain_matches(
        listener, default, patch.listener
    ):
        if patch.operation == "REMOVE":
            listener.ClearField("default_filter_chain")
            return True
        if patch.operation == "MERGE" and patch.value is not None:
            merge_message(default, patch.value)
            return True
    return changed


def _filter_match(patch: ConfigPatch) -> dict[str, object] | None:
    found = field(field(patch.listener, "filterChain"), "filter")
    return found if isinstance(found, dict) else None


def _network_filter(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    wanted = field(_filter_match(patch), "name")
    changed = False
    for chain in _chains(listener, patch):
        if wanted and not any(_same(f.name, wanted) for f in chain.filters):
            continue  # the chain lacks the named filter: not matched
        changed |= apply_list_operation(
            chain.filters,
            patch.operation,
            patch.value,
            lambda f: _same(f.name, wanted),
            bool(wanted),
        )
    return changed


def _http_filter(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    match = _filter_match(patch)
    if (name := field(match, "name")) and not _same(name, _HCM):
        return False
    sub = field(field(match, "subFilter"), "name")

    def edit(hcm: hcm_pb2.HttpConnectionManager) -> bool:
        if sub and not any(_same(f.name, sub) for f in hcm.http_filters):
            return False
        return apply_list_operation(
            hcm.http_filters, patch.operation, patch.value, lambda f: _same(f.name, sub), bool(sub)
        )

    return _each_hcm(listener, patch, edit)


def _route(listener: listener_pb2.Listener, patch: ConfigPatch, context: str) -> Outcome:
    """Route patches on route configurations inlined in a connection manager."""

    def edit(hcm: hcm_pb2.HttpConnectionManager) -> bool:
        if not hcm.HasField("route_config"):
            return False
        return patch_route_config(hcm.route_config, patch, context, gateway=False)

    return _each_hcm(listener, None, edit)


def _each_hcm(
    listener: listener_pb2.Listener,
    patch: ConfigPatch | None,
    edit: Callable[[hcm_pb2.HttpConnectionManager], bool],
) -> bool:
    changed = False
    chains = _all_chains(listener) if patch is None else _chains(listener, patch)
    for chain in chains:
        for net in chain.filters:
            if net.name != _HCM or not net.HasField("typed_config"):
                continue
            hcm = hcm_pb2.HttpConnectionManager()
            if not net.typed_config.Unpack(hcm):
                continue
            if edit(hcm):
                net.typed_config.Pack(hcm)
                changed = True
    return changed


def _same(name: str, wanted: object) -> bool:
    return isinstance(wanted, str) and canonical_filter_name(name) == canonical_filter_name(wanted)


_LEVEL: dict[str, Callable[[listener_pb2.Listener, ConfigPatch, str], Outcome]] = {
    "LISTENER": _listener,
    "LISTENER_FILTER": _listener_filter,
    "FILTER_CHAIN": _filter_chain,
    "NETWORK_FILTER": _network_filter,
    "HTTP_FILTER": _http_filter,
    "ROUTE_CONFIGURATION": _route,
    "VIRTUAL_HOST": _route,
    "HTTP_ROUTE": _route,
}

"""A VirtualService's HTTP routes as Istio translates them: short hosts resolved in the
namespace that wrote them, and delegate VirtualServices merged into their root
(Istio's resolveVirtualServiceShortnames and mergeVirtualServicesIfNeeded)."""

from __future__ import annotations

from meshpilot.config.hosts import resolve_host
from meshpilot.config.istio.common import StringMatch
from meshpilot.config.istio.virtual_service import Destination, HTTPMatchRequest, HTTPRoute
from meshpilot.model.indexes.virtual_services import BoundVirtualService, resolve_gateway_name
from meshpilot.model.push_context import PushContext
from meshpilot.model.visibility import visible_to

__all__ = ["http_routes"]

# Fields a delegate route inherits from its root when it does not set them.
_INHERITED = (
    "rewrite",
    "timeout",
    "retries",
    "fault",
    "mirror",
    "mirror_percent",
    "mirror_percentage",
    "cors_policy",
    "headers",
)


def _resolve_dest(d: Destination, namespace: str, suffix: str) -> Destination:
    host = resolve_host(d.host, namespace, suffix)
    return d if host == d.host else d.model_copy(update={"host": host})


def _resolve(route: HTTPRoute, namespace: str, suffix: str) -> HTTPRoute:
    """A delegate's route: destination and mirror hosts become FQDNs (its own namespace is
    not the root's), match gateways `namespace/name`. Only what changes is copied."""
    update: dict[str, object] = {}
    dests = []
    for d in route.route:
        dest = _resolve_dest(d.destination, namespace, suffix)
        dests.append(d if dest is d.destination else d.model_copy(update={"destination": dest}))
    if any(a is not b for a, b in zip(dests, route.route, strict=True)):
        update["route"] = dests
    if route.mirrors:
        update["mirrors"] = [
            m.model_copy(update={"destination": _resolve_dest(m.destination, namespace, suffix)})
            for m in route.mirrors
        ]
    if route.mirror is not None:
        update["mirror"] = _resolve_dest(route.mirror, namespace, suffix)
    resolved = route.model_copy(update=update) if update else route
    return _resolve_gateways(resolved, namespace)


def _resolve_gateways(route: HTTPRoute, namespace: str) -> HTTPRoute:
    """Match gateways become `namespace/name`. A root VirtualService's destination hosts
    stay as written: RouteContext.host resolves them in its namespace where they are used,
    which spares a pydantic copy of every route (copies dominated translation time)."""
    for m in route.match:  # a loop, not any(): this runs for every route
        if m.gateways:
            break
    else:
        return route
    matches = [
        m.model_copy(update={"gateways": [resolve_gateway_name(g, namespace) for g in m.gateways]})
        for m in route.match
    ]
    return route.model_copy(update={"match": matches})


def http_routes(push: PushContext, vs: BoundVirtualService) -> list[HTTPRoute]:
    """Resolved (and delegate-merged) routes; the same for every port and proxy, so built
    once per push."""
    memo = push.memo.get("routes.http_routes")
    if memo is None:  # not setdefault: its default dict was made on every call
        memo = push.memo["routes.http_routes"] = {}
    assert isinstance(memo, dict)
    found = memo.get(vs.obj.key)
    if found is None:
        found = memo[vs.obj.key] = _http_routes(push, vs)
    return found


def _http_routes(push: PushContext, vs: BoundVirtualService) -> list[HTTPRoute]:
    suffix = push.domain_suffix
    out: list[HTTPRoute] = []
    for route in vs.obj.model.spec.http:
        root = _resolve_gateways(route, vs.namespace)
        if route.delegate is None:
            out.append(root)
            continue
        delegate = _visible_delegate(push, route, vs.namespace)
        if delegate is None:
            continue  # a missing or hidden delegate drops only this route
        for sub in delegate.obj.model.spec.http:
            if sub.delegate is not None:
                continue  # delegation is one level deep
            merged = _merge_route(root, _resolve(sub, delegate.namespace, suffix))
            if merged is not None:
                out.append(merged)
    return out


def _visible_delegate(
    push: PushContext, route: HTTPRoute, root_namespace: str
) -> BoundVirtualService | None:
    assert route.delegate is not None
    namespace = route.delegate.namespace or root_namespace
    delegate = push.virtual_services.delegate(route.delegate.name, namespace)
    if delegate is None:
        return None
    export_to = delegate.obj.model.spec.export_to
    default = push.virtual_services.default_export_to
    return delegate if visible_to(export_to, namespace, root_namespace, default) else None


def _joined(root: str, leaf: str) -> str:
    return f"{root}-{leaf}" if root and leaf else leaf or root


def _merge_route(root: HTTPRoute, leaf: HTTPRoute) -> HTTPRoute | None:
    """The leaf's route under the root's conditions; None when their matches conflict."""
    matches = _merge_matches(root.match, leaf.match)
    if matches is None:
        return None
    update: dict[str, object] = {"match": matches, "name": _joined(root.name, leaf.name)}
    for name in _INHERITED:
        if getattr(leaf, name) is None:
            update[name] = getattr(root, name)
    return leaf.model_copy(update=update)


def _merge_matches(
    root: list[HTTPMatchRequest], leaf: list[HTTPMatchRequest]
) -> list[HTTPMatchRequest] | None:
    """Every leaf match must fit at least one root match; each fit is ANDed."""
    if not root:
        return leaf
    if not leaf:
        return root
    out = []
    for sub in leaf:
        fits = [_merge_match(r, sub) for r in root if not _conflicts(r, sub)]
        if not fits:
            return None
        out.extend(fits)
    return out


def _merge_match(root: HTTPMatchRequest, leaf: HTTPMatchRequest) -> HTTPMatchRequest:
    return leaf.model_copy(
        update={
            "name": _joined(root.name, leaf.name),
            "uri": leaf.uri or root.uri,
            "scheme": leaf.scheme or root.scheme,
            "method": leaf.method or root.method,
            "authority": leaf.authority or root.authority,
            "headers": {**root.headers, **leaf.headers},
            "without_headers": {**root.without_headers, **leaf.without_headers},
            "query_params": {**root.query_params, **leaf.query_params},
            "port": leaf.port or root.port,
            "source_labels": {**root.source_labels, **leaf.source_labels},
            "source_namespace": leaf.source_namespace or root.source_namespace,
            "gateways": leaf.gateways or root.gateways,
        }
    )


def _conflicts(root: HTTPMatchRequest, leaf: HTTPMatchRequest) -> bool:
    pairs = [
        (root.uri, leaf.uri),
        (root.scheme, leaf.scheme),
        (root.method, leaf.method),
        (root.authority, leaf.authority),
        *((root.headers.get(k), v) for k, v in leaf.headers.items()),
        *((root.without_headers.get(k), v) for k, v in leaf.without_headers.items()),
        *((root.query_params.get(k), v) for k, v in leaf.query_params.items()),
    ]
    if any(_string_conflict(r, v) for r, v in pairs):
        return True
    if root.ignore_uri_case != leaf.ignore_uri_case:
        return True
    if root.port and leaf.port and root.port != leaf.port:
        return True
    if root.source_namespace and leaf.source_namespace != root.source_namespace:
        return True
    if any(
        k in root.source_labels and root.source_labels[k] != v
        for k, v in leaf.source_labels.items()
    ):
        return True
    # The root's gateways must include the leaf's.
    if root.gateways and leaf.gateways:
        return len(root.gateways) < len(leaf.gateways) or not set(leaf.gateways) <= set(
            root.gateways
        )
    return False


def _string_conflict(root: StringMatch | None, leaf: StringMatch | None) -> bool:
    """Can `leaf` only narrow `root`? Regexes are never comparable."""
    if root is None or leaf is None:
        return False
    if root.regex or leaf.regex:
        return True
    if root.exact:
        return bool(leaf.prefix) or leaf.exact != root.exact
    if root.prefix:
        if leaf.prefix:
            return not leaf.prefix.startswith(root.prefix)
        if leaf.exact:
            return not leaf.exact.startswith(root.prefix)
    return True

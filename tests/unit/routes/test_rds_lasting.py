"""Route parts kept across pushes (routes/lasting.py): after any change, the next push's
sidecar route configs are byte-identical to a cold build, and after a change of one
VirtualService only that VirtualService is translated again."""

from __future__ import annotations

import pytest
from tests.unit.routes.rds_helpers import SERVICES, pod, proxy_of, validate_routes

from meshpilot.config.loader import LoadResult, load_text
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.store.matching import changed_keys
from meshpilot.xds.cache import carry_over
from meshpilot.xds.generate.routes import generate_sidecar_routes
from meshpilot.xds.generate.routes.lasting import ClassRoutes

MESH = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultHttpRetryPolicy: {attempts: 2, retryOn: "5xx"}
"""
REVIEWS_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /v2}}]
    route: [{destination: {host: reviews, subset: v2}}]
  - match: [{uri: {prefix: /details}}]
    route: [{destination: {host: details.other.svc.cluster.local}}]
  - route:
    - {destination: {host: reviews, subset: v1}, weight: 90}
    - {destination: {host: reviews, subset: v2}, weight: 10}
"""
RATINGS_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - match: [{sourceLabels: {version: v7}}]
    route: [{destination: {host: ratings}}]
    timeout: 1s
  - route: [{destination: {host: ratings}}]
    timeout: 3s
"""
DETAILS_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: other}
spec:
  hosts: [details]
  http:
  - match: [{uri: {prefix: /api}}]
    delegate: {name: details-api, namespace: other}
  - route: [{destination: {host: details}}]
"""
# Names reviews too, after REVIEWS_VS in precedence: its routes are made, its virtual host
# is never built (REVIEWS_VS's takes the name).
SHADOW_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-shadow, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews, subset: v1}}]
    timeout: 9s
"""
DELEGATE = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details-api, namespace: other}
spec:
  http:
  - route: [{destination: {host: details, port: {number: 9090}}}]
"""
REVIEWS_DR = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
"""
# Seen by a client only while `details` is in its Sidecar's egress.
DETAILS_DR = """\
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: details, namespace: other}
spec:
  host: details
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}
"""
SIDECAR = """\
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress: [{hosts: ["*/*"]}]
"""
BASE = [
    SIDECAR,
    SERVICES,
    pod("client"),
    MESH,
    REVIEWS_VS,
    RATINGS_VS,
    DETAILS_VS,
    SHADOW_VS,
    DELEGATE,
    REVIEWS_DR,
    DETAILS_DR,
]

# Each change, as (old document, new document): one input a virtual host reads.
CHANGES = {
    "virtual service": (
        REVIEWS_VS,
        REVIEWS_VS.replace("weight: 90", "weight: 80").replace("weight: 10", "weight: 20"),
    ),
    "virtual service timeout": (REVIEWS_VS, REVIEWS_VS + "    timeout: 4s\n"),
    "virtual service without http": (
        DETAILS_VS,
        DETAILS_VS.split("  http:")[0] + "  tcp:\n  - route: [{destination: {host: details}}]\n",
    ),
    "shadowed virtual service": (SHADOW_VS, SHADOW_VS.replace("9s", "8s")),
    "virtual service gateway": (
        RATINGS_VS,
        RATINGS_VS.replace("hosts: [ratings]", "hosts: [ratings]\n  gateways: [ingress]"),
    ),
    "delegate": (DELEGATE, DELEGATE.replace("number: 9090", "number: 9080")),
    "destination rule": (
        REVIEWS_DR,
        REVIEWS_DR
        + ("  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}\n"),
    ),
    "service port": (
        SERVICES,
        SERVICES.replace(
            "ports: [{name: http, port: 9080}]\n---\napiVersion: v1\nkind: Service\n"
            "metadata: {name: details",
            "ports: [{name: http, port: 9080}, {name: http-b, port: 9090}]\n---\napiVersion: v1\n"
            "kind: Service\nmetadata: {name: details",
        ),
    ),
    "service address": (SERVICES, SERVICES.replace("10.96.0.13", "10.96.0.99")),
    "sidecar egress": (SIDECAR, SIDECAR.replace("*/*", "./*")),
    "mesh config": (MESH, MESH.replace('attempts: 2, retryOn: "5xx"', "attempts: 4")),
    "client labels": (pod("client"), pod("client", labels="{app: productpage, version: v7}")),
}


def _load(docs: list[str]) -> LoadResult:
    result = load_text("\n---\n".join(d.strip() for d in docs))
    assert not result.errors, [str(d) for d in result.errors]
    return result


def _next_push(
    prev: PushContext, old: LoadResult, new: LoadResult
) -> tuple[PushContext, LoadResult]:
    """The next push as the server builds it: the store keeps the very objects it did not
    read again, and route configs the change cannot touch are carried over."""
    before = {o.key: o for o in old.objects}
    after = {o.key: o for o in new.objects}
    changed = changed_keys(before, after)
    objects = [after[k] if k in changed else before[k] for k in sorted(after)]
    mesh = old.mesh if old.mesh == new.mesh else new.mesh
    push = build_push_context(objects, mesh, 2, None, prev, changed, None)
    carry_over(prev, push, changed)
    return push, LoadResult(objects=objects, mesh=mesh)


def _routes(push: PushContext) -> dict[str, bytes]:
    configs = generate_sidecar_routes(push, proxy_of(push, "client"), None)
    return {c.name: c.SerializeToString() for c in configs}


def _class_routes(push: PushContext) -> list[ClassRoutes]:
    return [e for e in push.lasting.current.values() if isinstance(e, ClassRoutes)]


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_next_push_equals_a_cold_build(change: str) -> None:
    old_doc, new_doc = CHANGES[change]
    old = _load(BASE)
    new_docs = [new_doc if d == old_doc else d for d in BASE]
    new = _load(new_docs)
    push0 = build_push_context(old.objects, old.mesh)
    first = _routes(push0)
    push1, _ = _next_push(push0, old, new)
    warm = _routes(push1)
    cold = _routes(build_push_context(new.objects, new.mesh))
    assert warm == cold
    if change != "shadowed virtual service":  # its virtual host is never built
        assert warm != first, "the change must show in the route configs"
    validate_routes(generate_sidecar_routes(push1, proxy_of(push1, "client"), None))


def _translated_and_reused(change: str) -> tuple[int, int]:
    """The class's VirtualServices translated and taken as they were in the push after
    `change` (the class itself kept across it)."""
    old_doc, new_doc = CHANGES[change]
    old = _load(BASE)
    new = _load([new_doc if d == old_doc else d for d in BASE])
    push0 = build_push_context(old.objects, old.mesh)
    _routes(push0)
    (kept,) = _class_routes(push0)
    encoded_before, reused_before = kept.encoded, kept.reused
    push1, _ = _next_push(push0, old, new)
    _routes(push1)
    assert _class_routes(push1) == [kept]
    return kept.encoded - encoded_before, kept.reused - reused_before


def test_a_route_edit_translates_that_virtual_service_alone_and_walks_no_other() -> None:
    """Weights changed: the class edits its previous route config (xds/route_edits.py):
    reviews translated again, no other VirtualService even looked up."""
    assert _translated_and_reused("virtual service") == (1, 0)


def test_an_edit_that_moves_a_virtual_service_translates_only_it_and_walks_the_rest() -> None:
    """Bound to a gateway now (not a routes-only edit): the port's config is built afresh,
    the other VirtualServices' routes taken as they were."""
    translated, reused = _translated_and_reused("virtual service gateway")
    assert translated == 0  # ratings is no longer the mesh's
    assert reused >= 2


def test_a_push_without_change_of_its_inputs_translates_nothing() -> None:
    old = _load(BASE)
    new = _load([*BASE, pod("other-client", labels="{app: other}")])
    push0 = build_push_context(old.objects, old.mesh)
    first = _routes(push0)
    (kept,) = _class_routes(push0)
    encoded = kept.encoded
    push1, _ = _next_push(push0, old, new)
    assert _routes(push1) == first
    assert kept.encoded == encoded


def test_parts_unused_for_two_pushes_are_dropped() -> None:
    old = _load(BASE)
    push0 = build_push_context(old.objects, old.mesh)
    _routes(push0)
    push1, loaded1 = _next_push(push0, old, old)
    push2, _ = _next_push(push1, loaded1, loaded1)  # nobody asked for routes in push1
    assert _class_routes(push1) == []
    assert _class_routes(push2) == []
    assert push2.lasting.get(next(iter(push0.lasting.current))) is None


def test_parts_outlive_endpoint_pushes_that_never_ask_for_routes() -> None:
    """Endpoint pushes (EDS only) build no route: what the class kept survives any number
    of them, and the VirtualService change after them translates that VirtualService alone
    (B3: it translated every one again, 1.2 s at 1000 proxies)."""
    docs = list(BASE)
    loaded = _load(docs)
    push = build_push_context(loaded.objects, loaded.mesh)
    first = _routes(push)
    (kept,) = _class_routes(push)
    encoded = kept.encoded
    for i in range(3):
        docs.append(pod(f"batch-{i}", labels="{app: batch}"))  # services stay the same
        push, loaded = _next_push(push, loaded, _load(docs))
    assert _class_routes(push) == [kept]
    old_doc, new_doc = CHANGES["virtual service"]
    edited = _load([new_doc if d == old_doc else d for d in docs])
    push, _ = _next_push(push, loaded, edited)
    warm = _routes(push)
    assert warm != first
    assert warm == _routes(build_push_context(edited.objects, edited.mesh))
    assert kept.encoded - encoded == 1

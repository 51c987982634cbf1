"""Which policies apply to a workload: root namespace (mesh-wide), own namespace, selector;
targetRefs-only policies skip sidecars; answers are memoised per (namespace, labels)."""

from __future__ import annotations

from meshpilot.model.indexes.authz import workload_security
from tests.unit.authz.helpers import push_of


def _policy(name: str, namespace: str, spec: str) -> str:
    return (
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        f"metadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n---\n"
    )


MESH = (
    _policy("mesh-deny", "istio-system", "{action: DENY, rules: [{}]}")
    + _policy("mesh-selected", "istio-system", "{selector: {matchLabels: {app: a}}, rules: [{}]}")
    + _policy("ns-allow", "foo", "{rules: [{}]}")
    + _policy("ns-audit", "foo", "{action: AUDIT, rules: [{}]}")
    + _policy(
        "for-a", "foo", "{selector: {matchLabels: {app: a, v: '1'}}, action: DENY, rules: [{}]}"
    )
    + _policy("for-b", "foo", "{selector: {matchLabels: {app: b}}, rules: [{}]}")
    + _policy(
        "waypoint",
        "foo",
        "{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: w}], rules: [{}]}",
    )
    + _policy("other-ns", "bar", "{rules: [{}]}")
    + "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\n"
    "metadata: {name: jwt, namespace: foo}\nspec: {selector: {matchLabels: {app: a}}}\n"
)


def _names(objs: tuple[object, ...]) -> list[str]:
    return [o.name for o in objs]  # type: ignore[attr-defined]


def test_mesh_namespace_and_selector_scopes() -> None:
    push = push_of(MESH)
    found = workload_security(push, "foo", {"app": "a", "v": "1"})
    assert _names(found.deny) == ["mesh-deny", "for-a"]
    assert _names(found.allow) == ["mesh-selected", "ns-allow"]
    assert _names(found.audit) == ["ns-audit"]
    assert _names(found.request_authn) == ["jwt"]


def test_selector_must_be_a_subset_of_the_labels() -> None:
    push = push_of(MESH)
    found = workload_security(push, "foo", {"app": "a"})
    assert _names(found.deny) == ["mesh-deny"]
    assert _names(found.allow) == ["mesh-selected", "ns-allow"]


def test_other_namespaces_see_only_mesh_policies() -> None:
    push = push_of(MESH)
    found = workload_security(push, "baz", {"app": "b"})
    assert _names(found.deny) == ["mesh-deny"]
    assert not found.allow and not found.request_authn


def test_workload_in_the_root_namespace() -> None:
    push = push_of(MESH)
    found = workload_security(push, "istio-system", {})
    assert _names(found.deny) == ["mesh-deny"]
    assert _names(found.allow) == []


def test_no_policies_is_empty() -> None:
    push = push_of(_policy("x", "bar", "{rules: [{}]}"))
    assert workload_security(push, "foo", {"app": "a"}).empty


def test_memoised_per_namespace_and_labels() -> None:
    push = push_of(MESH)
    first = workload_security(push, "foo", {"app": "a", "v": "1"})
    assert workload_security(push, "foo", {"v": "1", "app": "a"}) is first
    assert workload_security(push, "foo", {"app": "b"}) is not first


def test_older_policies_come_first() -> None:
    text = (
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        "metadata: {name: a-new, namespace: foo, creationTimestamp: '2025-02-01T00:00:00Z'}\n"
        "spec: {rules: [{}]}\n---\n"
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n"
        "metadata: {name: z-old, namespace: foo, creationTimestamp: '2024-01-01T00:00:00Z'}\n"
        "spec: {rules: [{}]}\n"
    )
    assert _names(workload_security(push_of(text), "foo", {}).allow) == ["z-old", "a-new"]

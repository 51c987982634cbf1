"""Normalization: equal meaning gives equal objects and equal text."""

from __future__ import annotations

from typing import Any

import pytest

from meshpilot.gitops.diff import (
    IgnoreDifferencesError,
    ManifestNormalizer,
    normalize,
    parse_ignore_differences,
)
from meshpilot.gitops.diff.text import to_yaml


def _svc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "reviews", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 9080}], **spec},
    }


def _vs(route: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": "reviews", "namespace": "shop"},
        "spec": {"hosts": ["reviews"], "http": [{"route": route}]},
    }


SAME_MEANING = [
    pytest.param(
        _svc(),
        {
            **_svc(type="ClusterIP", sessionAffinity="None"),
            "spec": {
                "type": "ClusterIP",
                "ports": [{"name": "http", "port": 9080, "protocol": "TCP", "targetPort": 9080}],
            },
        },
        id="service-defaults",
    ),
    pytest.param(
        _svc(),
        {
            **_svc(),
            "status": {"loadBalancer": {}},
            "metadata": {
                "name": "reviews",
                "namespace": "shop",
                "uid": "0b8f",
                "resourceVersion": "42",
                "generation": 3,
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
            },
        },
        id="server-owned-fields",
    ),
    pytest.param(
        _vs([{"destination": {"host": "reviews"}}]),
        _vs([{"destination": {"host": "reviews"}, "weight": 100}]),
        id="single-destination-weight",
    ),
    pytest.param(
        {
            **_vs([{"destination": {"host": "reviews"}}]),
            "spec": {
                "hosts": ["reviews"],
                "gateways": [],
                "http": [{"route": [{"destination": {"host": "reviews"}}]}],
            },
        },
        _vs([{"destination": {"host": "reviews"}}]),
        id="empty-list-vs-missing",
    ),
    pytest.param(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "shop"},
            "stringData": {"k": "v"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": "s", "namespace": "shop"},
            "data": {"k": "dg=="},
        },
        id="secret-stringdata",
    ),
]


@pytest.mark.parametrize(("left", "right"), SAME_MEANING)
def test_same_meaning_normalizes_equal(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert normalize(left) == normalize(right)
    assert to_yaml(normalize(left)) == to_yaml(normalize(right))


def test_two_weighted_destinations_get_no_default() -> None:
    split = _vs([{"destination": {"host": "a"}, "weight": 80}, {"destination": {"host": "b"}}])
    route = normalize(split)["spec"]["http"][0]["route"]
    assert "weight" not in route[1]


def test_key_order_is_stable() -> None:
    a = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"namespace": "n", "name": "c"},
        "data": {"b": "1", "a": "2"},
    }
    b = {
        "data": {"a": "2", "b": "1"},
        "metadata": {"name": "c", "namespace": "n"},
        "apiVersion": "v1",
        "kind": "ConfigMap",
    }
    assert to_yaml(normalize(a)) == to_yaml(normalize(b))
    assert list(normalize(a)) == ["apiVersion", "data", "kind", "metadata"]


def test_destination_namespace_fills_namespaced_objects_only() -> None:
    normalizer = ManifestNormalizer(default_namespace="shop")
    svc = normalizer({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}})
    ns = normalizer(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "namespace": "oops"}}
    )
    assert svc["metadata"]["namespace"] == "shop"
    assert "namespace" not in ns["metadata"]


def test_input_is_not_changed() -> None:
    svc = _svc()
    normalize(svc)
    assert svc == _svc()


def test_ignore_differences_removes_pointers_of_matching_objects() -> None:
    rules = parse_ignore_differences(
        [
            {
                "group": "networking.istio.io",
                "kind": "VirtualService",
                "jsonPointers": ["/spec/http/0/route/0/weight", "/spec/a~1b"],
            }
        ]
    )
    normalizer = ManifestNormalizer(ignore=rules)
    split = _vs(
        [{"destination": {"host": "a"}, "weight": 80}, {"destination": {"host": "b"}, "weight": 20}]
    )
    shifted = _vs(
        [{"destination": {"host": "a"}, "weight": 50}, {"destination": {"host": "b"}, "weight": 20}]
    )
    assert normalizer(split) == normalizer(shifted)
    assert rules[0].pointers[1] == ("spec", "a/b")
    # Another kind is not touched; a pointer to nothing is no error.
    assert ManifestNormalizer(ignore=rules)(_svc()) == normalize(_svc())


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"kind": "Deployment", "jqPathExpressions": [".spec.replicas"]},
            "spec.ignoreDifferences[0].jqPathExpressions: jq path expressions are not supported",
        ),
        (
            {"kind": "Deployment", "managedFieldsManagers": ["kube-controller-manager"]},
            "[0].managedFieldsManagers: managedFieldsManagers is not supported",
        ),
        ({"kind": "Deployment", "jsonPointers": ["spec/replicas"]}, "is not a JSON pointer"),
        ({"kind": "Deployment", "jsonPointers": ["/a~2"]}, "'~' must be followed by 0 or 1"),
        ({"group": "apps", "jsonPointers": ["/spec"]}, "spec.ignoreDifferences[0].kind: required"),
        ({"kind": "Deployment", "jsonPointer": ["/spec"]}, "jsonPointer: unknown field"),
    ],
)
def test_unsupported_or_bad_ignore_differences_are_refused(
    entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(IgnoreDifferencesError, match=None) as info:
        parse_ignore_differences([entry])
    assert message in str(info.value)

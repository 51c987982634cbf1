"""`inject_pod`, the entry point of the webhook and `meshpilot run`: its options."""

from __future__ import annotations

import json
from typing import Any

import pytest

from meshpilot.inject.config import InjectConfigError, injector_from_config_map, parse_injector
from meshpilot.inject.data import WorkloadMeta
from meshpilot.inject.pod import inject_pod

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-7f9c-abcde", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "web:1"}]},
}


def _env(pod: dict[str, Any]) -> dict[str, str]:
    proxy = next(c for c in pod["spec"]["containers"] if c["name"] == "istio-proxy")
    return {e["name"]: e.get("value", "") for e in proxy["env"]}


def test_namespace_labels_select_the_revision() -> None:
    canary = parse_injector(revision="canary")
    assert not inject_pod(POD, canary, namespace_labels={}).injected
    selected = inject_pod(POD, canary, namespace_labels={"istio.io/rev": "canary"})
    assert selected.injected
    other = inject_pod(POD, canary, namespace_labels={"istio.io/rev": "stable"})
    assert not other.injected and "'stable' is not served here" in other.decision.reason
    # a tag that points at this revision is served too
    tagged = inject_pod(
        POD,
        canary,
        namespace_labels={"istio.io/rev": "prod"},
        revisions=frozenset({"canary", "prod"}),
    )
    assert tagged.injected


def test_workload_and_proxy_env() -> None:
    workload = WorkloadMeta("apps/v1", "Deployment", "web", "shop")
    result = inject_pod(
        POD, parse_injector(), workload, proxy_env={"ISTIO_META_CLUSTER_ID": "east", "X": "1"}
    )
    env = _env(result.pod)
    assert env["ISTIO_META_OWNER"] == "kubernetes://apis/apps/v1/namespaces/shop/deployments/web"
    assert env["ISTIO_META_WORKLOAD_NAME"] == "web"
    assert env["ISTIO_META_CLUSTER_ID"] == "east" and env["X"] == "1"
    assert list(env).count("ISTIO_META_CLUSTER_ID") == 1


def test_injector_from_the_store_config_map() -> None:
    data = {
        "config": "policy: disabled\nalwaysInjectSelector:\n- matchLabels: {app: web}\n",
        "values": json.dumps({"global": {"proxy": {"holdApplicationUntilProxyStarts": True}}}),
    }
    injector = parse_injector()
    injector = injector_from_config_map(data, injector.mesh, "", "istio-sidecar-injector")
    result = inject_pod(POD, injector)
    assert result.injected and "alwaysInjectSelector" in result.decision.reason
    assert [c["name"] for c in result.pod["spec"]["containers"]] == ["istio-proxy", "web"]
    with pytest.raises(InjectConfigError, match=r"istio-sidecar-injector: config.policy"):
        injector_from_config_map(
            {"config": "policy: 3\n"}, injector.mesh, "", "istio-sidecar-injector"
        )


def test_go_template_text_of_a_builtin_name_is_reported_not_rendered() -> None:
    injector = parse_injector("templates:\n  sidecar: '{{ .Values.x }}'\n")
    assert any("config.templates.sidecar" in w and "not rendered" in w for w in injector.warnings)
    assert inject_pod(POD, injector).injected


def test_template_aliases() -> None:
    injector = parse_injector("aliases:\n  ingress: [gateway]\n")
    pod = {
        **POD,
        "metadata": {**POD["metadata"], "annotations": {"inject.istio.io/templates": "ingress"}},
    }
    result = inject_pod(pod, injector)
    proxy = next(c for c in result.pod["spec"]["containers"] if c["name"] == "istio-proxy")
    assert proxy["args"][:2] == ["proxy", "router"]
    with pytest.raises(InjectConfigError, match=r"config.aliases.x: unknown template 'grpc'"):
        parse_injector("aliases:\n  x: [grpc]\n")

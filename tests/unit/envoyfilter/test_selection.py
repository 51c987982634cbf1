"""Which EnvoyFilters reach a proxy and in what order: workloadSelector, targetRefs, the
root namespace first, priority, creation time; proxy version and metadata matches."""

from __future__ import annotations

from pathlib import Path

from meshpilot.model.proxy import ProxyType
from meshpilot.xds.generate import generator
from meshpilot.xds.patch.selection import proxy_patches
from meshpilot.xds.protos import TypeUrl
from tests.unit.envoyfilter.helpers import (
    GATEWAY,
    PRODUCTPAGE,
    REVIEWS,
    config,
    proxy,
    push_with,
)

_CLUSTER = "outbound|9080||details.default.svc.cluster.local"


def _filter(name: str, namespace: str, timeout: str, extra: str = "", priority: int = 0) -> str:
    return f"""\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: {name}, namespace: {namespace}{extra}}}
spec:
  priority: {priority}
  configPatches:
  - applyTo: CLUSTER
    match: {{cluster: {{name: "{_CLUSTER}"}}}}
    patch: {{operation: MERGE, value: {{connect_timeout: {timeout}}}}}
"""


def _timeout(text: str, tmp_path: Path, ref: str = PRODUCTPAGE) -> float:
    push = push_with(tmp_path, text)
    (cluster,) = [c for c in config(push, ref).clusters if c.name == _CLUSTER]
    return float(cluster.connect_timeout.ToMilliseconds()) / 1000


def test_the_workload_namespace_applies_after_the_root_namespace(tmp_path: Path) -> None:
    text = _filter("b-ns", "default", "3s") + "---\n" + _filter("a-root", "istio-system", "2s")
    assert _timeout(text, tmp_path) == 3


def test_priority_orders_before_namespace(tmp_path: Path) -> None:
    text = (
        _filter("ns", "default", "3s") + "---\n" + _filter("root", "istio-system", "2s", priority=5)
    )
    push = push_with(tmp_path, text)
    keys = [k[:2] for k in proxy_patches(push, proxy(push, PRODUCTPAGE)).key]  # type: ignore[union-attr]
    assert keys == [("default", "ns"), ("istio-system", "root")]
    assert _timeout(text, tmp_path) == 2


def test_creation_time_orders_filters_of_one_namespace_and_priority(tmp_path: Path) -> None:
    older = _filter("z-older", "default", "4s", ", creationTimestamp: '2024-01-01T00:00:00Z'")
    newer = _filter("a-newer", "default", "5s", ", creationTimestamp: '2025-01-01T00:00:00Z'")
    assert _timeout(newer + "---\n" + older, tmp_path) == 5


def test_selector_and_other_namespaces(tmp_path: Path) -> None:
    selecting = _filter("reviews-only", "default", "6s").replace(
        "spec:\n", "spec:\n  workloadSelector: {labels: {app: reviews}}\n"
    )
    elsewhere = _filter("elsewhere", "istio-ingress", "7s")
    text = selecting + "---\n" + elsewhere
    assert _timeout(text, tmp_path, REVIEWS) == 6
    assert _timeout(text, tmp_path, PRODUCTPAGE) == 10  # generated: neither applies


def test_proxy_version_and_metadata_match_or_miss(tmp_path: Path) -> None:
    def with_proxy(match: str) -> str:
        return _filter("p", "default", "8s").replace(
            "    match: {cluster", f"    match: {{proxy: {match}, cluster"
        )

    assert _timeout(with_proxy("{proxyVersion: '^1\\.28.*'}"), tmp_path) == 8
    assert _timeout(with_proxy("{proxyVersion: '^1\\.9\\.'}"), tmp_path) == 10
    assert _timeout(with_proxy("{metadata: {NAMESPACE: default}}"), tmp_path) == 8
    assert _timeout(with_proxy("{metadata: {INTERCEPTION_MODE: TPROXY}}"), tmp_path) == 10


def test_target_refs_select_a_gateway_by_its_gateway_name_label(tmp_path: Path) -> None:
    text = """\
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: by-ref, namespace: istio-system}
spec:
  targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: %s}]
  configPatches:
  - applyTo: CLUSTER
    match: {context: GATEWAY}
    patch: {operation: REMOVE}
"""
    # The bookinfo gateway pod has no gateway-name label: a targetRef never selects it.
    push = push_with(tmp_path, text % "istio-ingressgateway")
    assert config(push, GATEWAY, ProxyType.ROUTER).clusters
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        (text % "ingress")
        + """---
apiVersion: v1
kind: Pod
metadata:
  name: ingress-abc
  namespace: istio-system
  labels: {gateway.networking.k8s.io/gateway-name: ingress, istio: ingressgateway}
spec: {containers: [{name: istio-proxy, image: proxyv2}]}
status: {podIP: 10.1.9.9}
"""
    )
    push = push_with(tmp_path, pod.read_text())
    assert not config(push, "ingress-abc.istio-system", ProxyType.ROUTER).clusters
    assert config(push, GATEWAY, ProxyType.ROUTER).clusters


def test_without_envoy_filters_the_generated_list_is_served_as_is(tmp_path: Path) -> None:
    push = push_with(tmp_path, _filter("other", "bookinfo-elsewhere", "1s"))
    sidecar = proxy(push, PRODUCTPAGE)
    build = generator(TypeUrl.CLUSTER, ProxyType.SIDECAR)
    assert build(push, sidecar, None) == build(push, sidecar, None)
    assert proxy_patches(push, sidecar) is None

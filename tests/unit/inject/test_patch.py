"""The JSON patch of an injection always applies and gives the injected pod (hypothesis)."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot.inject.config import Injector
from meshpilot.inject.patch import apply_patch, make_patch, patch_bytes
from meshpilot.inject.pod import inject_pod

_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_PORT = st.integers(1, 65535)


def _probe() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda p, path: {"httpGet": {"path": "/" + path, "port": p}}, _PORT, _NAME),
        st.builds(lambda p: {"tcpSocket": {"port": p}}, _PORT),
        st.builds(lambda p: {"grpc": {"port": p}}, _PORT),
        st.just({"exec": {"command": ["true"]}}),
        st.just({"httpGet": {"path": "/", "port": "http"}}),
    )


_CONTAINER = st.fixed_dictionaries(
    {"name": _NAME, "image": _NAME},
    optional={
        "ports": st.lists(
            st.fixed_dictionaries({"containerPort": _PORT}, optional={"name": _NAME}), max_size=3
        ),
        "readinessProbe": _probe(),
        "livenessProbe": _probe(),
        "env": st.lists(st.fixed_dictionaries({"name": _NAME, "value": _TEXT}), max_size=2),
    },
)
_ANNOTATIONS = st.dictionaries(
    st.sampled_from(
        [
            "sidecar.istio.io/inject",
            "traffic.sidecar.istio.io/excludeOutboundPorts",
            "traffic.sidecar.istio.io/includeInboundPorts",
            "prometheus.io/scrape",
            "prometheus.io/port",
            "sidecar.istio.io/rewriteAppHTTPProbers",
            "example.com/x",
        ]
    ),
    st.sampled_from(["true", "false", "8080", "1,2", "", "yes"]),
    max_size=4,
).flatmap(
    lambda base: st.fixed_dictionaries(
        {},
        optional={
            "inject.istio.io/templates": st.sampled_from(["sidecar", "gateway"]),
            "sidecar.istio.io/interceptionMode": st.sampled_from(["REDIRECT", "NONE"]),
            "proxy.istio.io/config": st.sampled_from(
                ["holdApplicationUntilProxyStarts: true", "concurrency: 2"]
            ),
        },
    ).map(lambda extra: {**base, **extra})
)
_POD = st.builds(
    lambda labels, annotations, containers, inits, proxy: {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": {
            "containers": containers
            + ([{"name": "istio-proxy", "image": "auto"}] if proxy else []),
            **({"initContainers": inits} if inits else {}),
        },
    },
    st.dictionaries(_NAME, _TEXT, max_size=3),
    _ANNOTATIONS,
    st.lists(_CONTAINER, min_size=1, max_size=3, unique_by=lambda c: c["name"]),
    st.lists(_CONTAINER, max_size=2, unique_by=lambda c: c["name"]),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_POD)
def test_patch_of_an_injection_always_applies(pod: dict[str, Any]) -> None:
    original = json.loads(json.dumps(pod))
    result = inject_pod(pod, Injector())
    assert pod == original  # the input is not modified
    ops = make_patch(pod, result.pod)
    assert apply_patch(pod, ops) == result.pod
    # what an AdmissionResponse carries decodes to the same operations
    wire = base64.b64encode(patch_bytes(pod, result.pod))
    assert json.loads(base64.b64decode(wire)) == ops
    if result.injected:
        annotations = pod["metadata"]["annotations"]
        names = [c["name"] for c in result.pod["spec"]["containers"]]
        hold = "holdApplicationUntilProxyStarts" in annotations.get("proxy.istio.io/config", "")
        assert names.count("istio-proxy") == 1
        assert names.index("istio-proxy") == (0 if hold else len(names) - 1)
        inits = [c["name"] for c in result.pod["spec"].get("initContainers", [])]
        capture = annotations.get("inject.istio.io/templates") != "gateway" and (
            annotations.get("sidecar.istio.io/interceptionMode") != "NONE"
        )
        assert (inits[-1:] == ["istio-init"]) is capture


def test_no_patch_when_not_injected() -> None:
    pod = {"metadata": {"name": "p", "labels": {"sidecar.istio.io/inject": "false"}}, "spec": {}}
    result = inject_pod(pod, Injector())
    assert not result.injected and make_patch(pod, result.pod) == []

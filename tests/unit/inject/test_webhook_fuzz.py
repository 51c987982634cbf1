"""Fuzz of the webhook's handler: whatever the body, path and content type, the answer is one
of Istio's statuses, never an exception (a 500), and a 200 is an AdmissionReview answering
the request's uid whose patch, when there is one, applies to the object that was sent."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshpilot import http1
from meshpilot.inject.config import Injector
from meshpilot.inject.patch import apply_patch
from meshpilot.inject.webhook import handle_inject

INJECTOR = Injector()
_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8), st.floats()
)
_JSON = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYS = ["name", "namespace", "labels", "annotations", "generateName", "ownerReferences"]
_META = st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=4)
_CONTAINER = st.dictionaries(
    st.sampled_from(["name", "image", "ports", "readinessProbe", "env", "args", "command"]),
    _JSON,
    max_size=4,
)
_SPEC = st.dictionaries(
    st.sampled_from(["containers", "initContainers", "volumes", "hostNetwork", "dnsPolicy"]),
    st.one_of(_JSON, st.lists(_CONTAINER, max_size=2)),
    max_size=3,
)
_POD = st.one_of(
    _JSON,
    st.fixed_dictionaries({"metadata": _META, "spec": _SPEC}),
    st.fixed_dictionaries(
        {"metadata": st.fixed_dictionaries({"name": st.just("p")}), "spec": _SPEC}
    ),
)
_REVIEW = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1"]),
        "kind": st.sampled_from(["AdmissionReview", "AdmissionReview", "Pod"]),
        "request": st.one_of(
            _JSON,
            st.fixed_dictionaries(
                {"uid": st.one_of(st.text(min_size=1, max_size=8), _JSON), "object": _POD},
                optional={"namespace": _JSON},
            ),
        ),
    }
)
_BODY = st.one_of(
    st.binary(max_size=64),
    _JSON.map(lambda v: json.dumps(v).encode()),
    _REVIEW.map(lambda v: json.dumps(v).encode()),
)


def answer(body: bytes, path: str, content_type: str, method: str) -> http1.Response:
    headers = {"content-type": content_type}
    request = http1.Request(method, path, headers, {}, body)
    return asyncio.run(handle_inject(request, INJECTOR))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=_BODY,
    path=st.sampled_from(
        ["/inject", "/inject/", "/inject/cluster/c/net/n", "/inject/:ENV:A=1", "/x"]
    ),
    content_type=st.sampled_from(
        ["application/json", "application/json; charset=utf-8", "text/plain", ""]
    ),
    method=st.sampled_from(["POST", "POST", "GET"]),
)
def test_handler_never_fails(body: bytes, path: str, content_type: str, method: str) -> None:
    try:
        response = answer(body, path, content_type, method)
    except http1.HttpError as exc:  # what http1 answers itself (a body that is not JSON)
        assert exc.status == 400, exc
        return
    assert response.status in (200, 400, 404, 405, 415), response
    if response.status != 200:
        return
    sent: Any = json.loads(body)
    out = json.loads(response.body)
    assert out["apiVersion"] == sent["apiVersion"] and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == sent["request"]["uid"]
    assert isinstance(out["response"]["allowed"], bool)
    if "patch" in out["response"]:
        ops = json.loads(base64.b64decode(out["response"]["patch"]))
        patched = apply_patch(sent["request"]["object"], ops)
        assert any(c.get("name") == "istio-proxy" for c in patched["spec"]["containers"])

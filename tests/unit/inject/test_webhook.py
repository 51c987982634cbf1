"""The injection webhook over real HTTPS, as kube-apiserver calls it: AdmissionReview v1 and
v1beta1 in, the same version out with the uid echoed, and a JSON patch that turns the pod into
exactly what kube-inject writes; every bad request answered with Istio's status, never a 500."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from meshpilot.inject.admission import inject_envs
from meshpilot.inject.config import parse_injector
from meshpilot.inject.kube_inject import inject_object
from meshpilot.inject.webhook import InjectionWebhook
from tests.unit.inject.webhook_client import post, post_head, post_many, review, webhook

JSON = dict[str, Any]
DEPLOYMENT: JSON = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web", "version": "v1"}},
            "spec": {
                "serviceAccountName": "web",
                "containers": [
                    {
                        "name": "web",
                        "image": "web:1",
                        "ports": [{"containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                    }
                ],
            },
        },
    },
}
POD: JSON = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "ratings", "namespace": "shop", "labels": {"app": "ratings"}},
    "spec": {"containers": [{"name": "ratings", "image": "ratings:1"}]},
}


def run(tmp: Path, scenario: Callable[[InjectionWebhook], Awaitable[None]], **kw: Any) -> None:
    async def main() -> None:
        async with webhook(tmp, **kw) as server:
            await scenario(server)

    asyncio.run(asyncio.wait_for(main(), 120))


async def call(server: InjectionWebhook, body: bytes, **kw: Any) -> Any:
    return await asyncio.to_thread(post, server.port, server.ca.root_pem, body, **kw)


def replica_set_pod() -> JSON:
    """The pod a ReplicaSet of DEPLOYMENT creates: generated name, owner, template hash,
    no namespace in the object (the request carries it)."""
    template = DEPLOYMENT["spec"]["template"]
    labels = {**template["metadata"]["labels"], "pod-template-hash": "5d8f9c7b6"}
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-5d8f9c7b6",
        "uid": "8e1c",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    meta = {"generateName": "web-5d8f9c7b6-", "labels": labels, "ownerReferences": [owner]}
    spec = json.loads(json.dumps(template["spec"]))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_v1_deployment_pod_patch_gives_kube_injects_template(tmp_path: Path) -> None:
    pod = replica_set_pod()
    sent = review(pod, "v1", namespace="shop")

    async def scenario(server: InjectionWebhook) -> None:
        answer = await call(server, json.dumps(sent).encode())
        assert answer.status == 200
        out = answer.review
        assert (out["apiVersion"], out["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
        assert out["response"]["uid"] == sent["request"]["uid"]
        assert out["response"]["allowed"] is True and out["response"]["patchType"] == "JSONPatch"
        patched = answer.patched(pod)
        expected = inject_object(DEPLOYMENT, parse_injector(), [])["spec"]["template"]
        assert patched["spec"] == expected["spec"]
        assert patched["metadata"]["annotations"] == expected["metadata"]["annotations"]
        labels = dict(patched["metadata"]["labels"])
        assert labels.pop("pod-template-hash") == "5d8f9c7b6"
        assert labels == expected["metadata"]["labels"]
        # the owner is the Deployment, found through the ReplicaSet as Istio does
        proxy = next(c for c in patched["spec"]["containers"] if c["name"] == "istio-proxy")
        env = {e["name"]: e.get("value") for e in proxy["env"]}
        assert env["ISTIO_META_WORKLOAD_NAME"] == "web"
        assert env["ISTIO_META_OWNER"] == (
            "kubernetes://apis/apps/v1/namespaces/shop/deployments/web"
        )

    run(tmp_path, scenario)


def test_v1beta1_pod_patch_gives_kube_inject_output(tmp_path: Path) -> None:
    sent = review(POD, "v1beta1", namespace="shop")

    async def scenario(server: InjectionWebhook) -> None:
        answer = await call(server, json.dumps(sent).encode())
        assert answer.status == 200
        out = answer.review
        assert out["apiVersion"] == "admission.k8s.io/v1beta1"
        assert out["response"]["uid"] == sent["request"]["uid"]
        assert answer.patched(POD) == inject_object(POD, parse_injector(), [])

    run(tmp_path, scenario)


def test_not_injected_is_allowed_without_patch_and_bad_annotation_is_refused(
    tmp_path: Path,
) -> None:
    opted_out = json.loads(json.dumps(POD))
    opted_out["metadata"]["annotations"] = {"sidecar.istio.io/inject": "false"}
    bad = json.loads(json.dumps(POD))
    bad["metadata"]["annotations"] = {"proxy.istio.io/config": "concurrency: [1"}

    async def scenario(server: InjectionWebhook) -> None:
        answer = await call(server, json.dumps(review(opted_out)).encode())
        assert answer.status == 200
        assert answer.review["response"] == {
            "uid": answer.review["response"]["uid"],
            "allowed": True,
        }
        answer = await call(server, json.dumps(review(bad)).encode())
        response = answer.review["response"]
        assert answer.status == 200 and response["allowed"] is False
        assert "proxy.istio.io/config" in response["status"]["message"]

    run(tmp_path, scenario)


def test_path_sets_proxy_env(tmp_path: Path) -> None:
    assert inject_envs("/inject") == {}
    assert inject_envs("/inject/cluster/east/net/network--1/") == {
        "ISTIO_META_CLUSTER_ID": "east",
        "ISTIO_META_NETWORK": "network/1",
    }
    assert inject_envs("/inject/:ENV:A=1:ENV:B=:ENV:=x:ENV:C") == {"A": "1", "B": ""}
    assert inject_envs("/inject/cluster/east/odd") == {"ISTIO_META_CLUSTER_ID": "east"}

    async def scenario(server: InjectionWebhook) -> None:
        answer = await call(
            server, json.dumps(review(POD)).encode(), path="/inject/cluster/east/net/n1"
        )
        patched = answer.patched(POD)
        proxy = next(c for c in patched["spec"]["containers"] if c["name"] == "istio-proxy")
        env = {e["name"]: e.get("value") for e in proxy["env"]}
        assert env["ISTIO_META_CLUSTER_ID"] == "east" and env["ISTIO_META_NETWORK"] == "n1"

    run(tmp_path, scenario)


def test_bad_requests_get_istios_statuses(tmp_path: Path) -> None:
    good = json.dumps(review(POD)).encode()
    huge_pod = json.loads(json.dumps(POD))
    huge_pod["metadata"]["annotations"] = {"example.com/blob": "x" * (5 * 1024 * 1024)}
    five_mb = json.dumps(review(huge_pod)).encode()
    assert len(five_mb) > 5 * 1024 * 1024

    async def scenario(server: InjectionWebhook) -> None:
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({"body": good, "content_type": "text/plain"}, 415, "invalid Content-Type"),
            ({"body": good, "content_type": None}, 415, "want `application/json`"),
            ({"body": b""}, 400, "no body found"),
            ({"body": b'{"kind": "AdmissionReview",'}, 400, "AdmissionReview is not JSON"),
            ({"body": b"[1, 2]"}, 400, "not an AdmissionReview"),
            (
                {"body": b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'},
                400,
                "has no request",
            ),
            ({"body": b"{}", "method": "GET"}, 405, "POST an AdmissionReview"),
            ({"body": good, "path": "/validate"}, 404, "no such path"),
            ({"body": b"[" * 10_000}, 400, "deeper than"),
        ]
        for kw, status, message in cases:
            answer = await call(server, **kw)
            assert answer.status == status, (kw.get("path"), answer.body[:200])
            assert message in answer.body.decode(), answer.body[:200]
        # over Istio's 6 MiB read limit: refused before the body is read
        answer = await asyncio.to_thread(
            post_head, server.port, server.ca.root_pem, 6 * 1024 * 1024 + 1
        )
        assert answer.status == 413 and b"too large" in answer.body
        # a review whose object is no pod: refused with the reason, uid echoed
        no_pod = review(POD)
        no_pod["request"]["object"] = None
        answer = await call(server, json.dumps(no_pod).encode())
        assert answer.status == 200 and answer.review["response"]["allowed"] is False
        assert answer.review["response"]["uid"] == no_pod["request"]["uid"]
        assert "not a pod" in answer.review["response"]["status"]["message"]
        # a 5 MB review is read and injected (the annotation stays as it is)
        answer = await call(server, five_mb)
        assert answer.status == 200 and answer.review["response"]["allowed"] is True
        assert (
            answer.patched(huge_pod)["metadata"]["annotations"]["example.com/blob"]
            == (huge_pod["metadata"]["annotations"]["example.com/blob"])
        )
        # and it still serves after all that
        assert (await call(server, good)).status == 200

    run(tmp_path, scenario)


def test_connection_kept_alive_for_the_next_review(tmp_path: Path) -> None:
    bodies = [json.dumps(review(POD)).encode() for _ in range(3)]

    async def scenario(server: InjectionWebhook) -> None:
        answers = await asyncio.to_thread(post_many, server.port, server.ca.root_pem, bodies)
        uids = [json.loads(b)["request"]["uid"] for b in bodies]
        assert [a.review["response"]["uid"] for a in answers] == uids

    run(tmp_path, scenario)


def test_certificate_names_the_revisions_service(tmp_path: Path) -> None:
    async def scenario(server: InjectionWebhook) -> None:
        body = json.dumps(review(POD)).encode()
        name = "istiod-canary.istio-system.svc"
        assert (await call(server, body, server_name=name)).status == 200
        with pytest.raises(ssl.SSLCertVerificationError, match=r"istiod\.istio-system\.svc"):
            await call(server, body, server_name="istiod.istio-system.svc")

    run(tmp_path, scenario, revision="canary")

"""AdmissionReview in, AdmissionReview out: Istio's injection webhook without the HTTP.

What kube-apiserver sends (admission.k8s.io/v1 or v1beta1) is read into a typed review;
the answer echoes the review's apiVersion and kind and the request's uid (Istio's
serveInject). A pod that gets a sidecar is answered `allowed: true` with the base64 RFC 6902
patch (`patchType: JSONPatch`); a pod that does not, `allowed: true` alone. A request that
cannot be injected as asked (no pod in it, a bad annotation) is answered `allowed: false`
with the reason, as Istio does: kube-apiserver then refuses the pod with that message.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from meshpilot.errors import InputError
from meshpilot.inject.config import Injector
from meshpilot.inject.data import WorkloadMeta
from meshpilot.inject.patch import patch_bytes
from meshpilot.inject.pod import inject_pod

__all__ = [
    "REVIEW_VERSIONS",
    "AdmissionError",
    "Review",
    "inject_envs",
    "parse_review",
    "review_response",
    "workload_of_pod",
]

log = logging.getLogger(__name__)

JSON = dict[str, Any]
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
# A Job named <cronjob>-<scheduled time in minutes> (Istio's cronJobNameRegexp)
_CRON_JOB_NAME = re.compile(r"^(.+)-\d{8,10}$")


class AdmissionError(InputError):
    """The body is not an AdmissionReview (answered 400: there is no uid to answer to)."""


@dataclass(frozen=True, slots=True)
class Review:
    api_version: str
    uid: str
    namespace: str
    obj: Any  # request.object as sent: a pod, hopefully


def parse_review(data: Any) -> Review:
    """The review of a decoded body; AdmissionError naming what is wrong."""
    if not isinstance(data, dict):
        raise AdmissionError("the body is not an AdmissionReview (a JSON object)")
    version, kind = data.get("apiVersion"), data.get("kind")
    if kind != "AdmissionReview" or version not in REVIEW_VERSIONS:
        raise AdmissionError(
            f"the body is not an AdmissionReview of {' or '.join(REVIEW_VERSIONS)} "
            f"(apiVersion {version!r}, kind {kind!r})"
        )
    request = data.get("request")
    if not isinstance(request, dict):
        raise AdmissionError("the AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionError("the AdmissionReview's request has no uid")
    namespace = request.get("namespace")
    return Review(
        str(version), uid, namespace if isinstance(namespace, str) else "", request.get("object")
    )


def inject_envs(path: str) -> dict[str, str]:
    """istio-proxy env from the path (Istio's parseInjectEnvs): `/inject/cluster/C/net/N`
    sets ISTIO_META_CLUSTER_ID and ISTIO_META_NETWORK, other pairs `/K/V` set K (a `--` in
    a value stands for `/`), and `/inject/:ENV:K=V:ENV:K2=V2` sets K and K2."""
    parts = path.rstrip("/").split("/", 2)
    if len(parts) < 3:
        return {}
    words: list[str] = []
    if parts[2].startswith(":ENV:"):
        for pair in parts[2].split(":ENV:")[1:]:
            key, sep, value = pair.partition("=")
            if key and sep:
                words += [key, value]
    else:
        words = parts[2].split("/")
        words = [w.replace("--", "/") if i % 2 else w for i, w in enumerate(words)]
    envs: dict[str, str] = {}
    names = {"cluster": "ISTIO_META_CLUSTER_ID", "net": "ISTIO_META_NETWORK"}
    for key, value in zip(words[0::2], words[1::2], strict=False):
        envs[names.get(key, key)] = value
    return envs


def workload_of_pod(pod: JSON, namespace: str) -> WorkloadMeta:
    """The object a pod comes from (Istio's GetDeployMetaFromPod): its controller when its
    name is generated, a ReplicaSet with the pod-template-hash suffix standing for its
    Deployment and a Job with a timestamp suffix for its CronJob; else the pod itself."""
    meta = pod.get("metadata") or {}
    workload = WorkloadMeta("v1", "Pod", str(meta.get("name") or ""), namespace)
    if not meta.get("generateName"):
        return workload
    owners = meta.get("ownerReferences") or []
    ref = next((r for r in owners if isinstance(r, dict) and r.get("controller") is True), None)
    if ref is None:
        return workload
    api_version, kind, name = (
        str(ref.get("apiVersion", "")),
        str(ref.get("kind", "")),
        str(ref.get("name", "")),
    )
    template_hash = str((meta.get("labels") or {}).get("pod-template-hash") or "")
    if kind == "ReplicaSet" and template_hash and name.endswith(template_hash):
        name, kind = name.removesuffix("-" + template_hash), "Deployment"
    elif kind == "Job" and (match := _CRON_JOB_NAME.match(name)):
        name, kind, api_version = match.group(1), "CronJob", "batch/v1"
    return WorkloadMeta(api_version, kind, name, namespace)


def _response(review: Review, allowed: bool, **fields: Any) -> JSON:
    response = {"uid": review.uid, "allowed": allowed, **fields}
    return {"apiVersion": review.api_version, "kind": "AdmissionReview", "response": response}


def _refusal(review: Review, message: str) -> JSON:
    return _response(review, False, status={"message": message, "code": 400})


def review_response(review: Review, injector: Injector, path: str = "/inject") -> JSON:
    """The AdmissionReview to answer `review` with (Istio's inject)."""
    pod = review.obj
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        return _refusal(review, "the AdmissionReview's request.object is not a pod")
    meta = pod.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        return _refusal(review, "the pod's metadata is not an object")
    # managedFields do not change the injection and only make the diff slower (Istio)
    working = {**pod, "metadata": {k: v for k, v in (meta or {}).items() if k != "managedFields"}}
    namespace = working["metadata"].get("namespace") or review.namespace
    if isinstance(namespace, str) and namespace:
        working["metadata"]["namespace"] = namespace
    try:
        workload = workload_of_pod(working, namespace if isinstance(namespace, str) else "")
        result = inject_pod(working, injector, workload, proxy_env=inject_envs(path))
    except (InputError, ValueError, TypeError, KeyError, AttributeError) as exc:
        # A pod the injector cannot read (a field of the wrong type) is refused, as Istio
        # refuses a pod it cannot unmarshal; its message reaches the kubectl user.
        message = str(exc) if isinstance(exc, InputError) else f"the pod cannot be read: {exc!r}"
        return _refusal(review, f"injection failed: {message}")
    for warning in result.warnings:
        log.info("inject %s/%s: %s", namespace, _pod_name(working), warning)
    if not result.injected:
        return _response(review, True)
    patch = base64.b64encode(patch_bytes(working, result.pod)).decode()
    return _response(review, True, patch=patch, patchType="JSONPatch")


def _pod_name(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "")

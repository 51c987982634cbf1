"""istioctl kube-inject: the pods of YAML or JSON documents injected, the rest untouched.

Pods, and the pod templates of Deployments, StatefulSets, DaemonSets, ReplicaSets,
ReplicationControllers, Jobs and CronJobs (`spec.jobTemplate.spec.template`), also inside a
`List`. A JSON input gives JSON out, YAML gives YAML, unless the caller picks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from meshpilot.config.yaml_load import load_yaml_all
from meshpilot.inject.config import Injector
from meshpilot.inject.data import InjectError, WorkloadMeta
from meshpilot.inject.pod import inject_pod

__all__ = ["KubeInjectResult", "inject_documents", "inject_object", "render_documents"]

JSON = dict[str, Any]
_TEMPLATE_KINDS = frozenset(
    {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job"}
)


@dataclass
class KubeInjectResult:
    documents: list[Any]
    json_input: bool = False
    messages: list[str] = field(default_factory=list)


def _describe(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    return f"{obj.get('kind')} {namespace}/{meta.get('name', '')}"


def _pod_template(obj: JSON) -> JSON | None:
    kind = obj.get("kind")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if kind in _TEMPLATE_KINDS:
        template = spec.get("template")
    elif kind == "CronJob":
        template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
    else:
        return None
    return template if isinstance(template, dict) else None


def inject_object(obj: Any, injector: Injector, messages: list[str]) -> Any:
    """One document injected (a copy); anything that is not a workload comes back as is."""
    if not isinstance(obj, dict):
        return obj
    kind = obj.get("kind")
    if kind == "List" and isinstance(obj.get("items"), list):
        return {**obj, "items": [inject_object(i, injector, messages) for i in obj["items"]]}
    meta = obj.get("metadata") or {}
    workload = WorkloadMeta(
        str(obj.get("apiVersion", "v1")),
        str(kind),
        str(meta.get("name", "")),
        str(meta.get("namespace") or "default"),
    )
    try:
        if kind == "Pod":
            result = inject_pod(obj, injector, workload)
            injected = result.pod
        else:
            template = _pod_template(obj)
            if template is None:
                return obj
            result = inject_pod(template, injector, workload)
            injected = json.loads(json.dumps(obj))
            target = _pod_template(injected)
            assert target is not None
            target.clear()
            target.update(result.pod)
    except InjectError as exc:
        raise InjectError(f"{_describe(obj)}: {exc}") from exc
    if not result.injected:
        messages.append(f"Skipping injection of {_describe(obj)}: {result.decision.reason}")
    messages.extend(f"{_describe(obj)}: {w}" for w in result.warnings)
    return injected


def inject_documents(text: str, injector: Injector, origin: str = "-") -> KubeInjectResult:
    """Every document of `text` (YAML or JSON), injected where it holds a pod."""
    documents = load_yaml_all(text, origin)  # YAMLInputError names the file and line
    result = KubeInjectResult([], json_input=text.lstrip().startswith(("{", "[")))
    for doc in documents:
        if doc is None:
            continue
        result.documents.append(inject_object(doc, injector, result.messages))
    return result


def render_documents(documents: list[Any], as_json: bool) -> str:
    if as_json:
        if len(documents) == 1:
            return json.dumps(documents[0], indent=2) + "\n"
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}, indent=2) + "\n"
    return "---\n".join(
        yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1_000_000)
        for doc in documents
    )

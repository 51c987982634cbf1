"""`components.<name>.k8s` laid onto the objects rendered for a component (istioctl's
k8s overlay): the Deployment's pod and first container, the Service, the HPA and the PDB."""

from __future__ import annotations

from typing import Any

from meshpilot.install.k8s_overlay import K8sOverlay
from meshpilot.install.render.context import K8sObject

__all__ = ["apply_overlay", "merge_env"]


def _dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def merge_env(env: list[dict[str, Any]], overlay: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`env` with `overlay`'s variables: one of the same name replaced, new ones appended."""
    out = list(env)
    for var in overlay:
        names = [e["name"] for e in out]
        if var["name"] in names:
            out[names.index(var["name"])] = var
        else:
            out.append(var)
    return out


def _deployment(obj: K8sObject, k8s: K8sOverlay) -> None:
    spec = obj["spec"]
    pod_meta, pod = spec["template"]["metadata"], spec["template"]["spec"]
    container = pod["containers"][0]
    if k8s.replica_count is not None:
        rest = {k: v for k, v in spec.items() if k != "replicas"}
        spec.clear()
        spec.update({"replicas": k8s.replica_count, **rest})  # first, where a reader looks
    if k8s.strategy is not None:
        spec["strategy"] = k8s.strategy
    if k8s.pod_annotations:
        pod_meta["annotations"] = {**pod_meta.get("annotations", {}), **k8s.pod_annotations}
    for key, value in (
        ("nodeSelector", k8s.node_selector or None),
        ("affinity", k8s.affinity),
        ("tolerations", k8s.tolerations or None),
        ("priorityClassName", k8s.priority_class_name or None),
        ("securityContext", k8s.security_context),
        ("topologySpreadConstraints", k8s.topology_spread_constraints or None),
    ):
        if value is not None:
            pod[key] = value
    if k8s.volumes:
        pod["volumes"] = [*pod.get("volumes", []), *k8s.volumes]
    if k8s.resources is not None:
        container["resources"] = _dump(k8s.resources)
    if k8s.env:
        container["env"] = merge_env(container.get("env", []), [_dump(e) for e in k8s.env])
    if k8s.image_pull_policy is not None:
        container["imagePullPolicy"] = k8s.image_pull_policy
    if k8s.readiness_probe is not None:
        container["readinessProbe"] = k8s.readiness_probe
    if k8s.volume_mounts:
        container["volumeMounts"] = [*container.get("volumeMounts", []), *k8s.volume_mounts]


def _service(obj: K8sObject, k8s: K8sOverlay) -> None:
    if k8s.service is not None:
        obj["spec"].update(_dump(k8s.service))
    if k8s.service_annotations:
        meta = obj["metadata"]
        meta["annotations"] = {**meta.get("annotations", {}), **k8s.service_annotations}


def _hpa(obj: K8sObject, k8s: K8sOverlay) -> None:
    if k8s.hpa_spec is None:
        return
    hpa = _dump(k8s.hpa_spec)
    hpa.pop("scaleTargetRef", None)  # always the component's own Deployment
    if not hpa.get("metrics"):
        hpa.pop("metrics", None)
    obj["spec"].update(hpa)


def _pdb(obj: K8sObject, k8s: K8sOverlay) -> None:
    if k8s.pod_disruption_budget is None:
        return
    pdb = _dump(k8s.pod_disruption_budget)
    if pdb.get("minAvailable") is not None or pdb.get("maxUnavailable") is not None:
        obj["spec"].pop("minAvailable", None)
        obj["spec"].pop("maxUnavailable", None)
    obj["spec"].update(pdb)


_BY_KIND = {
    "Deployment": _deployment,
    "Service": _service,
    "HorizontalPodAutoscaler": _hpa,
    "PodDisruptionBudget": _pdb,
}


def apply_overlay(objects: list[K8sObject], k8s: K8sOverlay, workload: str) -> list[K8sObject]:
    """`objects` with the overlay applied to those named `workload` (changed in place)."""
    for obj in objects:
        step = _BY_KIND.get(obj["kind"])
        if step is not None and obj["metadata"]["name"] == workload:
            step(obj, k8s)
    return objects

"""Health of the mesh's own kinds: an object is Healthy when the mesh accepts it, Degraded
with the validator's or analyzer's message when not (a VirtualService routing to a host or
gateway that does not exist, ...). Runs `meshpilot analyze`'s pipeline (loader, PushContext,
analyzers) over a set of manifests and maps every finding back to its resource.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from meshpilot.analysis import analyze
from meshpilot.config.diagnostics import Diagnostic, Severity
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_documents
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.diff.annotations import is_hook
from meshpilot.gitops.diff.keys import Manifest, ResourceKey, key_of
from meshpilot.gitops.diff.normalize import plain
from meshpilot.gitops.health.status import Health, HealthStatusCode

__all__ = ["MeshFindings", "analyze_manifests", "mesh_health", "overlay"]

# Deployments are stored for `meshpilot run`; their health is a rollout's (workloads.py).
_MESH_KINDS = frozenset(k.value for k in Kind) - {Kind.MESH_CONFIG.value, Kind.DEPLOYMENT.value}

# Findings per resource, errors and warnings alike, in the analyzer's order.
MeshFindings = Mapping[ResourceKey, tuple[Diagnostic, ...]]


def overlay(
    live: Iterable[Manifest], targets: Sequence[Manifest], namespace: str = ""
) -> list[Manifest]:
    """The store as it will be after a sync: live objects with the targets in their place
    (hooks left out). What the mesh will think of the targets is asked of this set."""
    merged: dict[ResourceKey, Manifest] = {key_of(o): o for o in live}
    for target in targets:
        if is_hook(target):
            continue
        key = key_of(target, namespace)
        obj = plain(target)
        if key.namespace:
            obj.setdefault("metadata", {})["namespace"] = key.namespace
        merged[key] = obj
    return [merged[k] for k in sorted(merged)]


def analyze_manifests(objects: Iterable[Manifest]) -> dict[ResourceKey, tuple[Diagnostic, ...]]:
    """Validation and analyzer findings for the mesh kinds among `objects`, by resource.
    Other kinds are skipped (they are no business of the mesh)."""
    keys: dict[tuple[str, str, str], ResourceKey] = {}
    documents = []
    for obj in objects:
        key = key_of(obj)
        if key.kind not in _MESH_KINDS:
            continue
        keys[(key.kind, key.namespace, key.name)] = key
        documents.append(RawDocument(f"<{key}>", 1, plain(obj), {}))
    # Imported here: building a PushContext pulls in the registry and mesh model.
    from meshpilot.model.push_context import build_push_context

    loaded = load_documents(documents)
    push = build_push_context(loaded.objects, loaded.mesh)
    found: dict[ResourceKey, list[Diagnostic]] = defaultdict(list)
    for diagnostic in [*loaded.diagnostics, *analyze(push)]:
        owner = keys.get((diagnostic.kind, diagnostic.namespace, diagnostic.name))
        if owner is not None and diagnostic not in found[owner]:
            found[owner].append(diagnostic)
    return {key: tuple(diags) for key, diags in found.items()}


def mesh_health(key: ResourceKey, findings: MeshFindings) -> Health | None:
    """Degraded with the messages of the errors about `key`; None when there are none."""
    errors = [d for d in findings.get(key, ()) if d.severity is Severity.ERROR]
    if not errors:
        return None
    return Health(HealthStatusCode.DEGRADED, "; ".join(_message(d) for d in errors))


def _message(diagnostic: Diagnostic) -> str:
    parts = [p for p in (diagnostic.code, diagnostic.field) if p]
    return ": ".join([*parts, diagnostic.message])

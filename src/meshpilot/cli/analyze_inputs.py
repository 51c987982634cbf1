"""What `meshpilot analyze` reads: files (-f), the live store (--store DIR) or a running
control plane (--discovery ADDR, its /debug/objectz page). Files go on top of the store or
the control plane's objects, as `istioctl analyze` applies files over the live cluster."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from meshpilot.config.diagnostics import Diagnostic, Origin
from meshpilot.config.keys import ConfigKey
from meshpilot.config.loader import load_paths
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject

__all__ = ["Inputs", "read_inputs"]


@dataclass
class Inputs:
    objects: dict[ConfigKey, ConfigObject[Any]] = field(default_factory=dict)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    mesh_origin: Origin | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # What was analyzed, for the closing line: "files a.yaml, b/", "store DIR", ...
    targets: list[str] = field(default_factory=list)


def read_inputs(
    filenames: Sequence[str],
    store_dir: str | None,
    discovery: str | None,
    timeout: float,
    default_namespace: str = "default",
) -> Inputs:
    """Raises MeshpilotError (a missing store, an unreachable control plane, ...). Objects in
    files that name no namespace get `default_namespace` (istioctl's -n)."""
    inputs = Inputs()
    if store_dir:
        from meshpilot.store.open import open_store

        snapshot = open_store(store_dir, create=False).snapshot()
        inputs.objects.update(snapshot.objects)
        inputs.mesh = snapshot.mesh
        inputs.diagnostics.extend(snapshot.diagnostics)
        inputs.targets.append(f"store {store_dir}")
    if discovery:
        from meshpilot.discovery.objects_api import PATH, read_objectz
        from meshpilot.proxyinfo.fetch import base_url, get_json

        base = base_url(discovery)
        remote = read_objectz(get_json(base, PATH, "the control plane", timeout))
        inputs.objects.update((obj.key, obj) for obj in remote.objects)
        inputs.mesh = remote.mesh
        inputs.diagnostics.extend(remote.diagnostics)
        inputs.targets.append(f"control plane {base}")
    if filenames:
        loaded = load_paths(filenames, default_namespace)
        inputs.objects.update((obj.key, obj) for obj in loaded.objects)
        for stand_in in loaded.fail_closed:  # an invalid policy with no good version: denies
            inputs.objects.setdefault(stand_in.key, stand_in)
        if loaded.mesh_origin is not None or not (store_dir or discovery):
            inputs.mesh, inputs.mesh_origin = loaded.mesh, loaded.mesh_origin
        inputs.diagnostics.extend(loaded.diagnostics)
        inputs.targets.append("files " + ", ".join(filenames))
    return inputs

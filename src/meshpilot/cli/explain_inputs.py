"""Where `meshpilot explain` reads the mesh from: files (config generated here), a running
control plane (its /debug/configz objects and /debug/config_dump of each proxy), and
optionally an Envoy admin config dump for the source proxy."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from meshpilot.cli.common import load_inputs, print_diagnostics
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError
from meshpilot.model.push_context import PushContext, build_push_context
from meshpilot.xds.output import ProxyConfig

__all__ = ["Inputs", "read_inputs"]


@dataclass(frozen=True, slots=True)
class Inputs:
    push: PushContext
    objects: list[ConfigObject[Any]]
    config_for: Any  # meshpilot.explain.build.ConfigSource, or None (generate here)
    source_dump: ProxyConfig | None  # --config-dump: the source proxy's config as Envoy ran it


def read_inputs(
    filenames: tuple[str, ...], discovery: str | None, config_dump: str | None, timeout: float
) -> Inputs:
    from meshpilot.explain.live import proxy_config_from_dump

    if bool(filenames) == bool(discovery):
        raise click.UsageError("give the mesh with -f FILES|DIR or with --discovery ADDRESS")
    try:
        source_dump = None
        if config_dump:
            raw = _read_json(config_dump)
            source_dump = proxy_config_from_dump(raw, config_dump)
        if discovery:
            return _live(discovery, timeout, source_dump)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    loaded = load_inputs(filenames)
    print_diagnostics(loaded.diagnostics)
    push = build_push_context(loaded.served, loaded.mesh)
    return Inputs(push, list(loaded.objects), None, source_dump)


def _read_json(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"--config-dump {path}: cannot read it as JSON: {exc}") from exc


def _live(discovery: str, timeout: float, source_dump: ProxyConfig | None) -> Inputs:
    from meshpilot.explain.live_mesh import read_live_mesh

    mesh = read_live_mesh(discovery, timeout)
    return Inputs(mesh.push, mesh.objects, mesh.config_for, source_dump)

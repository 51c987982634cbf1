"""`meshpilot analyze`: every validation error, reference problem and unsupported field.

Findings go to stdout (so `analyze -f x > report.txt` keeps them), the one-line summary to
stderr. Input is files (-f), the live store (--store DIR), or both: the files are then
analyzed as if applied to the store, as `istioctl analyze` does with the live cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from meshpilot.cli.analyze_output import OUTPUTS, render_findings, summary
from meshpilot.cli.common import load_inputs
from meshpilot.config.diagnostics import Diagnostic, Origin, Severity
from meshpilot.config.keys import ConfigKey
from meshpilot.config.mesh import MeshConfig
from meshpilot.config.objects import ConfigObject
from meshpilot.errors import MeshpilotError

__all__ = ["analyze"]


@dataclass
class _Inputs:
    objects: dict[ConfigKey, ConfigObject[Any]] = field(default_factory=dict)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    mesh_origin: Origin | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)


@click.command()
@click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    metavar="PATH",
    help="YAML/JSON file or directory (repeatable; directories are read recursively).",
)
@click.option(
    "--store",
    "store_dir",
    metavar="DIR",
    help="Analyze the live store in this directory (with -f: as if the files were applied).",
)
@click.option(
    "-o", "--output", type=click.Choice(OUTPUTS), default="log", show_default=True,
    help="log: one line per finding; json or yaml: code, level, file, line, object, "
    "field, message.",
)  # fmt: skip
@click.option(
    "--suppress",
    "suppress",
    multiple=True,
    metavar="CODE=KIND NAME[.NS]",
    help="Hide a message code on matching resources (repeatable; `*` globs), e.g. "
    '"IST0102=Namespace foo". The galley.istio.io/analyze-suppress annotation works too.',
)
def analyze(
    filenames: tuple[str, ...], store_dir: str | None, output: str, suppress: tuple[str, ...]
) -> None:
    """Report invalid objects, broken references and unsupported fields; exit 1 on errors."""
    from meshpilot.analysis import analyze as analyze_push
    from meshpilot.analysis.suppress import parse_suppression, unsuppressed
    from meshpilot.analysis.unsupported_fields import unsupported_field_diagnostics
    from meshpilot.model.push_context import build_push_context

    if not filenames and not store_dir:
        raise click.UsageError("give files (-f PATH) or a live store (--store DIR) to analyze")
    try:
        rules = [parse_suppression(text) for text in suppress]
        inputs = _read(filenames, store_dir)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    objects = [inputs.objects[key] for key in sorted(inputs.objects)]
    push = build_push_context(objects, inputs.mesh)
    found = [
        *inputs.diagnostics,
        *analyze_push(push),
        *unsupported_field_diagnostics(objects, inputs.mesh, inputs.mesh_origin),
    ]
    shown = unsuppressed(found, rules, objects)
    text = render_findings(shown, output)
    if text or output != "log":
        click.echo(text)
    click.echo(summary(len(objects), shown), err=True)
    if any(d.severity is Severity.ERROR for d in shown):
        raise SystemExit(1)


def _read(filenames: Sequence[str], store_dir: str | None) -> _Inputs:
    inputs = _Inputs()
    if store_dir:
        from meshpilot.store.open import open_store

        snapshot = open_store(store_dir, create=False).snapshot()
        inputs.objects.update(snapshot.objects)
        inputs.mesh = snapshot.mesh
        inputs.diagnostics.extend(snapshot.diagnostics)
    if filenames:
        loaded = load_inputs(filenames)
        inputs.objects.update((obj.key, obj) for obj in loaded.objects)
        for stand_in in loaded.fail_closed:  # an invalid policy with no good version: denies
            inputs.objects.setdefault(stand_in.key, stand_in)
        if loaded.mesh_origin is not None or not store_dir:
            inputs.mesh, inputs.mesh_origin = loaded.mesh, loaded.mesh_origin
        inputs.diagnostics.extend(loaded.diagnostics)
    return inputs

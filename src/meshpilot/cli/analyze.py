"""`meshpilot analyze`: every validation error and reference problem in the input."""

from __future__ import annotations

import click

from meshpilot.analysis import analyze as analyze_push
from meshpilot.cli.common import files_option, load_inputs, print_diagnostics
from meshpilot.config.diagnostics import Severity
from meshpilot.model.push_context import build_push_context

__all__ = ["analyze"]


@click.command()
@files_option
def analyze(filenames: tuple[str, ...]) -> None:
    """Report invalid objects and broken references; exit 1 if there is any error."""
    loaded = load_inputs(filenames)
    push = build_push_context(loaded.served, loaded.mesh)
    diagnostics = [*loaded.diagnostics, *analyze_push(push)]
    print_diagnostics(diagnostics)
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = sum(d.severity is Severity.WARNING for d in diagnostics)
    infos = len(diagnostics) - errors - warnings
    click.echo(
        f"{len(loaded.objects)} objects checked: {errors} errors, {warnings} warnings, "
        f"{infos} info",
        err=True,
    )
    if errors:
        raise SystemExit(1)

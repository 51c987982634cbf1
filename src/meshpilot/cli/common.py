"""What several commands share: loading inputs and printing diagnostics."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from meshpilot.config.diagnostics import Diagnostic
from meshpilot.config.loader import LoadResult, load_paths
from meshpilot.errors import MeshpilotError

__all__ = ["files_option", "load_inputs", "print_diagnostics"]

files_option = click.option(
    "-f",
    "--filename",
    "filenames",
    multiple=True,
    required=True,
    metavar="PATH",
    help="YAML/JSON file or directory (repeatable; directories are read recursively).",
)


def load_inputs(filenames: Sequence[str]) -> LoadResult:
    try:
        return load_paths(filenames)
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc


def print_diagnostics(diagnostics: Sequence[Diagnostic]) -> None:
    for diag in sorted(diagnostics, key=Diagnostic.sort_key):
        click.echo(str(diag), file=sys.stderr)

"""The `meshpilot` command."""

from __future__ import annotations

import click

from meshpilot import __version__
from meshpilot.cli.analyze import analyze
from meshpilot.cli.translate import translate

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshpilot")
def cli() -> None:
    """meshpilot: Istio-compatible service mesh and GitOps delivery engine."""


@cli.command()
def version() -> None:
    """Print the meshpilot version."""
    click.echo(__version__)


cli.add_command(translate)
cli.add_command(analyze)


def main() -> None:
    cli(prog_name="meshpilot")

"""The `meshpilot` command."""

from __future__ import annotations

import os
import sys

import click

from meshpilot import __version__
from meshpilot.cli.analyze import analyze
from meshpilot.cli.demo import demo
from meshpilot.cli.discovery import discovery
from meshpilot.cli.gitops import gitops
from meshpilot.cli.iptables import iptables
from meshpilot.cli.live import apply, delete, get
from meshpilot.cli.proxy import proxy
from meshpilot.cli.proxy_config import proxy_config
from meshpilot.cli.proxy_status import proxy_status
from meshpilot.cli.token import token
from meshpilot.cli.translate import translate
from meshpilot.errors import MeshpilotError
from meshpilot.gitops.model import register_gitops_kinds

__all__ = ["cli", "main"]

DEBUG_ENV = "MESHPILOT_DEBUG"  # set to 1 to see the traceback of an internal error


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="meshpilot")
def cli() -> None:
    """meshpilot: Istio-compatible service mesh and GitOps delivery engine."""
    register_gitops_kinds()  # the store and the loader know Application and AppProject


@cli.command()
def version() -> None:
    """Print the meshpilot version."""
    click.echo(__version__)


cli.add_command(translate)
cli.add_command(analyze)
cli.add_command(demo)
cli.add_command(discovery)
cli.add_command(iptables)
cli.add_command(proxy)
cli.add_command(proxy_status)
cli.add_command(proxy_config)
cli.add_command(apply)
cli.add_command(get)
cli.add_command(delete)
cli.add_command(gitops)
cli.add_command(token)


def main() -> None:
    """Run the CLI; errors become one line on stderr and exit code 1 (2 for usage errors),
    never a traceback unless MESHPILOT_DEBUG=1."""
    try:
        cli(prog_name="meshpilot", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except MeshpilotError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: say so plainly, keep the traceback for debugging
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        click.echo(
            f"Internal error: {type(exc).__name__}: {exc}\n"
            f"This is a meshpilot bug; rerun with {DEBUG_ENV}=1 for the traceback and report it.",
            err=True,
        )
        sys.exit(70)

"""`meshpilot x ...`: istioctl's experimental commands; `x precheck` checks this machine."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from meshpilot.cli.live import store_option
from meshpilot.install.precheck import (
    CONTROL_PLANE_PORTS,
    Problem,
    check_envoy,
    check_netns,
    check_ports,
    check_root_and_iptables,
    check_skew,
    check_store_dir,
)
from meshpilot.settings import default_store_dir
from meshpilot.store.open import NoStoreError, is_etcd_url, open_store, store_path

__all__ = ["precheck", "x"]

SUCCESS = (
    "\u2714 No issues found when checking the cluster. Istio is safe to install or upgrade!\n"
    "  To get started, check out https://istio.io/latest/docs/setup/getting-started/"
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def x() -> None:
    """Experimental commands (istioctl x)."""


@x.command()
@store_option
@click.option(
    "--port",
    "ports",
    type=int,
    multiple=True,
    help="Ports that must be free (repeatable).  [default: 15010, 15012, 15014, 15017]",
)
def precheck(store_dir: str | None, ports: tuple[int, ...]) -> None:
    """Check that a control plane and pods can run here; each problem comes with its fix."""
    url = store_dir or default_store_dir()
    problems: list[Problem] = [
        *check_root_and_iptables(),
        *check_netns(),
        *check_envoy(),
        *check_ports(ports or CONTROL_PLANE_PORTS),
    ]
    if not is_etcd_url(url):
        problems += check_store_dir(Path(store_path(url)))
    with contextlib.suppress(NoStoreError):  # no store: nothing installed yet
        problems += check_skew(open_store(url, create=False).snapshot().objects)
    if not problems:
        click.echo(SUCCESS)
        return
    for problem in problems:
        click.echo(f"\u2718 {problem.message}\n    fix: {problem.fix}")
    raise click.ClickException(f"{len(problems)} issue(s) found: fix them before installing")

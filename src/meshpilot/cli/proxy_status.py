"""`meshpilot proxy-status [POD.NAMESPACE]`: is every proxy in sync with the control plane?

Reads the control plane's /debug/syncz. Without a proxy: istioctl's table, one row per
connected proxy. With one: what was sent, ACKed and NACKed per xDS type, NACK errors in full.
The options shared with `proxy-config` (--discovery, -o, --timeout) are defined here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

from meshpilot.errors import MeshpilotError
from meshpilot.proxyinfo import (
    DEFAULT_TIMEOUT,
    OUTPUTS,
    find_proxy,
    read_syncz,
    render_raw,
    sync_detail,
    sync_table,
)
from meshpilot.settings import Ports

__all__ = [
    "DEFAULT_DISCOVERY",
    "discovery_option",
    "output_option",
    "proxy_status",
    "reported_errors",
    "timeout_option",
]

DEFAULT_DISCOVERY = f"http://127.0.0.1:{Ports().monitoring}"

discovery_option = click.option(
    "--discovery",
    default=DEFAULT_DISCOVERY,
    show_default=True,
    metavar="URL",
    help="The control plane's monitoring address (its /debug pages).",
)
output_option = click.option(
    "-o",
    "--output",
    type=click.Choice(OUTPUTS),
    default="short",
    show_default=True,
    help="short: a table; json or yaml: the raw data.",
)
timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for each HTTP answer.",
)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Library errors become one `Error: ...` line and exit status 1, never a traceback."""
    try:
        yield
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc


@click.command("proxy-status")
@click.argument("proxy_ref", metavar="[POD.NAMESPACE]", required=False)
@discovery_option
@output_option
@timeout_option
def proxy_status(proxy_ref: str | None, discovery: str, output: str, timeout: float) -> None:
    """Show whether each proxy has what the control plane sent it (CDS, LDS, EDS, RDS:
    SYNCED, NOT SENT, STALE or NACKED); with POD.NAMESPACE, the detail of one proxy:
    versions and nonces sent, ACKed and NACKed per type, and the NACK error."""
    with reported_errors():
        syncs = read_syncz(discovery, timeout)
        if proxy_ref:
            syncs = find_proxy(syncs, proxy_ref, discovery)
    if output != "short":
        click.echo(render_raw([s.raw for s in syncs], output))
    elif proxy_ref:
        click.echo("\n\n".join(sync_detail(s) for s in syncs))
    elif not syncs:
        click.echo(f"no proxies are connected to the control plane at {discovery}", err=True)
    else:
        click.echo(sync_table(syncs).render())

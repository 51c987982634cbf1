"""`meshpilot demo`: a bookinfo-like mesh on this machine, to try or to check.

Pods are network namespaces with capture rules and real Envoy sidecars; `meshpilot
discovery` serves them from generated files. Everything is removed on exit (Ctrl-C,
SIGTERM, or the end of `--check`).
"""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType

import click

from meshpilot.demo.checks import CheckResult, run_checks
from meshpilot.demo.guide import guide
from meshpilot.demo.mesh import DemoMesh, DemoOptions
from meshpilot.errors import MeshpilotError

__all__ = ["demo"]


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _report(result: CheckResult) -> None:
    click.echo(str(result))


_CHECK_HELP = (
    "Send the demo's requests, print PASS/FAIL for each, exit non-zero on any failure, then "
    "tear everything down."
)
_KEEP_HELP = "With --check: keep the mesh running afterwards (until Ctrl-C)."
_NAME_HELP = "Cluster name (namespaces mp-<name>-...); 1-8 characters a-z, 0-9."
_LOOPBACK_HELP = (
    "No network namespaces even as root: the fallback without capture (interceptionMode "
    "NONE) on the host's loopback."
)


@click.command()
@click.option("--check", is_flag=True, help=_CHECK_HELP)
@click.option("--keep", is_flag=True, help=_KEEP_HELP)
@click.option("--name", default="demo", show_default=True, help=_NAME_HELP)
@click.option("--loopback", is_flag=True, help=_LOOPBACK_HELP)
def demo(check: bool, keep: bool, name: str, loopback: bool) -> None:
    """Run a bookinfo-like mesh on this machine: pods as network namespaces with sidecars,
    an HTTPS ingress gateway, an egress gateway, a TCP service and an external host.

    Without root, iproute2 or iptables it falls back to sidecars without capture
    (interceptionMode NONE) on the host's loopback, and says so."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)  # teardown runs on SIGTERM as on Ctrl-C
    # Python leaves SIGINT ignored when it starts so (a `cmd &` of a non-interactive shell, some
    # CI runners): Ctrl-C, or a SIGINT sent by a supervisor, must still tear the mesh down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    click.echo(f"Starting the demo mesh (cluster {name!r})...", err=True)
    started = time.monotonic()
    failed = interrupted = False
    try:
        # The web UI serves people: not started for a --check that tears down at once.
        options = DemoOptions(
            cluster=name, loopback=True if loopback else None, ui=keep or not check
        )
        with DemoMesh(options) as mesh:
            click.echo(f"Ready in {time.monotonic() - started:.1f}s.\n", err=True)
            click.echo(guide(mesh))
            if check:
                failed = not _check(mesh)
            if keep or not check:
                _wait_for_stop()
            click.echo("Tearing down...", err=True)
    except KeyboardInterrupt:
        click.echo("Interrupted; tore everything down.", err=True)
        interrupted = True
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    else:
        click.echo("Done: pods, namespaces, processes and temporary files removed.", err=True)
    if failed or (interrupted and check):
        sys.exit(130 if interrupted else 1)


def _check(mesh: DemoMesh) -> bool:
    click.echo("\nChecks:")
    results = run_checks(mesh, _report)
    passed = sum(r.ok and not r.skipped for r in results)
    failed = sum(not r.ok for r in results)
    skipped = sum(r.skipped for r in results)
    click.echo(f"\n{passed} passed, {failed} failed, {skipped} skipped.")
    return failed == 0


def _wait_for_stop() -> None:
    click.echo("\nThe mesh runs until Ctrl-C (or SIGTERM); then everything is removed.", err=True)
    while True:
        signal.pause()

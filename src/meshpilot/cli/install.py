"""`meshpilot install` and `meshpilot uninstall` (istioctl's), on the live store.

    meshpilot install -f iop.yaml [--set P=V] [--revision R] [-y] [--dry-run] [--force]
    meshpilot uninstall --revision R [-y] | --purge [-y]

install writes the installation in one store write (install/installation.py), starts
`meshpilot operator` if none runs for the CA dir, waits until the revision's control plane
has written its record, and prints istioctl's progress lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click

from meshpilot.cli.live import open_store, store_option, user_errors
from meshpilot.cli.operator import absolute_store_url, ca_dir_option, resolve_ca_dir
from meshpilot.config.yaml_source import RawDocument
from meshpilot.errors import MeshpilotError
from meshpilot.install.installation import InstallPlan, plan_install
from meshpilot.install.load import read_operator_files, resolve
from meshpilot.install.operator_record import find_operator, operator_dir
from meshpilot.install.uninstall import plan_purge, plan_uninstall
from meshpilot.security.control_plane_record import live_records
from meshpilot.security.files import ensure_private_dir
from meshpilot.store.writes import StoreWriteError

__all__ = ["install", "start_operator", "uninstall", "wait_for_revision"]

OK, FAIL = "\u2714", "\u2718"


def start_operator(url: str, ca_dir: Path) -> Path:
    """Start `meshpilot operator` in the background (its own session, so it outlives this
    command); returns its log file."""
    ensure_private_dir(operator_dir(ca_dir))
    log = operator_dir(ca_dir) / "operator.log"
    argv = [sys.executable, "-c", "from meshpilot.cli.main import main; main()", "operator",
            "--store", url, "--ca-dir", str(ca_dir)]  # fmt: skip
    with open(log, "ab") as out:
        subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    return log


def wait_for_revision(ca_dir: Path, revision: str, timeout: float, present: bool = True) -> bool:
    """Wait until the revision's control plane runs (`present`) or no longer runs."""
    label = revision or "default"
    deadline = time.monotonic() + timeout
    while True:
        running = any(r.revision == label for r in live_records(ca_dir))
        if running == present:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _confirm(question: str, yes: bool) -> None:
    if not yes and not click.confirm(question, default=False):
        raise click.ClickException("cancelled: nothing was changed")


def _components(plan: InstallPlan) -> str:
    names = ["Istio core", "Istiod"] + (["Gateways"] if plan.gateways or plan.gateways_left else [])
    return ", ".join(names)


@click.command()
@click.option("-f", "--filename", "files", multiple=True, help="IstioOperator file(s).")
@click.option("--set", "-s", "sets", multiple=True, metavar="PATH=VALUE", help="Override a field.")
@click.option("--revision", "-r", default=None, help="Control plane revision, e.g. 1-15-4.")
@click.option("-y", "--skip-confirmation", "yes", is_flag=True, help="Do not ask.")
@click.option("--dry-run", is_flag=True, help="Check and show what would be written only.")
@click.option("--force", is_flag=True, help="Install even across more than two minor versions.")
@click.option(
    "--operator/--no-operator",
    "with_operator",
    default=True,
    show_default=True,
    help="Start `meshpilot operator` when none runs, and wait for the control plane.",
)
@click.option("--readiness-timeout", type=float, default=120.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the control plane.")  # fmt: skip
@store_option
@ca_dir_option
@user_errors
def install(
    files: tuple[str, ...],
    sets: tuple[str, ...],
    revision: str | None,
    yes: bool,
    dry_run: bool,
    force: bool,
    with_operator: bool,
    readiness_timeout: float,
    store_dir: str | None,
    ca_dir: str | None,
) -> None:
    """Install a control plane revision: record it in the live store in one write, and
    run it through `meshpilot operator`."""
    resolved = resolve(read_operator_files(list(files)), sets, revision)
    url = absolute_store_url(store_dir)
    store = open_store(url, create=not dry_run)
    plan = plan_install(resolved, dict(store.snapshot().objects), force=force)
    for warning in plan.warnings:
        click.echo(f"WARNING: {warning}", err=True)
    profile = resolved.operator.spec.profile
    _confirm(
        f'This will install the Istio {plan.version} "{profile}" profile (with components: '
        f"{_components(plan)}) into the store {url}. Proceed?",
        yes or dry_run,
    )
    documents = [RawDocument(f"<install {d['kind']}>", 1, d, {}) for d in plan.documents]
    try:
        results = store.apply(documents, dry_run=dry_run)
    except StoreWriteError as exc:
        raise click.ClickException(
            f"{FAIL} Istio core: not installed, nothing written: {exc}"
        ) from exc
    if dry_run:
        for result in results:
            click.echo(f"would write {result.key.kind} {result.key.namespace}/{result.key.name}"
                       f" ({result.action})")  # fmt: skip
        click.echo("Dry run: nothing was written.")
        return
    click.echo(f"{OK} Istio core installed")
    _istiod(url, resolve_ca_dir(ca_dir), plan, with_operator, readiness_timeout)
    for name in plan.gateways:
        click.echo(f"{OK} Gateway {name} installed (run by `meshpilot run`)")
    if plan.gateways:
        click.echo(f"{OK} Ingress gateways installed")
    for name in plan.gateways_left:
        click.echo(
            f"! Gateway {name}: recorded in the IstioOperator only; this store keeps no "
            "Deployments yet, so `meshpilot run` cannot start it"
        )
    click.echo(f"{OK} Installation complete")


def _istiod(url: str, ca: Path, plan: InstallPlan, with_operator: bool, timeout: float) -> None:
    if not with_operator:
        click.echo(f"- Istiod recorded; `meshpilot operator --store {url}` runs it")
        return
    log = operator_dir(ca) / "operator.log"
    running = find_operator(ca)
    if running is None:
        log = start_operator(url, ca)
    elif running.store != url:
        raise click.ClickException(
            f"{FAIL} Istiod: the operator for {ca} (pid {running.pid}) serves the store "
            f"{running.store}, not {url}; give another --ca-dir"
        )
    if not wait_for_revision(ca, plan.revision, timeout):
        raise click.ClickException(
            f"{FAIL} Istiod encountered an error: the control plane of revision "
            f"{plan.revision or 'default'} is not running after {timeout:g}s (see {log})"
        )
    click.echo(f"{OK} Istiod installed")


@click.command()
@click.option("--revision", "-r", default=None, help="The revision to remove.")
@click.option("--purge", is_flag=True, help="Remove every revision, tag and the operator.")
@click.option("-y", "--skip-confirmation", "yes", is_flag=True, help="Do not ask.")
@click.option("--timeout", type=float, default=60.0, show_default=True, metavar="SECONDS")
@store_option
@ca_dir_option
@user_errors
def uninstall(
    revision: str | None,
    purge: bool,
    yes: bool,
    timeout: float,
    store_dir: str | None,
    ca_dir: str | None,
) -> None:
    """Remove a revision's objects from the store (its control plane stops); tags stay."""
    if (revision is None) == (not purge):
        raise click.UsageError("give --revision R or --purge")
    store = open_store(absolute_store_url(store_dir), create=False)
    objects = store.snapshot().objects
    removal = plan_purge(objects) if purge else plan_uninstall(objects, revision or "")
    if not removal.keys:
        what = "no installation" if purge else f"no installation of revision {revision}"
        raise MeshpilotError(f"the store holds {what}: nothing to uninstall")
    for warning in removal.warnings:
        click.echo(f"WARNING: {warning}", err=True)
    listing = "\n".join(f"  {k.kind} {k.namespace + '/' if k.namespace else ''}{k.name}"
                        for k in removal.keys)  # fmt: skip
    scope = "All Istio resources" if purge else f"All Istio resources of revision {revision}"
    _confirm(f"{scope} will be removed from the store:\n{listing}\nProceed?", yes)
    store.delete(removal.keys)
    ca = resolve_ca_dir(ca_dir)
    operator = find_operator(ca)
    if purge and operator is not None:
        os.kill(operator.pid, signal.SIGTERM)  # it stops its control planes
    if operator is not None and not wait_for_revision(ca, revision or "", timeout, present=False):
        raise click.ClickException(f"{FAIL} the control plane of revision {revision} still runs")
    click.echo(f"{OK} Uninstall complete")

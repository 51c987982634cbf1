"""`meshpilot operator`: reconcile the store's IstioOperators into running control planes."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
from pathlib import Path

import click

from meshpilot.cli.live import open_store, store_option
from meshpilot.cli.operator_elected import run_operator_elected
from meshpilot.errors import MeshpilotError
from meshpilot.install.operator import Operator
from meshpilot.install.operator_record import (
    OperatorRecord,
    find_operator,
    remove_operator_record,
    write_operator_record,
)
from meshpilot.settings import default_ca_dir, default_store_dir
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.open import is_etcd_url

__all__ = ["absolute_store_url", "ca_dir_option", "operator"]

ca_dir_option = click.option(
    "--ca-dir",
    metavar="DIR",
    help="The mesh CA of the control planes (one root shared by every revision on this "
    "machine); their records and the operator's are kept there.  "
    "[default: $MESHPILOT_CA_DIR or ~/.meshpilot/ca]",
)


def absolute_store_url(url: str | None) -> str:
    """The store URL as another process (started elsewhere) reads it."""
    url = url or default_store_dir()
    if is_etcd_url(url) or "://" in url:
        return url
    return str(Path(url).expanduser().absolute())


def resolve_ca_dir(ca_dir: str | None) -> Path:
    return Path(ca_dir or os.environ.get("MESHPILOT_CA_DIR") or default_ca_dir()).absolute()


@click.command()
@store_option
@ca_dir_option
@click.option(
    "--interval",
    type=float,
    default=0.5,
    show_default=True,
    help="Seconds between reconcile passes.",
)
@click.option(
    "--lease-ttl",
    type=click.IntRange(1, 3600),
    default=5,
    show_default=True,
    help="On etcd: seconds of the leader's lease (one operator of those on the etcd runs "
    "the control planes); a standby takes over this long after the leader dies. Its "
    "control planes use it for their webhook writer's lease too.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def operator(
    store_dir: str | None, ca_dir: str | None, interval: float, lease_ttl: int, log_level: str
) -> None:
    """Run one control plane per IstioOperator in the store (`meshpilot discovery
    --revision R` on free ports, restarted if it dies), roll out changed ones, stop deleted
    ones (Istio's operator, on this machine). On etcd, operators on several machines elect
    one that runs the control planes; the others stand by."""
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    url = absolute_store_url(store_dir)
    ca = resolve_ca_dir(ca_dir)
    running = find_operator(ca)
    if running is not None and running.pid != os.getpid():
        raise click.ClickException(
            f"an operator already runs for {ca} (pid {running.pid}, store {running.store})"
        )
    store = open_store(url, create=True)
    write_operator_record(ca, OperatorRecord(os.getpid(), url))
    try:
        extra = ("--lease-ttl", str(lease_ttl)) if isinstance(store, EtcdStore) else ()
        op = Operator(store, url, ca, interval=interval, extra_args=extra)
        asyncio.run(_run(op, lease_ttl))
    except MeshpilotError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        remove_operator_record(ca, os.getpid())


async def _run(op: Operator, ttl: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if isinstance(op.store, EtcdStore):
            identity = f"{socket.gethostname()}:{os.getpid()} (CA dir {op.ca_dir})"
            await run_operator_elected(op, op.store, identity, ttl, stop)
        else:  # a directory store: one operator per CA dir, as the record ensures
            await op.run(stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)

"""`meshpilot operator` on etcd: replicas on several machines elect one operator
(store/etcd/lease.py, key `<prefix>.leases/operator`).

Only the leader runs the control planes (one discovery per revision) and writes the
revisions' objects, every write fenced by its term. A standby runs nothing and logs who
leads. The leader's discovery processes die with it (PDEATHSIG), so when it dies a standby
starts its own within the lease's TTL. A leader that loses its lease stops its control
planes and exits non-zero (as `gitops serve` does); SIGTERM resigns, so a standby takes
over at once instead of after the TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from meshpilot.cli.gitops_elected import LeadershipLost
from meshpilot.install.operator import Operator
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.errors import EtcdError
from meshpilot.store.etcd.lease import Election, leader_key

__all__ = ["OPERATOR_LEASE", "run_operator_elected"]

log = logging.getLogger(__name__)

OPERATOR_LEASE = "operator"  # the leader key: <prefix>.leases/operator


async def run_operator_elected(
    op: Operator, store: EtcdStore, identity: str, ttl: int, stop: asyncio.Event
) -> None:
    """Stand by until elected, then run `op` until `stop` (resigning) or until the lease
    is lost (LeadershipLost, after its control planes stopped)."""
    election = Election(store.client, leader_key(store.prefix, OPERATOR_LEASE), identity, ttl)
    quit = threading.Event()
    stopper = asyncio.create_task(_set_when(stop, quit))
    standby = asyncio.create_task(_log_leader(election))
    try:
        won = await asyncio.to_thread(election.campaign, quit)
    finally:
        standby.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await standby
    if won is None:
        stopper.cancel()
        return
    store.fence = (won.key, won.term)
    log.info("operator: %s leads; it runs the control planes (term %d)", identity, won.term)
    lost: list[str] = []
    leading = asyncio.Event()  # set: stop leading (asked to stop, or the lease was lost)
    loop = asyncio.get_running_loop()

    def on_lost(reason: str) -> None:
        lost.append(reason)
        loop.call_soon_threadsafe(leading.set)

    forward = asyncio.create_task(_forward(stop, leading))
    holding = asyncio.create_task(asyncio.to_thread(election.hold, quit, on_lost))
    try:
        await op.run(leading)  # (stops its control planes when it returns)
    finally:
        quit.set()
        stopper.cancel()
        forward.cancel()
        await holding
        if not lost:
            await asyncio.to_thread(election.resign)
    if lost:
        raise LeadershipLost(
            f"operator: {identity} lost the leadership ({lost[0]}); its control planes "
            "were stopped; exiting so that a restart stands by and campaigns again"
        )


async def _set_when(stop: asyncio.Event, quit: threading.Event) -> None:
    await stop.wait()
    quit.set()


async def _forward(stop: asyncio.Event, leading: asyncio.Event) -> None:
    await stop.wait()
    leading.set()


async def _log_leader(election: Election) -> None:
    """A standby says who leads, once per term."""
    seen = -1
    while True:
        try:
            held = await asyncio.to_thread(election.leader)
        except EtcdError as exc:
            log.warning("operator: who leads? %s", exc)
            held = None
        term = held.term if held is not None else 0
        if term != seen and held is not None:
            log.info("operator: standing by; %s leads (term %d)", held.holder, held.term)
        seen = term
        await asyncio.sleep(1.0)

"""`gitops serve` on etcd: replicas elect one controller (store/etcd/lease.py).

Every replica serves the API; a standby follows the store's watch for its reads and
refuses what the controller does (gitops/controller/leadership.py). The one holding the
leader key runs the controller (reconcile, auto-sync, notifications) with every write
fenced by its term. A leader that loses its lease stops its controller and exits non-zero
(as Kubernetes' leader election ends a process): restarted, it stands by and campaigns
again. SIGTERM resigns, so a standby takes over at once instead of after the TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from meshpilot.errors import MeshpilotError
from meshpilot.gitops.controller import Controller
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.errors import EtcdError
from meshpilot.store.etcd.lease import Election, leader_key

__all__ = ["LEADER_NAME", "LeadershipLost", "run_elected"]

log = logging.getLogger(__name__)

LEADER_NAME = "gitops-controller"  # the leader key: <prefix>.leases/gitops-controller


class LeadershipLost(MeshpilotError):
    """The leader's lease was lost: its controller stopped writing."""


async def run_elected(
    controller: Controller, store: EtcdStore, identity: str, ttl: int, stop: asyncio.Event
) -> None:
    """Stand by until elected, then run `controller` until `stop` (resigning) or until
    the lease is lost (LeadershipLost)."""
    state = controller.leadership
    state.identity, state.elected, state.leading = identity, True, False
    election = Election(store.client, leader_key(store.prefix, LEADER_NAME), identity, ttl)
    quit = threading.Event()
    stopper = asyncio.create_task(_set_when(stop, quit))
    standby = asyncio.create_task(_stand_by(controller, store, election))
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
    state.leading, state.leader, state.term = True, won.holder, won.term
    log.info("gitops serve: %s leads the GitOps controllers (term %d)", identity, won.term)
    lost: list[str] = []
    loop = asyncio.get_running_loop()

    def on_lost(reason: str) -> None:
        lost.append(reason)
        state.leading = False  # the API refuses controller work from now on
        loop.call_soon_threadsafe(controller.stop)

    holding = asyncio.create_task(asyncio.to_thread(election.hold, quit, on_lost))
    try:
        await controller.run()
    finally:
        quit.set()
        stopper.cancel()
        await holding
        state.leading = False
        if not lost:
            await asyncio.to_thread(election.resign)
    if lost:
        raise LeadershipLost(
            f"gitops serve: {identity} lost the leadership ({lost[0]}); its controller "
            "stopped writing; exiting so that a restart stands by and campaigns again"
        )


async def _set_when(stop: asyncio.Event, quit: threading.Event) -> None:
    await stop.wait()
    quit.set()


async def _stand_by(controller: Controller, store: EtcdStore, election: Election) -> None:
    """A standby's store follows etcd's watch (the API reads it), and who leads is
    looked up every second for /debug/leaderz and the API's refusals."""
    watch = asyncio.create_task(store.watch())
    try:
        while True:
            try:
                held = await asyncio.to_thread(election.leader)
            except EtcdError as exc:
                log.warning("gitops serve: who leads? %s", exc)
                held = None
            controller.leadership.leader = held.holder if held is not None else ""
            controller.leadership.term = held.term if held is not None else 0
            await asyncio.sleep(1.0)
    finally:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch

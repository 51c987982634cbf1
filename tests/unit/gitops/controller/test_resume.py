"""An automated sync whose controller died after applying it but before recording its end
(the store says Running; nobody holds its lock): the next controller (a restart, the new
leader on etcd) runs it again to its end and records it once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.controller import Controller
from meshpilot.gitops.model import Application
from meshpilot.gitops.model.status import OperationPhase, OperationState
from meshpilot.gitops.refresh import save_status
from meshpilot.store.directory import DirectoryStore
from tests.unit.gitops.controller.env import AUTO_HEAL, app_manifest, make_world

APP = ConfigKey(Kind.APPLICATION, "argocd", "shop")


def test_an_interrupted_automated_sync_is_finished_and_recorded_once(tmp_path: Path) -> None:
    world = make_world(tmp_path)

    async def first() -> None:
        task = asyncio.create_task(world.controller.run())
        try:
            world.put(app_manifest(str(world.repo.path), policy=AUTO_HEAL))
            await world.until(lambda: len(world.status().get("history", [])) == 1, what="sync")
        finally:
            world.controller.stop()
            await task

    asyncio.run(first())
    # What a controller killed between the last wave and the record leaves: the objects
    # synced, the operation Running, no history entry for it.
    world.other.refresh()
    stored = world.other.get(APP)
    assert stored is not None and isinstance(stored.model, Application)
    running = OperationState(
        operation={"sync": {"prune": True}, "initiatedBy": {"automated": True}},
        phase=OperationPhase.RUNNING,
        started_at="2026-01-01T00:00:00Z",
    )
    status = stored.model.status.model_copy(update={"operation_state": running})
    save_status(world.other, APP, status)
    store = DirectoryStore(tmp_path / "store", poll_interval=0.02)
    old = world.controller
    again = Controller(store, old.renderer, old.settings)

    async def second() -> None:
        task = asyncio.create_task(again.run())
        try:
            await world.until(
                lambda: world.status().get("operationState", {}).get("phase") == "Succeeded",
                what="the interrupted sync finished",
            )
            await asyncio.sleep(2.5)  # more resyncs (1 s): nothing is recorded again
        finally:
            again.stop()
            await task

    asyncio.run(second())
    history = world.status()["history"]
    assert [h["id"] for h in history] == [0, 1]
    assert history[1]["revision"] == history[0]["revision"]

"""The controller in-process against a real git repo and a real DirectoryStore."""

from __future__ import annotations

import asyncio
from pathlib import Path

from meshpilot.gitops.controller import ControllerSettings
from tests.unit.gitops.controller.env import AUTO_HEAL, app_manifest, make_world, vs


def test_automated_app_syncs_and_self_heal_undoes_a_direct_edit(tmp_path: Path) -> None:
    world = make_world(tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(world.controller.run())
        try:
            world.put(app_manifest(str(world.repo.path), policy=AUTO_HEAL))
            await world.until(lambda: world.status().get("sync", {}).get("status") == "Synced",
                              what="first sync")  # fmt: skip
            live = world.live("VirtualService", "reviews")
            assert live is not None
            weights = [r["weight"] for r in live["spec"]["http"][0]["route"]]
            assert weights == [100, 0]
            # a hand edit, as `meshpilot apply -f vs.yaml` from another process makes it
            import yaml

            edited = yaml.safe_load(vs(50, 50))
            edited["metadata"]["namespace"] = "shop"
            world.put(edited)
            await world.until(
                lambda: any(r.sync_status == "OutOfSync" for r in world.results),
                what="drift detected",
            )

            def weights() -> list[int]:
                live = world.live("VirtualService", "reviews") or {}
                return [r["weight"] for r in live["spec"]["http"][0]["route"]]

            await world.until(lambda: weights() == [100, 0], what="self-heal")
            await world.until(lambda: world.status()["sync"]["status"] == "Synced", what="synced")
            assert world.status()["operationState"]["operation"]["initiatedBy"] == {
                "automated": True
            }
        finally:
            world.controller.stop()
            await task

    asyncio.run(scenario())


def test_manual_app_goes_out_of_sync_on_a_direct_edit_and_stays(tmp_path: Path) -> None:
    world = make_world(tmp_path, settings=ControllerSettings(app_resync=30.0))

    async def scenario() -> None:
        task = asyncio.create_task(world.controller.run())
        try:
            world.put(app_manifest(str(world.repo.path)))
            await world.until(
                lambda: world.status().get("sync", {}).get("status") == "OutOfSync",
                what="first comparison",
            )
        finally:
            world.controller.stop()
            await task

    asyncio.run(scenario())

"""The controller's cheap paths, against a real git repo and a real DirectoryStore: an
unchanged app is not compared again on resync, git is asked once per pass (not once per
app), and neither hides a new commit or a direct edit; drift is reported before the mesh
analysis of the whole store, whose verdict follows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import yaml

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.controller import CachingRepoService, ControllerSettings
from meshpilot.gitops.controller.view import StoreView
from meshpilot.gitops.health import analyze_manifests
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.store.directory import DirectoryStore
from tests.unit.gitops.controller.env import AUTO_HEAL, SERVICE, app_manifest, make_world

APPS = ("a", "b", "c")


def _vs(name: str, weight: int, host: str = "reviews") -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": name},
            "spec": {
                "hosts": ["reviews"],
                "http": [{"route": [{"destination": {"host": host}, "weight": weight}]}],
            },
        }
    )


def _files() -> dict[str, str]:
    files = {"mesh/svc.yaml": SERVICE}
    files.update({f"apps/{n}/vs.yaml": _vs(f"vs-{n}", 100) for n in APPS})
    return files


def test_unchanged_apps_are_skipped_and_git_is_asked_once_per_pass(tmp_path: Path) -> None:
    resync = 0.4
    world = make_world(tmp_path, _files(), ControllerSettings(app_resync=resync))
    repos = world.controller.renderer.repos
    assert isinstance(repos, CachingRepoService)
    url = str(world.repo.path)

    def status(name: str) -> dict[str, Any]:
        return world.status(name).get("sync") or {}

    async def scenario() -> None:
        task = asyncio.create_task(world.controller.run())
        try:
            world.put(app_manifest(url, name="mesh", path="mesh", policy=AUTO_HEAL))
            for n in APPS:
                world.put(app_manifest(url, name=n, path=f"apps/{n}", policy=AUTO_HEAL))
            head = world.repo.git("rev-parse", "HEAD")
            await world.until(
                lambda: (
                    all(status(n).get("revision") == head for n in (*APPS, "mesh"))
                    and all(status(n).get("status") == "Synced" for n in (*APPS, "mesh"))
                ),
                what="all synced",
            )
            names = (*APPS, "mesh")

            def settled() -> bool:  # the statuses written, a pass of all apps skipped
                last = world.results[-len(names) :]
                return len(last) == len(names) and all(r.skipped for r in last)

            await world.until(settled, what="a quiet pass")
            seen, resolves = len(world.results), repos.git_resolves
            await asyncio.sleep(4 * resync)
            idle = world.results[seen:]
            assert len(idle) >= 2 * len(names)  # every app reconciled in every pass ...
            assert all(r.skipped and not r.status_written for r in idle)  # ... not compared
            passes = 4 * resync / resync
            assert repos.git_resolves - resolves <= passes + 1  # not once per app

            # a new commit (no webhook) is still found by the resync
            sha = world.repo.commit({"apps/b/vs.yaml": _vs("vs-b", 100, "reviews.shop")})
            await world.until(lambda: status("b").get("revision") == sha, what="new commit")
            await world.until(lambda: status("b").get("status") == "Synced", what="synced")
            live = world.live("VirtualService", "vs-b") or {}
            assert live["spec"]["http"][0]["route"][0]["destination"]["host"] == "reviews.shop"

            # a direct edit of a skipped app is drift, healed
            edited = yaml.safe_load(_vs("vs-a", 50))
            edited["metadata"]["namespace"] = "shop"
            world.put(edited)

            def weight() -> int:
                live = world.live("VirtualService", "vs-a") or {}
                return int(live["spec"]["http"][0]["route"][0]["weight"])

            await world.until(lambda: weight() == 50, what="edit seen", timeout=2)
            await world.until(lambda: weight() == 100, what="self-heal")
        finally:
            world.controller.stop()
            await task

    asyncio.run(scenario())


def test_drift_is_reported_first_and_the_mesh_verdict_follows(tmp_path: Path) -> None:
    """A manual app: a direct edit pointing the route at a subset no DestinationRule has
    makes it OutOfSync, and then Degraded with the analyzer's message."""
    world = make_world(tmp_path, _files(), ControllerSettings(app_resync=30.0))
    url = str(world.repo.path)

    async def scenario() -> None:
        task = asyncio.create_task(world.controller.run())
        try:
            world.put(app_manifest(url, name="a", path="apps/a", policy=AUTO_HEAL))
            await world.until(lambda: world.status("a").get("sync", {}).get("status") == "Synced")
            world.put(app_manifest(url, name="a", path="apps/a"))  # now manual
            edited = yaml.safe_load(_vs("vs-a", 100))
            edited["metadata"]["namespace"] = "shop"
            edited["spec"]["http"][0]["route"][0]["destination"]["subset"] = "v9"
            world.put(edited)
            await world.until(lambda: world.status("a")["sync"]["status"] == "OutOfSync")
            await world.until(
                lambda: world.status("a").get("health", {}).get("status") == "Degraded",
                what="mesh verdict",
            )
            drift = [r for r in world.results if r.sync_status == "OutOfSync"]
            assert drift and drift[0].exists
        finally:
            world.controller.stop()
            await task

    asyncio.run(scenario())


def test_findings_from_stored_objects_match_the_manifest_analysis(tmp_path: Path) -> None:
    """The view analyzes the store's typed objects, incrementally; its errors are those of
    `analyze_manifests` over the same manifests, before and after a change."""
    register_gitops_kinds()
    store = DirectoryStore(tmp_path / "s")
    view = StoreView(store)

    def put(*texts: str) -> None:
        docs = [yaml.safe_load(t) for t in texts]
        for doc in docs:
            doc["metadata"]["namespace"] = "shop"
        store.apply([RawDocument("<t>", 1, d, {}) for d in docs])

    def errors(findings: Any) -> dict[Any, list[str]]:
        out = {
            k: sorted(d.message for d in v if d.severity.value == "error")
            for k, v in findings.items()
        }
        return {k: v for k, v in out.items() if v}

    def expected() -> dict[Any, list[str]]:
        snapshot = store.snapshot()
        manifests = [m for k in sorted(snapshot.objects) if (m := store.manifest(k))]
        return errors(analyze_manifests(manifests))

    put(SERVICE, _vs("vs-a", 100))
    assert errors(view.mesh_findings()) == expected() == {}
    bad = yaml.safe_load(_vs("vs-b", 100))
    bad["spec"]["http"][0]["route"][0]["destination"]["subset"] = "v9"
    put(yaml.safe_dump(bad))
    found = errors(view.mesh_findings())
    assert found == expected() and found
    assert "vs-b" in {k.name for k in found}  # (vs-a: two VirtualServices, one host)
    store.delete([ConfigKey(Kind.VIRTUAL_SERVICE, "shop", "vs-b")])
    assert errors(view.mesh_findings()) == expected() == {}

"""Discovery's background tasks under supervision: a watch that fails makes /ready 503
(naming the task and its error), shows on /debug/tasks and /metrics, and is restarted;
ready again once it has run healthy, and edits are served again."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

from meshpilot.config.kinds import Kind
from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from meshpilot.store.files import FileStore
from tests.conftest import REPO
from tests.unit.tasks.probes import get as _get


class _WatchFailsOnce(FileStore):
    """A file store whose first watch dies on an error of its own (what any unexpected
    exception in the watch would do); its restarts watch normally."""

    watches = 0

    async def watch(self) -> None:
        self.watches += 1
        if self.watches == 1:
            await asyncio.sleep(0.1)
            raise RuntimeError("inotify went away")
        await super().watch()


def test_a_failed_watch_is_reported_not_ready_and_restarted(tmp_path: Path) -> None:
    config = tmp_path / "config"
    shutil.copytree(REPO / "examples" / "bookinfo", config)
    settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0), debounce_after=0.01)
    store = _WatchFailsOnce([config], poll_interval=0.05)

    async def scenario() -> None:
        discovery = Discovery([config], settings, store)
        discovery.server.tasks.backoff_initial = 0.5
        discovery.server.tasks.healthy_after = 0.3
        await discovery.start()
        port = discovery.monitoring_port
        try:
            await asyncio.sleep(0.2)  # the watch has failed, waits 0.5 s to restart
            status, body = await asyncio.to_thread(_get, port, "/ready")
            assert (status, body) == (
                503, "not ready\ntask config-watch restarting: RuntimeError: inotify went away\n"
            )  # fmt: skip
            tasks = json.loads((await asyncio.to_thread(_get, port, "/debug/tasks"))[1])
            watch = next(t for t in tasks["tasks"] if t["name"] == "config-watch")
            assert tasks["ready"] is False
            assert (watch["state"], watch["failures"], watch["retry_in_s"]) == (
                "restarting", 1, 0.5,
            )  # fmt: skip
            metrics = (await asyncio.to_thread(_get, port, "/metrics"))[1]
            assert 'meshpilot_task_failures_total{task="config-watch"} 1\n' in metrics
            assert 'meshpilot_task_up{task="config-watch"} 0\n' in metrics
            assert 'meshpilot_task_up{task="debounce"} 1\n' in metrics

            await asyncio.sleep(0.5 + 0.3 + 0.2)  # restarted, then healthy for 0.3 s
            assert await asyncio.to_thread(_get, port, "/ready") == (200, "ok\n")
            assert store.watches == 2
            (config / "canary.yaml").write_text(
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
                "metadata: {name: ratings-canary, namespace: default}\n"
                "spec: {hosts: [ratings], http: [{route: [{destination: {host: ratings}}]}]}\n"
            )
            for _ in range(200):
                push = discovery.server.push_context
                names = {o.name for o in push.of_kind(Kind.VIRTUAL_SERVICE)}
                if "ratings-canary" in names:
                    break
                await asyncio.sleep(0.02)
            assert "ratings-canary" in names  # the restarted watch serves edits
        finally:
            await discovery.stop(0)

    asyncio.run(scenario())

"""`meshpilot discovery --store DIR` serves what `meshpilot apply --store DIR` writes from
another process: inotify on the journal notices the write, and a whole write is pushed
after the short write window, not the debounce meant for files edited one at a time."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_paths
from meshpilot.discovery import Discovery
from meshpilot.settings import Ports, Settings
from meshpilot.store.directory import DirectoryStore

REPO = Path(__file__).resolve().parents[3]
MESHPILOT = Path(sys.executable).parent / "meshpilot"

VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings-canary, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
"""


def _pushed_after_apply(tmp_path: Path, settings: Settings, poll_interval: float) -> float:
    """Seconds from another process's `meshpilot apply --store` to the push context."""
    store_dir = tmp_path / "live"
    DirectoryStore(store_dir).apply(read_paths([REPO / "examples" / "bookinfo"]).documents)
    (tmp_path / "vs.yaml").write_text(VS)

    async def scenario() -> float:
        discovery = Discovery([], settings, DirectoryStore(store_dir, poll_interval=poll_interval))
        await discovery.start()
        try:
            names = {o.name for o in discovery.server.push_context.of_kind(Kind.VIRTUAL_SERVICE)}
            assert "ratings-canary" not in names and "reviews" in names
            proc = await asyncio.create_subprocess_exec(
                str(MESHPILOT), "apply", "-f", str(tmp_path / "vs.yaml"), "--store", str(store_dir),
                stdout=subprocess.PIPE,
            )  # fmt: skip
            out, _ = await proc.communicate()
            assert out.decode() == "virtualservice.networking.istio.io/ratings-canary created\n"
            loop = asyncio.get_running_loop()
            written = loop.time()
            while True:
                push = discovery.server.push_context
                if any(o.name == "ratings-canary" for o in push.of_kind(Kind.VIRTUAL_SERVICE)):
                    return loop.time() - written
                assert loop.time() - written < 2, "the change never reached the push context"
                await asyncio.sleep(0.005)
        finally:
            await discovery.stop(0)

    return asyncio.run(scenario())


def test_discovery_serves_a_store_written_by_another_process(tmp_path: Path) -> None:
    settings = Settings(ports=Ports(xds_plaintext=0, monitoring=0), debounce_after=0.02)
    # store poll (20 ms) + debounce (20 ms) + building the push
    assert _pushed_after_apply(tmp_path, settings, poll_interval=0.02) < 0.5


def test_a_whole_write_is_noticed_at_once_and_not_held_by_the_debounce(tmp_path: Path) -> None:
    # A 10 s poll and a 10 s debounce: only inotify and the write window can be this quick.
    ports = Ports(xds_plaintext=0, monitoring=0)
    settings = Settings(ports=ports, debounce_after=10.0, debounce_after_write=0.01)
    assert _pushed_after_apply(tmp_path, settings, poll_interval=10.0) < 1.0

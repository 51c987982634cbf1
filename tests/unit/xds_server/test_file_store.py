"""FileStore: change events by key, last good version of invalid objects and files."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.loader import load_paths
from meshpilot.errors import MeshpilotError
from meshpilot.store import MESH_KEY, ChangeEvent, FileStore

VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: web, namespace: default}}
spec:
  hosts: [web]
  http:
  - route:
    - destination: {{host: web, subset: {subset}}}
"""
SVC = """apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.20
  selector: {app: web}
  ports: [{name: http, port: 8080}]
"""
VS_KEY = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "web")
SVC_KEY = ConfigKey(Kind.SERVICE, "default", "web")


def write(path: Path, text: str) -> None:
    """Atomically, as editors and GitOps tools do."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.fixture
def store(tmp_path: Path) -> tuple[FileStore, list[ChangeEvent]]:
    write(tmp_path / "vs.yaml", VS.format(subset="v1"))
    write(tmp_path / "svc.yaml", SVC)
    store = FileStore([tmp_path], poll_interval=0.02)
    events: list[ChangeEvent] = []
    store.subscribe(events.append)
    first = store.load()
    assert first is not None and first.keys == {VS_KEY, SVC_KEY}
    events.clear()
    return store, events


def test_changed_object_is_reported_by_key(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, events = store
    write(tmp_path / "vs.yaml", VS.format(subset="v2"))
    event = files.load()
    assert event is not None and event.keys == {VS_KEY}
    assert events == [event] and event.store_version == 2
    assert files.snapshot().objects[VS_KEY].model.spec.http[0].route[0].destination.subset == "v2"


def test_unchanged_content_is_no_event(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, events = store
    write(tmp_path / "vs.yaml", "# a comment\n" + VS.format(subset="v1"))
    assert files.load() is None and not events
    assert files.snapshot().version == 1


def test_invalid_yaml_keeps_the_files_objects(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, events = store
    write(tmp_path / "vs.yaml", "kind: [unclosed\n")
    assert files.load() is None and not events
    snap = files.snapshot()
    assert VS_KEY in snap.objects and snap.stale == {VS_KEY}
    assert any("invalid YAML" in d.message for d in snap.diagnostics)
    write(tmp_path / "vs.yaml", VS.format(subset="v3"))
    event = files.load()
    assert event is not None and event.keys == {VS_KEY} and not files.snapshot().stale


def test_invalid_object_keeps_its_last_good_version(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, _ = store
    bad = VS.format(subset="v1").replace("hosts: [web]", "hosts: [web]\n  bogus: 1")
    write(tmp_path / "vs.yaml", bad)
    assert files.load() is None
    snap = files.snapshot()
    assert snap.stale == {VS_KEY}
    assert any(d.name == "web" and d.kind == "VirtualService" for d in snap.diagnostics)


def test_deleted_file_removes_its_objects(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, _ = store
    (tmp_path / "vs.yaml").unlink()
    event = files.load()
    assert event is not None and event.keys == {VS_KEY}
    assert VS_KEY not in files.snapshot().objects


def test_mesh_change_is_reported(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, _ = store
    write(tmp_path / "meshconfig.yaml", "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n")
    event = files.load()
    assert event is not None and event.keys == {MESH_KEY}


def test_missing_path_fails_the_first_load_then_keeps_last_good(tmp_path: Path) -> None:
    with pytest.raises(MeshpilotError):
        FileStore([tmp_path / "nope"]).load()
    write(tmp_path / "svc.yaml", SVC)
    files = FileStore([tmp_path / "svc.yaml"])
    files.load()
    (tmp_path / "svc.yaml").unlink()
    assert files.load() is None
    snap = files.snapshot()
    assert snap.error and "no such file" in snap.error and SVC_KEY in snap.objects


def test_watch_notices_edits(tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]) -> None:
    files, events = store

    async def scenario() -> None:
        task = asyncio.create_task(files.watch())
        await asyncio.sleep(0.05)
        write(tmp_path / "vs.yaml", VS.format(subset="v9"))
        for _ in range(100):
            if events:
                break
            await asyncio.sleep(0.02)
        task.cancel()

    asyncio.run(scenario())
    assert [e.keys for e in events] == [{VS_KEY}]


def test_only_changed_files_are_read_again(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, _ = store
    assert files.files_parsed == 2
    svc_before = files.snapshot().objects[SVC_KEY]
    write(tmp_path / "vs.yaml", VS.format(subset="v2"))
    event = files.load()
    assert event is not None and event.keys == {VS_KEY}
    assert files.files_parsed == 3  # vs.yaml only
    assert files.snapshot().objects[SVC_KEY] is svc_before  # svc.yaml's objects are kept


def test_files_read_one_by_one_merge_as_one_read(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    """Duplicates across files and a second mesh config are reported as one read of all the
    files reports them, with the same objects and mesh config."""
    files, _ = store
    (tmp_path / "sub").mkdir()
    write(tmp_path / "meshconfig.yaml", "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n")
    write(tmp_path / "sub" / "mesh.yaml", "outboundTrafficPolicy: {mode: ALLOW_ANY}\n")
    write(tmp_path / "zz-dup.yaml", SVC)
    files.load()
    snap = files.snapshot()
    whole = load_paths([tmp_path])
    assert {str(d) for d in snap.diagnostics} == {str(d) for d in whole.diagnostics}
    assert dict(snap.objects) == {o.key: o for o in whole.objects}
    messages = [d.message for d in snap.diagnostics]
    assert any(m.startswith("duplicate object: already defined at") for m in messages)
    assert any(m.startswith("a second mesh config") for m in messages)
    assert str(snap.objects[SVC_KEY].origin.file).endswith("svc.yaml")


def test_inotify_wakes_the_watch_before_the_poll(
    tmp_path: Path, store: tuple[FileStore, list[ChangeEvent]]
) -> None:
    files, events = store
    files.poll_interval = 30.0  # the poll alone would not see the edit within this test

    async def scenario() -> float:
        task = asyncio.create_task(files.watch())
        await asyncio.sleep(0.05)
        start = time.monotonic()
        write(tmp_path / "vs.yaml", VS.format(subset="v8"))
        while not events and time.monotonic() - start < 5:
            await asyncio.sleep(0.005)
        task.cancel()
        return time.monotonic() - start

    took = asyncio.run(scenario())
    assert [e.keys for e in events] == [{VS_KEY}]
    assert took < 0.5

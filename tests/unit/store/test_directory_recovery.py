"""DirectoryStore recovery, step by step: a writer that died during its renames is finished
(also for a reader that was following all along, without any new process), one that died
before them is undone, an interrupted delete is completed, a store of the earlier format
loses its stale temporary files once, and a live writer's files are never touched.

A writer's death is the end of a `with store_lock(...)` block that did part of a write with
the store's own steps: what a killed writer leaves (the kernel drops a dead process's
flock). test_directory_crash.py kills real writers at random moments."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.store.base import ChangeEvent
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.directory.atomic import rename_staged, stage_files
from meshpilot.store.directory.intent import IntentFile
from meshpilot.store.directory.store_dir import MARKER, object_path, store_lock
from meshpilot.store.directory.yaml_files import dump_manifest, load_manifest

KEYS = [ConfigKey(Kind.CONFIG_MAP, f"ns{i % 3}", f"c{i}") for i in range(12)]
LOG = "meshpilot.store.directory.recovery"


def documents(value: str) -> list[RawDocument]:
    text = "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {k.name}, "
        f"namespace: {k.namespace}}}\ndata: {{k: '{value}'}}\n"
        for k in KEYS
    )
    return read_text(text, "in.yaml").documents


def values(store: DirectoryStore) -> dict[str, int]:
    """value -> how many objects hold it, as the store handle serves them."""
    out: dict[str, int] = {}
    for key in KEYS:
        manifest = store.manifest(key)
        value = "(none)" if manifest is None else manifest["data"]["k"]
        out[value] = out.get(value, 0) + 1
    return out


def file_values(root: Path) -> dict[str, int]:
    """The same, from the files as they lie (what an unrecovered reader would load)."""
    out: dict[str, int] = {}
    for key in KEYS:
        path = object_path(root, key)
        exists = path.exists()
        value = load_manifest(path.read_text(), str(path))["data"]["k"] if exists else "(none)"
        out[value] = out.get(value, 0) + 1
    return out


def temporaries(root: Path) -> list[Path]:
    return sorted(root.rglob(".*.tmp"))


def new_files(root: Path, value: str) -> list[tuple[ConfigKey, Path, str]]:
    manifests = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": k.name, "namespace": k.namespace, "resourceVersion": "99"},
            "data": {"k": value},
        }
        for k in KEYS
    ]
    return [
        (k, object_path(root, k), dump_manifest(m)) for k, m in zip(KEYS, manifests, strict=True)
    ]


def died_during_renames(root: Path, value: str, renamed: int) -> int:
    """A write of `value` to every object whose writer died after `renamed` renames;
    returns the store version it was writing."""
    version = DirectoryStore(root).journal.last_version() + 1
    with store_lock(root):
        staged = IntentFile(root).stage(version, new_files(root, value))
        rename_staged(staged[:renamed])
    return version


def test_a_write_that_died_during_its_renames_is_finished_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    version = died_during_renames(root, "new", renamed=5)
    assert file_values(root) == {"new": 5, "old": 7}  # the mix the crash left on disk
    with caplog.at_level(logging.WARNING, logger=LOG):
        reader = DirectoryStore(root)
    assert values(reader) == {"new": 12}
    assert reader.snapshot().version == version
    assert temporaries(root) == []
    assert (root / ".intent").read_text() == ""
    assert (
        f"finished a write interrupted at store version {version} (12 objects); "
        "0 temporary files removed" in caplog.text
    )


def test_a_following_reader_takes_in_the_finished_write_without_any_new_process(
    tmp_path: Path,
) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    follower = DirectoryStore(root, poll_interval=0.02)
    follower.refresh()
    events: list[ChangeEvent] = []
    follower.subscribe(events.append)

    async def scenario() -> None:
        task = asyncio.create_task(follower.watch())
        await asyncio.sleep(0.05)
        version = await asyncio.to_thread(died_during_renames, root, "new", 7)
        for _ in range(100):
            if follower.snapshot().version == version:
                break
            await asyncio.sleep(0.02)
        task.cancel()

    asyncio.run(scenario())
    assert values(follower) == {"new": 12}
    assert temporaries(root) == []
    assert [sorted(e.keys) for e in events] == [sorted(KEYS)]  # one event: the whole write


def test_a_write_that_died_before_its_renames_is_undone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    with store_lock(root):  # died while writing its temporary files
        IntentFile(root).begin(2)
        stage_files([(path, text) for _, path, text in new_files(root, "new")[:4]])
    assert len(temporaries(root)) == 4
    with caplog.at_level(logging.WARNING, logger=LOG):
        reader = DirectoryStore(root)
    assert values(reader) == {"old": 12}
    assert reader.snapshot().version == 1
    assert temporaries(root) == []
    assert "undid a write interrupted before its first rename (store version 2" in caplog.text
    assert "4 temporary files removed" in caplog.text
    reader.apply(documents("next"))  # the version that was never committed is used now
    assert reader.snapshot().version == 2 and values(DirectoryStore(root)) == {"next": 12}


def test_an_interrupted_delete_is_completed(tmp_path: Path) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    follower = DirectoryStore(root)
    follower.refresh()
    with store_lock(root):
        IntentFile(root).ready(2, [], KEYS)
        for key in KEYS[:3]:
            object_path(root, key).unlink()
    assert file_values(root) == {"(none)": 3, "old": 9}
    assert values(DirectoryStore(root)) == {"(none)": 12}
    follower.refresh()
    assert values(follower) == {"(none)": 12}
    assert follower.snapshot().version == 2


def test_a_store_of_the_earlier_format_loses_its_stale_temporary_files_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    (root / MARKER).write_text("meshpilot directory store, format 1\n")  # as written before
    stale = object_path(root, KEYS[0]).parent / ".c0.k2j4h1x0.tmp"
    stale.write_text("half a manif")
    with caplog.at_level(logging.WARNING, logger=LOG):
        reader = DirectoryStore(root)
    assert values(reader) == {"old": 12}
    assert not stale.exists()
    assert "1 temporary files of interrupted writes removed" in caplog.text
    assert (root / MARKER).read_text() == "meshpilot directory store, format 2\n"


def test_a_live_writers_files_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("old"))
    follower = DirectoryStore(root, poll_interval=0.02)
    follower.refresh()

    async def watch_a_while() -> None:
        task = asyncio.create_task(follower.watch())
        await asyncio.sleep(0.2)
        task.cancel()

    with store_lock(root):  # a writer at work: its intent and temporary files are live
        IntentFile(root).begin(2)
        stage_files([(path, text) for _, path, text in new_files(root, "new")[:2]])
        asyncio.run(watch_a_while())
        assert len(temporaries(root)) == 2
        assert (root / ".intent").read_text() == "begin\t2\n"
    assert values(follower) == {"old": 12}

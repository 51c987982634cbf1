"""DirectoryStore under kill -9: a writer killed at a random moment of an apply of 200
objects leaves, once the store is opened again, every object old or every object new (never
a mix), no temporary file, and a follower that was running meanwhile holds what a fresh
reader sees.

The writes skip their fsyncs (`durable=False`: the same steps, in the same order): a killed
process leaves the page cache as it was, and 200 fsyncs per write would make each write
slow enough on a busy disk to allow only a few kills in the test's time."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.store.directory import DirectoryStore

OBJECTS = 200
KILLS = 40
KEYS = [ConfigKey(Kind.CONFIG_MAP, f"ns{i % 5}", f"c{i}") for i in range(OBJECTS)]


def documents(value: str) -> list[RawDocument]:
    text = "".join(
        f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {k.name}, "
        f"namespace: {k.namespace}}}\ndata: {{k: '{value}'}}\n"
        for k in KEYS
    )
    return read_text(text, "in.yaml").documents


def values(store: DirectoryStore) -> dict[str, set[str]]:
    """value -> the names holding it."""
    out: dict[str, set[str]] = {}
    for key in KEYS:
        manifest = store.manifest(key)
        assert manifest is not None, key
        out.setdefault(manifest["data"]["k"], set()).add(key.name)
    return out


def temporary_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.tmp"))


def applied_in_child(root: Path, docs: Sequence[RawDocument]) -> tuple[int, int]:
    """Fork a writer (a real process, like `meshpilot apply`) that opens the store and
    applies `docs`; returns (pid, read end of a pipe that says when the apply starts)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: never returns into pytest
        try:
            os.close(read_fd)
            store = DirectoryStore(root)
            os.write(write_fd, b"go")
            store.apply(docs, durable=False)
        finally:
            os._exit(0)
    os.close(write_fd)
    return pid, read_fd


def test_a_writer_killed_at_random_moments_leaves_all_old_or_all_new(tmp_path: Path) -> None:
    root = tmp_path / "live"
    DirectoryStore(root).apply(documents("v0"))
    follower = DirectoryStore(root)  # runs through every crash, following the journal
    follower.refresh()
    started = time.perf_counter()
    DirectoryStore(root).apply(documents("timing"), durable=False)
    window = (time.perf_counter() - started) * 1.3  # one whole apply, and a little after
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    current, outcomes = "timing", {"old": 0, "new": 0, "interrupted": 0}
    for run in range(KILLS):
        new = f"v{run + 1}"
        pid, ready = applied_in_child(root, documents(new))
        assert os.read(ready, 2) == b"go"
        os.close(ready)
        time.sleep(rng.uniform(0, window))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        intent = root / ".intent"
        outcomes["interrupted"] += intent.exists() and intent.stat().st_size > 0

        reader = DirectoryStore(root)  # the next open recovers
        seen = values(reader)
        where = f"kill {run} (seed {seed})"
        assert len(seen) == 1, f"{where}: a mix of old and new objects: " + ", ".join(
            f"{value}: {len(names)}" for value, names in sorted(seen.items())
        )
        assert set(seen) <= {current, new}, where
        assert temporary_files(root) == [], where
        outcomes["new" if new in seen else "old"] += 1
        current = next(iter(seen))
        versions = {reader.manifest(k)["metadata"]["resourceVersion"] for k in KEYS}  # type: ignore[index]
        assert len(versions) == 1, f"{where}: objects of several writes: {versions}"
        follower.refresh()
        assert values(follower) == seen, f"{where}: the running follower differs"
        assert follower.snapshot().version == reader.snapshot().version, where
    # the kills landed on both sides of the commit point, and some in the middle of a write
    assert outcomes["old"] and outcomes["new"] and outcomes["interrupted"], outcomes

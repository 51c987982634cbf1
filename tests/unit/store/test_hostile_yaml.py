"""Hostile YAML in a live store (a directory store's object file edited by hand, a watched
file of `meshpilot discovery -f`) is a diagnostic naming file and line, never an exception,
and an alias bomb stops at once."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.store import FileStore
from meshpilot.store.directory import DirectoryStore, StoreError
from tests.unit.config.test_yaml_hostile import LAUGHS

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: default}\ndata:\n"
KEY = ConfigKey(Kind.CONFIG_MAP, "default", "app")
CASES = {
    "int": (CM + "  n: !!int abc\n", "5: invalid YAML: !!int 'abc' is not an integer"),
    "recursive": (CM + "  a: &a [*a]\n", "5: invalid YAML: an anchor's value contains its alias"),
    "big-int": (CM + "  n: !!int " + "7" * 5000 + "\n", "5: invalid YAML: integer of 5000 digits"),
    "laughs": (LAUGHS, "4: invalid YAML: too many aliases (alias expansion bounded"),
}


def _stored(tmp_path: Path) -> tuple[DirectoryStore, Path]:
    store = DirectoryStore(tmp_path / "live")
    store.apply(read_text(CM + "  k: v\n", "in.yaml").documents)
    return store, tmp_path / "live" / "ConfigMap" / "default" / "app.yaml"


@pytest.mark.parametrize("name", CASES)
def test_hand_edited_store_file_is_a_diagnostic(tmp_path: Path, name: str) -> None:
    text, expected = CASES[name]
    _, path = _stored(tmp_path)
    path.write_text(text)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        snapshot = DirectoryStore(tmp_path / "live").snapshot()
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert KEY not in snapshot.objects
    messages = [f"{d.file}:{d.line}: {d.message}" for d in snapshot.diagnostics]
    assert any(m.startswith(f"{path}:{expected}") for m in messages), messages
    assert elapsed < 1 and peak < 50 * 2**20, (elapsed, peak)


def test_writing_over_a_hostile_store_file_names_its_line(tmp_path: Path) -> None:
    _, path = _stored(tmp_path)
    path.write_text(CASES["int"][0])
    other_process = DirectoryStore(tmp_path / "live")
    with pytest.raises(StoreError, match=rf"^{path}:5: invalid YAML: !!int 'abc' is not an"):
        other_process.apply(read_text(CM + "  k: w\n", "in.yaml").documents)


@pytest.mark.parametrize("name", CASES)
def test_watched_file_is_a_diagnostic(tmp_path: Path, name: str) -> None:
    text, expected = CASES[name]
    (tmp_path / "bad.yaml").write_text(text)
    files = FileStore([tmp_path], poll_interval=0.02)
    files.load()
    snapshot = files.snapshot()
    assert KEY not in snapshot.objects
    messages = [f"{d.file}:{d.line}: {d.message}" for d in snapshot.diagnostics]
    assert any(m.startswith(f"{tmp_path / 'bad.yaml'}:{expected}") for m in messages), messages

"""DirectoryStore writes that skip work: many objects in one durable batch, the in-memory
copy used only while it is the store's current version, the written manifests taken in
without reading the files back (unless another writer replaced them), and mesh settings
recomputed only when the istio ConfigMap changes."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.store.directory import DirectoryStore
from meshpilot.store.writes import ApplyAction, ConflictError, keeps_stored


def cm(name: str, namespace: str, value: str, extra: str = "") -> list[RawDocument]:
    text = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: {namespace}"
        f"{extra}}}\ndata: {{k: '{value}'}}\n"
    )
    return read_text(text, "in.yaml").documents


def key(name: str, namespace: str) -> ConfigKey:
    return ConfigKey(Kind.CONFIG_MAP, namespace, name)


MESH = """apiVersion: v1
kind: ConfigMap
metadata: {{name: istio, namespace: istio-system}}
data:
  mesh: |
    trustDomain: {domain}
"""


def test_one_batch_writes_every_object_privately_under_one_version(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "live")
    documents = [d for i in range(6) for d in cm(f"c{i}", f"ns{i % 3}", "v")]
    results = store.apply(documents)
    assert {r.action for r in results} == {ApplyAction.CREATED}
    assert {r.resource_version for r in results} == {"1"}
    assert store.journal.last_version() == 1
    for i in range(6):
        path = tmp_path / "live" / "ConfigMap" / f"ns{i % 3}" / f"c{i}.yaml"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    leftovers = [p for p in (tmp_path / "live").rglob("*.tmp")]
    assert leftovers == []
    # a fresh reader (another process) sees exactly what the writer holds
    other = DirectoryStore(tmp_path / "live")
    for i in range(6):
        assert other.manifest(key(f"c{i}", f"ns{i % 3}")) == store.manifest(
            key(f"c{i}", f"ns{i % 3}")
        )


def test_a_handle_behind_another_writer_reads_the_files(tmp_path: Path) -> None:
    mine, theirs = DirectoryStore(tmp_path / "live"), DirectoryStore(tmp_path / "live")
    mine.apply(cm("a", "default", "1"))
    theirs.apply(cm("a", "default", "2"))  # `mine` has not refreshed: its copy is stale
    latest = theirs.manifest(key("a", "default"))
    assert latest is not None
    rv = latest["metadata"]["resourceVersion"]
    # an apply naming the current resourceVersion is accepted, the stale one refused
    accepted = mine.apply(cm("a", "default", "3", extra=f", resourceVersion: '{rv}'"))
    assert accepted[0].action is ApplyAction.CONFIGURED
    with pytest.raises(ConflictError, match="has been modified"):
        mine.apply(cm("a", "default", "4", extra=f", resourceVersion: '{rv}'"))
    assert (mine.manifest(key("a", "default")) or {})["data"] == {"k": "3"}


def test_own_write_replaced_by_a_later_writer_is_read_back(tmp_path: Path) -> None:
    mine, theirs = DirectoryStore(tmp_path / "live"), DirectoryStore(tmp_path / "live")
    mine.load()
    theirs.load()
    mine.apply(cm("a", "default", "1"))
    theirs.refresh()
    theirs.apply(cm("a", "default", "2"))
    mine.apply(cm("b", "default", "x"))  # its refresh takes in both writes
    assert (mine.manifest(key("a", "default")) or {})["data"] == {"k": "2"}
    assert mine.snapshot().version == theirs.journal.last_version()


def test_a_remembered_write_is_not_used_once_superseded(tmp_path: Path) -> None:
    """White box: the remembered manifest of a write the handle has not taken in yet
    (another thread's refresh may lag) is ignored when a later journal entry replaced it."""
    mine, theirs = DirectoryStore(tmp_path / "live"), DirectoryStore(tmp_path / "live")
    mine.apply(cm("a", "default", "1"))
    old = mine.manifest(key("a", "default"))
    assert old is not None
    mine._own_writes[key("a", "default")] = (mine.snapshot().version, old)
    theirs.apply(cm("a", "default", "2"))
    mine.refresh()
    assert (mine.manifest(key("a", "default")) or {})["data"] == {"k": "2"}


def test_unchanged_apply_and_delete_then_create_again(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "live")
    store.apply(cm("a", "default", "1"))
    version = store.journal.last_version()
    assert store.apply(cm("a", "default", "1"))[0].action is ApplyAction.UNCHANGED
    assert store.journal.last_version() == version
    store.delete([key("a", "default")])
    assert not (tmp_path / "live" / "ConfigMap" / "default" / "a.yaml").exists()
    assert store.apply(cm("a", "default", "1"))[0].action is ApplyAction.CREATED


def test_keeps_stored_follows_the_stores_unchanged_rule(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "live")
    store.apply(cm("a", "default", "1"))
    live = store.manifest(key("a", "default"))
    same = cm("a", "default", "1")[0].data
    assert keeps_stored(key("a", "default"), same, live)
    assert not keeps_stored(key("a", "default"), cm("a", "default", "2")[0].data, live)
    assert not keeps_stored(key("a", "default"), same, None)
    stale = cm("a", "default", "1", extra=", resourceVersion: '99'")[0].data
    assert not keeps_stored(key("a", "default"), stale, live)


def test_mesh_settings_follow_only_the_istio_configmap(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "live")
    store.apply(read_text(MESH.format(domain="one.example"), "mesh.yaml").documents)
    mesh = store.snapshot().mesh
    assert mesh.trust_domain == "one.example"
    store.apply(cm("other", "default", "1"))
    assert store.snapshot().mesh is mesh  # not recomputed for an unrelated object
    store.apply(read_text(MESH.format(domain="two.example"), "mesh.yaml").documents)
    assert store.snapshot().mesh.trust_domain == "two.example"
    other = DirectoryStore(tmp_path / "live")
    assert other.snapshot().mesh.trust_domain == "two.example"

"""DirectoryStore: atomic writes, all-or-nothing validation with the loader's messages,
resourceVersion conflicts, kept status and ownership, and the change feed across processes."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument, read_text
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.store import ChangeEvent
from meshpilot.store.directory import DirectoryStore, StoreError
from meshpilot.store.writes import (
    TRACKING_ANNOTATION,
    ApplyAction,
    ConflictError,
    InvalidObjectsError,
)

register_gitops_kinds()

VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: reviews, namespace: default{extra}}}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {{host: reviews, subset: v1}}
      weight: {weight}
    - destination: {{host: reviews, subset: v2}}
      weight: {rest}
"""
VS_KEY = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "reviews")


def docs(text: str, file: str = "in.yaml") -> list[RawDocument]:
    return read_text(text, file).documents


def vs(weight: int = 80, extra: str = "") -> list[RawDocument]:
    return docs(VS.format(weight=weight, rest=100 - weight, extra=extra))


@pytest.fixture
def store(tmp_path: Path) -> DirectoryStore:
    return DirectoryStore(tmp_path / "live")


def test_apply_creates_configures_and_reports_unchanged(store: DirectoryStore) -> None:
    assert [r.message for r in store.apply(vs(80))] == [
        "virtualservice.networking.istio.io/reviews created"
    ]
    assert store.apply(vs(80))[0].action is ApplyAction.UNCHANGED
    result = store.apply(vs(50))[0]
    assert result.message == "virtualservice.networking.istio.io/reviews configured"
    assert result.resource_version == "2"
    manifest = store.manifest(VS_KEY)
    assert manifest is not None
    assert manifest["spec"]["http"][0]["route"][0]["weight"] == 50
    assert manifest["metadata"]["resourceVersion"] == "2"
    assert manifest["metadata"]["generation"] == 2
    assert store.snapshot().version == 2


def test_one_file_per_object_private_and_atomic(store: DirectoryStore) -> None:
    store.apply(vs())
    path = store.root / "VirtualService" / "default" / "reviews.yaml"
    assert path.is_file()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    leftovers = [p.name for p in path.parent.iterdir() if p.name != "reviews.yaml"]
    assert leftovers == []


def test_documents_sharing_file_and_line_are_each_written_to_their_own_file(
    store: DirectoryStore,
) -> None:
    # One Helm template rendering two objects gives both the template's file and line.
    first = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "1"}}
    second = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}, "data": {}}
    store.apply([RawDocument("chart/templates/all.yaml", 3, d, {}) for d in (first, second)])
    config_map = store.manifest(ConfigKey(Kind.CONFIG_MAP, "default", "a"))
    secret = store.manifest(ConfigKey(Kind.SECRET, "default", "b"))
    assert config_map is not None and config_map["kind"] == "ConfigMap"
    assert config_map["data"] == {"k": "1"}
    assert secret is not None and secret["kind"] == "Secret"


def test_invalid_object_refused_with_loader_message_nothing_written(
    store: DirectoryStore,
) -> None:
    store.apply(vs(80))
    bad = (
        VS.format(weight=80, rest=20, extra="")
        + "---\n"
        + VS.format(weight=-5, rest=105, extra="").replace("name: reviews", "name: ratings")
    )
    with pytest.raises(InvalidObjectsError) as err:
        store.apply(docs(bad, "bad.yaml"))
    assert str(err.value).startswith(
        "bad.yaml:21: error: VirtualService default/ratings: spec.http[0].route[0].weight:"
    )
    assert store.get(ConfigKey(Kind.VIRTUAL_SERVICE, "default", "ratings")) is None
    assert store.snapshot().version == 1


def test_unknown_kind_refused(store: DirectoryStore) -> None:
    text = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\nspec: {}\n"
    with pytest.raises(InvalidObjectsError) as err:
        store.apply(docs(text, "d.yaml"))
    assert str(err.value) == (
        "d.yaml:1: error: StatefulSet web: kind: no matches for kind 'StatefulSet': "
        "the store cannot hold it"
    )


def test_stale_resource_version_conflicts(store: DirectoryStore) -> None:
    store.apply(vs(80))
    store.apply(vs(60))
    with pytest.raises(ConflictError) as err:
        store.apply(vs(50, extra=", resourceVersion: '1'"))
    assert str(err.value) == (
        'Operation cannot be fulfilled on virtualservices.networking.istio.io "reviews": '
        "the object has been modified; please apply your changes to the latest version "
        "and try again"
    )
    assert store.apply(vs(50, extra=", resourceVersion: '2'"))[0].action is ApplyAction.CONFIGURED


def test_tracking_annotation_and_status_survive_a_hand_apply(store: DirectoryStore) -> None:
    tracking = "shop:networking.istio.io/VirtualService:default/reviews"
    owned = f", annotations: {{{TRACKING_ANNOTATION}: '{tracking}'}}"
    store.apply(vs(80, extra=owned))
    store.apply(vs(10))  # a hand edit without the annotation: drift, still owned
    manifest = store.manifest(VS_KEY)
    assert manifest is not None
    assert manifest["metadata"]["annotations"][TRACKING_ANNOTATION].startswith("shop:")
    assert manifest["spec"]["http"][0]["route"][0]["weight"] == 10


def test_dry_run_writes_nothing(store: DirectoryStore) -> None:
    assert store.apply(vs(), dry_run=True)[0].action is ApplyAction.CREATED
    assert store.get(VS_KEY) is None
    assert not (store.root / "VirtualService").exists()


def test_delete_reports_missing_objects(store: DirectoryStore) -> None:
    store.apply(vs())
    missing = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "nope")
    results = store.delete([VS_KEY, missing])
    assert [r.message for r in results] == [
        'virtualservice.networking.istio.io "reviews" deleted',
        'virtualservices.networking.istio.io "nope" not found',
    ]
    assert store.get(VS_KEY) is None


def test_another_instance_sees_changes_as_events(tmp_path: Path) -> None:
    writer = DirectoryStore(tmp_path / "live")
    reader = DirectoryStore(tmp_path / "live")
    assert reader.snapshot().version == 0
    events: list[ChangeEvent] = []
    reader.subscribe(events.append)
    writer.apply(vs(80))
    writer.apply(vs(80))  # unchanged: no new version, no event
    # whole writes: discovery need not wait for more of the same change
    assert reader.refresh() == ChangeEvent(frozenset({VS_KEY}), 1, whole_writes=True)
    writer.delete([VS_KEY])
    reader.refresh()
    assert events == [
        ChangeEvent(frozenset({VS_KEY}), 1, whole_writes=True),
        ChangeEvent(frozenset({VS_KEY}), 2, whole_writes=True),
    ]
    assert reader.get(VS_KEY) is None


def test_replaced_journal_makes_readers_reload(tmp_path: Path) -> None:
    writer = DirectoryStore(tmp_path / "live")
    reader = DirectoryStore(tmp_path / "live")
    writer.apply(vs(80))
    reader.refresh()
    journal = tmp_path / "live" / ".journal"
    replacement = journal.with_name("j.new")
    replacement.write_text("7\tbase\n")
    os.replace(replacement, journal)  # as compaction does
    writer.apply(vs(30))
    reader.refresh()
    manifest = reader.manifest(VS_KEY)
    assert manifest is not None and manifest["spec"]["http"][0]["route"][0]["weight"] == 30
    assert reader.snapshot().version == 8


def test_watch_picks_up_a_write_within_100ms(tmp_path: Path) -> None:
    async def scenario() -> float:
        reader = DirectoryStore(tmp_path / "live", poll_interval=0.02)
        reader.load()
        seen = asyncio.Event()
        reader.subscribe(lambda event: seen.set())
        task = asyncio.create_task(reader.watch())
        try:
            writer = DirectoryStore(tmp_path / "live")
            loop = asyncio.get_running_loop()
            start = loop.time()
            await asyncio.to_thread(writer.apply, vs())
            await asyncio.wait_for(seen.wait(), 2)
            return loop.time() - start
        finally:
            task.cancel()

    assert asyncio.run(scenario()) < 0.1


def test_a_non_store_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not a meshpilot store"):
        DirectoryStore(tmp_path)


def test_mesh_settings_come_from_the_istio_config_map(store: DirectoryStore) -> None:
    cm = """apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    outboundTrafficPolicy: {mode: REGISTRY_ONLY}
"""
    store.apply(docs(cm))
    assert str(store.snapshot().mesh.outbound_traffic_policy.mode) == "REGISTRY_ONLY"


APP = """apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://git.example/shop.git, path: mesh, targetRevision: HEAD}
  destination: {server: https://kubernetes.default.svc, namespace: shop}
"""
APP_KEY = ConfigKey(Kind.APPLICATION, "argocd", "shop")


def test_a_reader_skipping_kinds_never_loads_them(tmp_path: Path) -> None:
    writer = DirectoryStore(tmp_path / "live")
    writer.apply(docs(APP) + vs(80))
    reader = DirectoryStore(tmp_path / "live", skip_kinds={Kind.APPLICATION})
    assert set(reader.snapshot().objects) == {VS_KEY}  # the first, full read
    events: list[ChangeEvent] = []
    reader.subscribe(events.append)
    writer.apply(docs(APP.replace("HEAD", "main")))  # an Application alone: no event
    assert reader.refresh() is None and events == []
    writer.apply(docs(APP.replace("HEAD", "v2")) + vs(60))
    assert reader.refresh() == ChangeEvent(frozenset({VS_KEY}), 3, whole_writes=True)
    assert reader.get(APP_KEY) is None and writer.get(APP_KEY) is not None


def test_a_write_that_is_not_durable_reaches_readers_whole(tmp_path: Path) -> None:
    writer = DirectoryStore(tmp_path / "live")
    reader = DirectoryStore(tmp_path / "live")
    reader.snapshot()
    writer.apply(docs(APP), durable=False)
    assert reader.refresh() == ChangeEvent(frozenset({APP_KEY}), 1, whole_writes=True)
    assert reader.manifest(APP_KEY)["spec"]["project"] == "default"  # type: ignore[index]
    assert not list((tmp_path / "live").rglob("*.tmp"))


def test_events_name_the_handles_own_latest_writes(tmp_path: Path) -> None:
    ours, other = DirectoryStore(tmp_path / "s"), DirectoryStore(tmp_path / "s")
    other.apply(vs(90))  # the journal exists (its creation makes readers load everything)
    ours.snapshot()  # loaded, as a controller's handle is
    events: list[ChangeEvent] = []
    ours.subscribe(events.append)
    ours.apply(vs(80))
    assert events[-1].keys == {VS_KEY} and events[-1].written_here == {VS_KEY}
    other.apply(vs(60))
    ours.refresh()
    assert events[-1].keys == {VS_KEY} and events[-1].written_here == frozenset()
    ours.delete([VS_KEY])
    assert events[-1].keys == {VS_KEY} and events[-1].written_here == {VS_KEY}
    other.apply(vs(20))
    ours.refresh()
    assert events[-1].written_here == frozenset()
    # our write, then another writer's before our handle reads the journal: theirs wins
    ours.apply(vs(10))
    other.apply(vs(90))
    other.delete([VS_KEY])
    ours._own_deletes[VS_KEY] = other.journal.last_version() - 1  # an older delete of ours
    ours.refresh()
    assert events[-1].keys == {VS_KEY} and events[-1].written_here == frozenset()

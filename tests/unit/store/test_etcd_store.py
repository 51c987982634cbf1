"""The etcd store on a real etcd: kubectl's verbs, conflicts instead of lost updates, a wave
written in one transaction, and objects written behind the store's back (with etcdctl)
reported and skipped with the last good version kept."""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.store.base import ChangeEvent
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.writes import ApplyAction, ConflictError, InvalidObjectsError
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401

VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: default{extra}}}
spec:
  hosts: [{host}]
  http:
  - route:
    - destination: {{host: {host}}}
"""
REVIEWS = ConfigKey(Kind.VIRTUAL_SERVICE, "default", "reviews")


def vs(name: str = "reviews", host: str = "reviews", extra: str = "") -> Any:
    return read_text(VS.format(name=name, host=host, extra=extra), f"{name}.yaml").documents


def open_store(server: EtcdServer) -> EtcdStore:
    return EtcdStore(parse_etcd_url(server.url("/meshpilot")))


def etcdctl(server: EtcdServer, *args: str) -> str:
    cmd = ["etcdctl", "--endpoints", server.endpoint, *args]
    env = {"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def test_apply_get_and_delete(etcd: EtcdServer) -> None:
    store = open_store(etcd)
    [created] = store.apply(vs())
    assert created.message == "virtualservice.networking.istio.io/reviews created"
    assert store.apply(vs())[0].action is ApplyAction.UNCHANGED
    [changed] = store.apply(vs(host="ratings"))
    assert changed.action is ApplyAction.CONFIGURED
    assert int(changed.resource_version) > int(created.resource_version)

    reader = open_store(etcd)  # another handle sees the same object
    manifest = reader.manifest(REVIEWS)
    assert manifest is not None
    assert manifest["spec"]["hosts"] == ["ratings"]
    assert manifest["metadata"]["resourceVersion"] == changed.resource_version
    assert manifest["metadata"]["generation"] == 2
    # one key per object under the prefix, the resourceVersion being its mod revision
    listed = json.loads(etcdctl(etcd, "get", "--prefix", "/meshpilot/", "-w", "json"))
    [kv] = listed["kvs"]
    assert kv["mod_revision"] == int(changed.resource_version)

    assert [r.message for r in store.delete([REVIEWS])] == [
        'virtualservice.networking.istio.io "reviews" deleted'
    ]
    assert [r.message for r in store.delete([REVIEWS])] == [
        'virtualservices.networking.istio.io "reviews" not found'
    ]
    assert open_store(etcd).snapshot().objects == {}


def test_an_invalid_object_is_refused_with_file_and_line(etcd: EtcdServer) -> None:
    bad = read_text(VS.format(name="reviews", host="reviews", extra="") + "  tcp: 3\n", "b.yaml")
    with pytest.raises(InvalidObjectsError, match=r"b\.yaml:\d+: .*VirtualService"):
        open_store(etcd).apply(bad.documents)
    assert etcdctl(etcd, "get", "--prefix", "/meshpilot/", "--keys-only") == ""
    assert open_store(etcd).snapshot().objects == {}


def test_a_stale_resource_version_is_a_conflict(etcd: EtcdServer) -> None:
    first = open_store(etcd)
    [created] = first.apply(vs())
    open_store(etcd).apply(vs(host="ratings"))  # someone else's edit
    stale = vs(host="details", extra=f", resourceVersion: '{created.resource_version}'")
    with pytest.raises(ConflictError, match="the object has been modified"):
        first.apply(stale)
    assert open_store(etcd).manifest(REVIEWS)["spec"]["hosts"] == ["ratings"]  # type: ignore[index]


def test_concurrent_read_modify_writes_lose_nothing(etcd: EtcdServer) -> None:
    """Threads each read the object, add one to a counter and write it back naming the
    resourceVersion read: every write is applied or refused, and the counter is exactly
    the number applied (no update lost, none applied twice)."""
    open_store(etcd).apply(vs(extra=", labels: {n: '0'}"))
    applied, refused = [], []

    def writer() -> None:
        store = open_store(etcd)
        for _ in range(40):
            store.refresh()
            manifest = store.manifest(REVIEWS)
            assert manifest is not None
            manifest["metadata"]["labels"]["n"] = str(int(manifest["metadata"]["labels"]["n"]) + 1)
            doc = read_text(json.dumps(manifest), "edit.json").documents
            try:
                store.apply(doc)
                applied.append(1)
            except ConflictError:
                refused.append(1)

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = open_store(etcd).manifest(REVIEWS)
    assert final is not None
    assert len(applied) + len(refused) == 120 and refused  # they did collide
    assert final["metadata"]["labels"]["n"] == str(len(applied))


def test_a_wave_is_one_transaction(etcd: EtcdServer) -> None:
    watcher = open_store(etcd)
    watcher.load()
    events: list[ChangeEvent] = []
    watcher.subscribe(events.append)
    wave = vs("a") + vs("b") + vs("c")
    results = open_store(etcd).apply(wave)
    assert len({r.resource_version for r in results}) == 1  # one revision for all three
    watcher.refresh()
    [event] = events
    assert {k.name for k in event.keys} == {"a", "b", "c"}
    # one invalid object in a wave: nothing of it is written
    broken = vs("d") + read_text(VS.format(name="e", host="", extra=""), "e.yaml").documents
    with pytest.raises(InvalidObjectsError, match=r"e\.yaml"):
        open_store(etcd).apply(broken)
    assert sorted(k.name for k in open_store(etcd).snapshot().objects) == ["a", "b", "c"]


def test_an_object_written_behind_the_stores_back_is_reported_and_skipped(
    etcd: EtcdServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(etcd)
    store.apply(vs())
    reader = open_store(etcd)
    assert reader.get(REVIEWS) is not None
    key = "/meshpilot/VirtualService/default/reviews"
    broken = VS.format(name="reviews", host="reviews", extra="").replace(
        "hosts: [reviews]", "hosts: 7"
    )
    etcdctl(etcd, "put", key, broken)
    etcdctl(etcd, "put", "/meshpilot/VirtualService/default/other", "{not: [valid")
    reader.refresh()
    snapshot = reader.snapshot()
    kept = snapshot.objects[REVIEWS]
    assert kept.model.spec.hosts == ["reviews"]  # the last good version
    problems = [str(d) for d in snapshot.diagnostics]
    assert any(p.startswith(f"etcd:{key}:5: ") and "spec.hosts" in p for p in problems), problems
    assert any("etcd:/meshpilot/VirtualService/default/other" in p for p in problems), problems
    assert ConfigKey(Kind.VIRTUAL_SERVICE, "default", "other") not in snapshot.objects
    assert f"etcd:{key}:5" in caplog.text


POLICY = """apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-sleep, namespace: foo}
spec:
  selector: {matchLabels: {app: httpbin}}
  rules:
  - from:
    - source: {principals: [cluster.local/ns/foo/sa/sleep]}
"""
POLICY_KEY = ConfigKey(Kind.AUTHORIZATION_POLICY, "foo", "allow-sleep")


def test_an_invalid_policy_put_behind_its_back_fails_closed(etcd: EtcdServer) -> None:
    """A handle that read the policy keeps its last good version; one that never saw a
    good one serves the fail-closed stand-in (deny), never nothing."""
    writer = open_store(etcd)
    writer.apply(read_text(POLICY, "in.yaml").documents)
    good = writer.snapshot().objects[POLICY_KEY]
    etcdctl(etcd, "put", "/meshpilot/AuthorizationPolicy/foo/allow-sleep",
            POLICY.replace("principals:", "principalz:"))  # fmt: skip
    writer.refresh()
    assert writer.snapshot().objects[POLICY_KEY].model == good.model
    fresh = open_store(etcd).snapshot()
    stand_in = fresh.objects[POLICY_KEY]
    assert stand_in.fail_closed.endswith("unknown field 'principalz'")
    assert stand_in.model.spec.action == "DENY"
    [error] = [d for d in fresh.diagnostics if d.name == "allow-sleep"]
    assert error.message.endswith("is denied until it is fixed")

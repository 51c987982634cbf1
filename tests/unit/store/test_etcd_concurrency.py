"""Concurrent writers on the etcd store: 4 processes x 500 read-modify-write edits of one
object, each naming the resourceVersion it read. Every edit is applied or refused with a
conflict; none is lost and none applied twice: the counter the edits increment, etcd's own
count of the key's writes and the distinct revisions the writers were told all agree.
And a wave larger than etcd's transaction limit is one clear error, never half a wave."""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import read_text
from meshpilot.store.etcd import EtcdError, parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.writes import ApplyAction, ConflictError
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401

CM = """\
apiVersion: v1
kind: ConfigMap
metadata: {{name: {name}, namespace: default}}
data: {{n: "{n}"}}
"""
KEY = ConfigKey(Kind.CONFIG_MAP, "default", "counter")
WRITERS, EDITS = 4, 500


def _edits(url: str) -> tuple[list[int], int]:
    """One writer process: EDITS read-modify-writes; (revisions applied at, refusals)."""
    store = EtcdStore(parse_etcd_url(url))
    applied, refused = [], 0
    for _ in range(EDITS):
        [kv] = store.client.get_many([b"/meshpilot/ConfigMap/default/counter"]).kvs
        manifest = json.loads(kv.value)
        manifest["metadata"]["resourceVersion"] = str(kv.mod_revision)
        manifest["data"]["n"] = str(int(manifest["data"]["n"]) + 1)
        try:
            [result] = store.apply(read_text(json.dumps(manifest), "edit.json").documents)
        except ConflictError:
            refused += 1
            continue
        assert result.action is ApplyAction.CONFIGURED
        applied.append(int(result.resource_version))
    return applied, refused


def test_four_writers_lose_nothing_and_apply_nothing_twice(etcd: EtcdServer) -> None:
    url = etcd.url()
    EtcdStore(parse_etcd_url(url)).apply(read_text(CM.format(name="counter", n=0), "c").documents)
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(WRITERS, mp_context=spawn) as pool:
        outcomes = list(pool.map(_edits, [url] * WRITERS))
    applied = [revision for revisions, _ in outcomes for revision in revisions]
    refused = sum(count for _, count in outcomes)
    assert len(applied) + refused == WRITERS * EDITS
    assert refused > 0, "the writers never collided"
    assert len(set(applied)) == len(applied)  # each applied edit is its own revision
    store = EtcdStore(parse_etcd_url(url))
    final = store.manifest(KEY)
    assert final is not None and final["data"]["n"] == str(len(applied))
    [kv] = store.client.get_many([b"/meshpilot/ConfigMap/default/counter"]).kvs
    assert kv.mod_revision == max(applied)
    listing = store.client.list_prefix(b"/meshpilot/")
    assert [kv.key for kv in listing.kvs] == [b"/meshpilot/ConfigMap/default/counter"]


def test_a_wave_over_etcds_transaction_limit_is_refused_whole(etcd: EtcdServer) -> None:
    store = EtcdStore(parse_etcd_url(etcd.url()))
    first = [d for i in range(100) for d in read_text(CM.format(name=f"a{i}", n=i), "a").documents]
    more = [d for i in range(100) for d in read_text(CM.format(name=f"b{i}", n=i), "b").documents]
    store.apply(first)
    edited = [
        d for i in range(100) for d in read_text(CM.format(name=f"a{i}", n=-i), "a").documents
    ]
    with pytest.raises(EtcdError, match="raise etcd's --max-txn-ops, default 128"):
        store.apply(edited + more)  # 100 changes are fine, 200 are over the limit
    listing = store.client.list_prefix(b"/meshpilot/")
    assert [json.loads(kv.value)["data"]["n"] for kv in listing.kvs[:2]] == ["0", "1"]
    assert len(listing.kvs) == 100  # nothing of the wave was written
    # reads of more keys than a transaction holds are still one consistent read
    results = store.apply(first, dry_run=True)
    assert {r.action for r in results} == {ApplyAction.UNCHANGED} and len(results) == 100
    store.apply(more)
    assert {r.action for r in store.apply(first + more)} == {ApplyAction.UNCHANGED}


def test_a_wave_within_a_raised_limit_is_one_revision(tmp_path: Path) -> None:
    server = EtcdServer(tmp_path / "big", extra_args=("--max-txn-ops", "2000"))
    server.start()
    try:
        store = EtcdStore(parse_etcd_url(server.url()))
        wave = [
            d for i in range(1000) for d in read_text(CM.format(name=f"c{i}", n=i), "c").documents
        ]
        results = store.apply(wave)
        assert len({r.resource_version for r in results}) == 1 and len(results) == 1000
    finally:
        server.stop()


def test_a_wave_over_etcds_request_size_names_the_flag(tmp_path: Path) -> None:
    server = EtcdServer(tmp_path / "small", extra_args=("--max-request-bytes", "65536"))
    server.start()
    try:
        store = EtcdStore(parse_etcd_url(server.url()))
        big = "x" * 1000
        docs = [
            d for i in range(100) for d in read_text(CM.format(name=f"d{i}", n=big), "d").documents
        ]
        with pytest.raises(EtcdError, match="raise etcd's --max-request-bytes"):
            store.apply(docs)
        assert store.client.list_prefix(b"/meshpilot/").kvs == ()
    finally:
        server.stop()

"""Leader election on a real etcd's leases, and the fence on the leader's writes: one
candidate leads at a time, another takes over when the leader resigns or its lease
expires, and a leader that lost its lease has its writes refused, not applied."""

from __future__ import annotations

import threading
import time

import pytest

from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.errors import NotLeaderError
from meshpilot.store.etcd.lease import Election, leader_key
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401
from tests.unit.store.test_etcd_store import REVIEWS, vs


def _store(etcd: EtcdServer) -> EtcdStore:
    return EtcdStore(parse_etcd_url(etcd.url("/meshpilot")))


def _election(store: EtcdStore, identity: str, ttl: int = 2) -> Election:
    return Election(store.client, leader_key(store.prefix, "gitops"), identity, ttl)


def test_one_leads_the_other_waits_and_takes_over_when_it_resigns(etcd: EtcdServer) -> None:
    a, b = _election(_store(etcd), "a"), _election(_store(etcd), "b")
    won = a.try_acquire()
    assert won is not None and won.holder == "a"
    assert b.try_acquire() is None
    leader = b.leader()
    assert leader is not None and (leader.holder, leader.term) == ("a", won.term)
    a.resign()
    taken = b.campaign(threading.Event(), poll=0.05)
    assert taken is not None and taken.holder == "b" and taken.term > won.term
    # the leader key lives outside the store's prefix: no object, no diagnostic
    assert _store(etcd).snapshot().diagnostics == ()


def test_an_expired_lease_hands_over_and_fences_the_old_leaders_writes(
    etcd: EtcdServer,
) -> None:
    old_store, new_store = _store(etcd), _store(etcd)
    old, new = _election(old_store, "old", ttl=1), _election(new_store, "new", ttl=1)
    term = old.try_acquire()
    assert term is not None
    old_store.fence = (old.key, term.term)
    old_store.apply(vs(host="v1"))  # leading: written
    # The old leader stops renewing (paused, cut off): etcd expires its lease.
    started = time.monotonic()
    taken = new.campaign(threading.Event(), poll=0.1)
    assert taken is not None and taken.holder == "new"
    assert time.monotonic() - started < 5
    with pytest.raises(NotLeaderError, match=r"no longer leads .*gitops was lost"):
        old_store.apply(vs(host="v2"))
    with pytest.raises(NotLeaderError):
        old_store.delete([REVIEWS])
    new_store.fence = (new.key, taken.term)
    new_store.apply(vs(host="v3"))
    stored = _store(etcd).manifest(REVIEWS)
    assert stored is not None and stored["spec"]["hosts"] == ["v3"]


def test_a_leader_that_cannot_renew_is_told_before_the_lease_could_expire(
    etcd: EtcdServer,
) -> None:
    election = _election(_store(etcd), "a", ttl=3)
    assert election.try_acquire() is not None
    reasons: list[str] = []
    lost_at: list[float] = []
    holding = threading.Thread(
        target=election.hold,
        args=(threading.Event(), lambda r: (reasons.append(r), lost_at.append(time.monotonic()))),
    )
    holding.start()
    time.sleep(1.5)
    assert not reasons  # renewed meanwhile
    etcd.stop()
    stopped = time.monotonic()
    holding.join(15)
    etcd.start()
    assert reasons and "not renewed" in reasons[0]
    assert lost_at[0] - stopped < 3  # told within the TTL

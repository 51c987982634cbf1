"""Certificate rotation against a real CA: renewal at the rotation point, a new key each time,
the last certificate kept while the CA is down, clear logs without secrets."""

from __future__ import annotations

import asyncio
import datetime
import logging
from pathlib import Path

import pytest

from meshpilot.agent.ca_client import CaClient, CaSettings
from meshpilot.agent.certs.rotation import CertificateRotator, RotationPolicy
from meshpilot.agent.certs.store import SecretStore
from meshpilot.errors import MeshpilotError
from tests.unit.agent.ca_server import LocalCa

IDENTITY = "spiffe://cluster.local/ns/default/sa/sleep"
TOKEN = "secret-bootstrap-token-123"


async def wait_until(check: object, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def rotator(
    ca: LocalCa, tmp: Path, store: SecretStore, policy: RotationPolicy
) -> CertificateRotator:
    (tmp / "token").write_text(TOKEN)
    settings = CaSettings(
        address=ca.address, root_cert=ca.write_root(tmp / "root.pem"), token_file=tmp / "token"
    )
    return CertificateRotator(CaClient(settings), IDENTITY, store, policy, ca_name=ca.address)


def test_renews_at_the_rotation_point_with_a_new_key(tmp_path: Path) -> None:
    async def scenario() -> None:
        ca = LocalCa.create()
        ca.tokens[TOKEN] = IDENTITY
        ca.backdate = datetime.timedelta(minutes=5)  # clock-skew backdating must not matter
        await ca.start()
        store = SecretStore()
        rot = rotator(ca, tmp_path, store, RotationPolicy(ttl_s=2, rotate_at=0.5))
        task = asyncio.create_task(rot.run())
        try:
            await wait_until(lambda: store.cert is not None)
            first = store.cert
            assert first is not None and rot.rotate_time is not None
            # Half of the lifetime counted from when it was asked (not from the 5-minute
            # backdated notBefore); X.509 drops the sub-second part of notAfter, so the
            # lifetime is between 1 and 2 s.
            now = datetime.datetime.now(datetime.UTC)
            second_half = (first.not_after - rot.rotate_time).total_seconds()
            start = rot.rotate_time - datetime.timedelta(seconds=second_half)
            assert 0.5 <= second_half <= 1.0
            assert now - datetime.timedelta(seconds=2) < start <= now
            await wait_until(lambda: store.generation == 2, timeout=5)
            second = store.cert
            assert second is not None and second.serial != first.serial
            assert second.key.pem() != first.key.pem()  # never the same key twice
            assert [s.ttl for s in ca.seen] == [2, 2]
        finally:
            task.cancel()
            await ca.stop()

    asyncio.run(scenario())


def test_keeps_the_last_certificate_while_the_ca_is_down(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        ca = LocalCa.create()
        ca.tokens[TOKEN] = IDENTITY
        await ca.start()
        store = SecretStore()
        policy = RotationPolicy(ttl_s=2, rotate_at=0.25, retry_initial_s=0.1, retry_max_s=0.2)
        rot = rotator(ca, tmp_path, store, policy)
        task = asyncio.create_task(rot.run())
        try:
            await wait_until(lambda: store.cert is not None)
            first = store.cert
            ca.available = False
            await wait_until(lambda: rot.failures >= 3)
            assert store.cert is first and store.generation == 1  # still served
            ca.available = True
            await wait_until(lambda: store.generation == 2)
            assert rot.failures == 0
        finally:
            task.cancel()
            await ca.stop()

    with caplog.at_level(logging.INFO, logger="meshpilot.agent"):
        asyncio.run(scenario())
    text = caplog.text
    assert "cannot renew workload certificate" in text and "still serving it" in text
    assert "UNAVAILABLE" in text
    assert TOKEN not in text and "PRIVATE KEY" not in text


def test_an_expired_certificate_is_reported_as_such(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        ca = LocalCa.create()
        ca.tokens[TOKEN] = IDENTITY
        await ca.start()
        store = SecretStore()
        policy = RotationPolicy(ttl_s=1, rotate_at=0.9, retry_initial_s=0.3, retry_max_s=0.3)
        rot = rotator(ca, tmp_path, store, policy)
        try:
            await rot.refresh()
            ca.available = False
            task = asyncio.create_task(rot.run())
            await asyncio.sleep(0)
            await wait_until(lambda: "EXPIRED" in caplog.text, timeout=5)
            task.cancel()
        finally:
            await ca.stop()

    with caplog.at_level(logging.INFO, logger="meshpilot.agent"):
        asyncio.run(scenario())


def test_without_a_certificate_it_is_fetched_within_a_second_of_the_ca_coming_back(
    tmp_path: Path,
) -> None:
    """A proxy with no certificate cannot serve: after a long CA outage its retries stay at
    most 1 s apart (the default policy), not 2, 4, 8... s."""

    async def scenario() -> None:
        ca = LocalCa.create()
        ca.tokens[TOKEN] = IDENTITY
        ca.available = False
        await ca.start()
        store = SecretStore()
        rot = rotator(ca, tmp_path, store, RotationPolicy())
        task = asyncio.create_task(rot.run())
        try:
            await wait_until(lambda: rot.failures >= 6, timeout=6)
            ca.available = True
            back = asyncio.get_running_loop().time()
            await wait_until(lambda: store.cert is not None, timeout=5)
            assert asyncio.get_running_loop().time() - back < 1.3
        finally:
            task.cancel()
            await ca.stop()

    asyncio.run(scenario())


def test_policy_bounds() -> None:
    with pytest.raises(MeshpilotError, match="between 0 and 1"):
        RotationPolicy(rotate_at=1.0)
    with pytest.raises(MeshpilotError, match="at least 1s"):
        RotationPolicy(ttl_s=0)

"""The agent's CA client against a real CA over real TLS (tests/unit/agent/ca_server.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography.hazmat.primitives import serialization

from meshpilot.agent.ca_client import CaClient, CaError, CaSettings
from meshpilot.agent.certs.store import SecretStore
from meshpilot.agent.certs.workload import accept_chain, build_csr, new_key
from tests.unit.agent.ca_server import LocalCa, make_root

IDENTITY = "spiffe://cluster.local/ns/bookinfo/sa/reviews"
TOKEN = "tok-reviews-7f3a9c"  # what the runtime issued for this pod
T = TypeVar("T")


def with_ca(scenario: Callable[[LocalCa], Awaitable[T]], client_auth: bool = False) -> T:
    async def run() -> T:
        ca = LocalCa.create()
        ca.client_auth = client_auth
        ca.tokens[TOKEN] = IDENTITY
        await ca.start()
        try:
            return await scenario(ca)
        finally:
            await ca.stop()

    return asyncio.run(run())


def client(
    ca: LocalCa, tmp: Path, token: str | None = TOKEN, root: bytes | None = None
) -> CaClient:
    (tmp / "root-cert.pem").write_bytes(root or ca.root_pem)
    token_file = None
    if token is not None:
        token_file = tmp / "token"
        token_file.write_text(token + "\n")
    return CaClient(
        CaSettings(address=ca.address, root_cert=tmp / "root-cert.pem", token_file=token_file)
    )


def test_signs_with_a_bearer_token_over_verified_tls(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        key = new_key()
        chain = await client(ca, tmp_path).sign(build_csr(key, IDENTITY), 600)
        cert = accept_chain(chain, key, IDENTITY, ca.root_pem, "root")
        assert 595 <= cert.lifetime_s <= 600
        assert ca.seen[-1].token == TOKEN and ca.seen[-1].ttl == 600

    with_ca(scenario)


def test_token_is_reread_at_every_call(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        ca.tokens["rotated-token"] = IDENTITY
        ca_client = client(ca, tmp_path)
        await ca_client.sign(build_csr(new_key(), IDENTITY), 600)
        (tmp_path / "token").write_text("rotated-token")
        await ca_client.sign(build_csr(new_key(), IDENTITY), 600)
        assert [s.token for s in ca.seen] == [TOKEN, "rotated-token"]

    with_ca(scenario)


def test_another_identity_is_refused_and_the_error_hides_the_token(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        other = "spiffe://cluster.local/ns/bookinfo/sa/ratings"
        with pytest.raises(CaError, match="PERMISSION_DENIED") as err:
            await client(ca, tmp_path).sign(build_csr(new_key(), other), 600)
        assert TOKEN not in str(err.value)
        assert ca.address in str(err.value)

    with_ca(scenario)


def test_renewal_presents_the_current_certificate(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        first_key = new_key()
        leaf = ca.issue(first_key.key.public_key(), identity=IDENTITY, ttl=600)
        chain = [leaf.public_bytes(serialization.Encoding.PEM).decode(), ca.root_pem.decode()]
        current = accept_chain(chain, first_key, IDENTITY, ca.root_pem, "root")
        # No token (expired, say): the certificate alone proves the identity.
        renew = client(ca, tmp_path, token=None)
        key = new_key()
        chain = await renew.sign(build_csr(key, IDENTITY), 600, current)
        assert accept_chain(chain, key, IDENTITY, ca.root_pem, "root").serial != current.serial
        assert ca.seen[-1].token is None and ca.seen[-1].peer_identity == IDENTITY

    with_ca(scenario, client_auth=True)


def test_a_ca_whose_certificate_the_root_does_not_sign_is_not_trusted(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        _, stranger = make_root("elsewhere")
        wrong = stranger.public_bytes(serialization.Encoding.PEM)
        with pytest.raises(CaError, match="UNAVAILABLE"):
            await client(ca, tmp_path, root=wrong).sign(build_csr(new_key(), IDENTITY), 600)
        assert ca.seen == []  # the request never reached the CA

    with_ca(scenario)


def test_missing_files_are_named(tmp_path: Path) -> None:
    async def scenario(ca: LocalCa) -> None:
        settings = CaSettings(
            address=ca.address, root_cert=tmp_path / "nope.pem", token_file=tmp_path / "tok"
        )
        with pytest.raises(CaError, match=f"cannot read token file {tmp_path}/tok"):
            await CaClient(settings).sign(build_csr(new_key(), IDENTITY), 600)
        (tmp_path / "tok").write_text("x")
        with pytest.raises(CaError, match=f"cannot read root certificate {tmp_path}/nope.pem"):
            await CaClient(settings).sign(build_csr(new_key(), IDENTITY), 600)
        no_token = CaSettings(address=ca.address, root_cert=tmp_path / "nope.pem")
        with pytest.raises(CaError, match="no token file"):
            await CaClient(no_token).sign(build_csr(new_key(), IDENTITY), 600)
        assert SecretStore().cert is None

    with_ca(scenario)

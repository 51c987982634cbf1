"""SPIFFE ids and bootstrap tokens: parse/format, issue/verify, and what a bad one says."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.security.identity import IdentityError, SpiffeId
from meshpilot.security.tokens import TokenAuthority, TokenError, issue_token


def test_spiffe_id_round_trip() -> None:
    ident = SpiffeId.parse("spiffe://cluster.local/ns/default/sa/bookinfo-reviews")
    assert ident == SpiffeId("cluster.local", "default", "bookinfo-reviews")
    assert str(ident) == "spiffe://cluster.local/ns/default/sa/bookinfo-reviews"
    assert ident.principal == "cluster.local/ns/default/sa/bookinfo-reviews"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("https://cluster.local/ns/a/sa/b", "must start with spiffe://"),
        ("spiffe://cluster.local/ns/a", "expected spiffe://<trust-domain>/ns/"),
        ("spiffe://cluster.local/ns/a/sa/b/extra", "expected spiffe://<trust-domain>/ns/"),
        ("spiffe://cluster.local/ns/A_B/sa/b", "namespace 'A_B' is not a DNS-1123 label"),
        ("spiffe://cluster.local/ns/a/sa/-b", "service account '-b' is not a DNS-1123"),
        ("spiffe://Cluster.Local/ns/a/sa/b", "trust domain 'Cluster.Local'"),
    ],
)
def test_bad_spiffe_ids_say_which_part(uri: str, message: str) -> None:
    with pytest.raises(IdentityError, match=message.replace("(", r"\(")):
        SpiffeId.parse(uri)


def test_token_proves_its_pod_identity(tmp_path: Path) -> None:
    token = issue_token(tmp_path / "ca", "default", "bookinfo-reviews", "reviews-v1-abc")
    key = tmp_path / "ca" / "token-signing-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    claims = TokenAuthority.open(tmp_path / "ca").verify(token)
    assert (claims.namespace, claims.service_account, claims.pod) == (
        "default",
        "bookinfo-reviews",
        "reviews-v1-abc",
    )
    assert claims.identity("cluster.local").uri.endswith("/ns/default/sa/bookinfo-reviews")
    assert "key=[redacted]" in repr(TokenAuthority.open(tmp_path / "ca"))


def test_bad_tokens_are_refused_without_echoing_them(tmp_path: Path) -> None:
    tokens = TokenAuthority.open(tmp_path / "ca")
    now = dt.datetime.now(dt.UTC)
    good = tokens.issue("default", "reviews", "reviews-1", dt.timedelta(minutes=5), now=now)
    other = TokenAuthority.open(tmp_path / "other").issue("default", "reviews", "reviews-1")
    _, body, sig = good.split(".")
    cases = {
        "not a JWT": "abc",
        "signature is invalid": other,
        "expired at": good,
        "alg is not HS256": "eyJhbGciOiJub25lIn0." + body + ".",
        "bad base64 or JSON": "%%%." + body + "." + sig,
    }
    for message, token in cases.items():
        when = now + dt.timedelta(minutes=10) if message == "expired at" else now
        with pytest.raises(TokenError, match=message) as caught:
            tokens.verify(token, now=when)
        assert token not in str(caught.value) and sig not in str(caught.value)


def test_a_differently_encoded_hs256_header_is_still_verified(tmp_path: Path) -> None:
    """verify() skips parsing our own header; any other HS256 header is parsed and checked,
    and the signature still covers it."""
    tokens = TokenAuthority.open(tmp_path / "ca")
    _, body, _ = tokens.issue("default", "reviews", "reviews-1").split(".")
    header = base64.urlsafe_b64encode(b'{"typ":"JWT","alg":"HS256"}').rstrip(b"=").decode()
    mac = hmac.new(tokens._key, f"{header}.{body}".encode(), hashlib.sha256).digest()
    signature = base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    assert tokens.verify(f"{header}.{body}.{signature}").pod == "reviews-1"
    with pytest.raises(TokenError, match="signature is invalid"):
        tokens.verify(f"{header}.{body}.{signature[:-4]}AAAA")


def test_token_cli_prints_a_token_the_ca_accepts(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["token", "issue", "-n", "default", "--service-account", "reviews", "--pod", "r-1"]
    result = runner.invoke(cli, [*args, "--ca-dir", str(tmp_path / "ca"), "--ttl", "1h"])
    assert result.exit_code == 0, result.output
    claims = TokenAuthority.open(tmp_path / "ca").verify(result.output.strip())
    assert claims.expires - dt.datetime.now(dt.UTC) <= dt.timedelta(hours=1)
    bad = runner.invoke(cli, ["token", "issue", "-n", "Bad_NS", "--service-account", "x",
                              "--pod", "p", "--ca-dir", str(tmp_path / "ca")])  # fmt: skip
    assert bad.exit_code == 2 and "namespace 'Bad_NS' is not a DNS-1123 label" in bad.output

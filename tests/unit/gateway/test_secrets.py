"""SDS secrets for credentialName: which Secret, which keys, and what is refused."""

from __future__ import annotations

import base64
from dataclasses import replace

from meshpilot.model.proxy import ProxyType, VerifiedIdentity
from meshpilot.xds.generate.secrets import generate_secrets
from tests.conftest import proxy_for, push_from_text
from tests.unit.gateway.meshes import GATEWAY_POD, INGRESS, gateway, gateway_config, join, listener


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, data: dict[str, str], namespace: str = "istio-system", **extra: str) -> str:
    body = "\n".join(f"  {k}: {b64(v)}" for k, v in data.items())
    more = "".join(f"{k}: {v}\n" for k, v in extra.items())
    return f"""
apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: {namespace}}}
{more}data:
{body}
"""


def secrets_for(names: list[str] | None, *docs: str, invalid: int = 0) -> dict[str, object]:
    loaded, push = push_from_text(join(INGRESS, *docs))
    assert len(loaded.errors) == invalid, [str(d) for d in loaded.errors]
    proxy = proxy_for(push, GATEWAY_POD, ProxyType.ROUTER)
    return {s.name: s for s in generate_secrets(push, proxy, names)}


TLS_SECRET = secret(
    "shop-cert",
    {"tls.crt": "CERT", "tls.key": "KEY", "ca.crt": "CA", "tls.ocsp-staple": "OCSP"},
    type="kubernetes.io/tls",
)


def test_tls_secret_gives_certificate_and_ca() -> None:
    out = secrets_for(["kubernetes://shop-cert", "kubernetes://shop-cert-cacert"], TLS_SECRET)
    cert = out["kubernetes://shop-cert"].tls_certificate  # type: ignore[attr-defined]
    assert cert.certificate_chain.inline_bytes == b"CERT"
    assert cert.private_key.inline_bytes == b"KEY"
    assert cert.ocsp_staple.inline_bytes == b"OCSP"
    ca = out["kubernetes://shop-cert-cacert"].validation_context  # type: ignore[attr-defined]
    assert ca.trusted_ca.inline_bytes == b"CA"


def test_generic_keys_win_over_tls_keys() -> None:
    generic = secret(
        "mixed",
        {"cert": "G-CERT", "key": "G-KEY", "cacert": "G-CA", "crl": "G-CRL", "tls.crt": "T"},
    )
    out = secrets_for(["kubernetes://mixed", "kubernetes://mixed-cacert"], generic)
    cert = out["kubernetes://mixed"].tls_certificate  # type: ignore[attr-defined]
    assert cert.certificate_chain.inline_bytes == b"G-CERT"
    ca = out["kubernetes://mixed-cacert"].validation_context  # type: ignore[attr-defined]
    assert (ca.trusted_ca.inline_bytes, ca.crl.inline_bytes) == (b"G-CA", b"G-CRL")


def test_separate_cacert_secret_is_preferred() -> None:
    own_ca = secret("shop-cert-cacert", {"cacert": "OWN-CA"})
    out = secrets_for(["kubernetes://shop-cert-cacert"], TLS_SECRET, own_ca)
    ca = out["kubernetes://shop-cert-cacert"].validation_context  # type: ignore[attr-defined]
    assert ca.trusted_ca.inline_bytes == b"OWN-CA"


def test_cacert_secret_without_ca_keys_gives_nothing() -> None:
    broken = secret("shop-cert-cacert", {"something": "else"})
    assert secrets_for(["kubernetes://shop-cert-cacert"], TLS_SECRET, broken) == {}


def test_string_data_counts() -> None:
    doc = """
apiVersion: v1
kind: Secret
metadata: {name: plain, namespace: istio-system}
stringData: {cert: PLAIN-CERT, key: PLAIN-KEY}
"""
    out = secrets_for(["kubernetes://plain"], doc)
    cert = out["kubernetes://plain"].tls_certificate  # type: ignore[attr-defined]
    assert cert.certificate_chain.inline_bytes == b"PLAIN-CERT"


def test_unusable_secrets_give_nothing() -> None:
    no_key = secret("no-key", {"tls.crt": "CERT"})
    bad = """
apiVersion: v1
kind: Secret
metadata: {name: bad-base64, namespace: istio-system}
data: {tls.crt: "!!!", tls.key: "!!!"}
"""
    names = ["kubernetes://missing", "kubernetes://no-key", "kubernetes://bad-base64"]
    # The loader refuses the malformed Secret (two bad keys), so it is as good as missing.
    assert secrets_for(names, no_key, bad, invalid=2) == {}


def test_secret_is_read_from_the_proxy_namespace_only() -> None:
    elsewhere = secret("shop-cert", {"tls.crt": "C", "tls.key": "K"}, namespace="shop")
    names = ["kubernetes://shop-cert", "kubernetes://shop/shop-cert"]
    assert secrets_for(names, elsewhere) == {}
    own = secrets_for(["kubernetes://istio-system/shop-cert"], TLS_SECRET)
    assert list(own) == ["kubernetes://istio-system/shop-cert"]


def test_only_a_proxy_proven_in_the_secrets_namespace_gets_it() -> None:
    """Unverified (plaintext, or nothing proven): nothing at all; proven as another
    namespace's workload: not even the Secret of the namespace its node id claims."""
    _, push = push_from_text(join(INGRESS, TLS_SECRET))
    proven = proxy_for(push, GATEWAY_POD, ProxyType.ROUTER)
    names = ["kubernetes://shop-cert", "kubernetes://shop-cert-cacert"]
    assert len(generate_secrets(push, proven, names)) == 2
    assert generate_secrets(push, replace(proven, verified=None), names) == []
    other = VerifiedIdentity("shop", proven.service_account)
    assert generate_secrets(push, replace(proven, verified=other), names) == []


def test_agent_secrets_and_wildcard_requests_are_not_answered() -> None:
    names = ["default", "ROOTCA", "file-cert:/a~/b", "file-root:/c"]
    assert secrets_for(names, TLS_SECRET) == {}
    assert secrets_for(None, TLS_SECRET) == {}


def test_missing_secret_keeps_the_chain() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["a.example.com"]
    tls: {mode: SIMPLE, credentialName: not-there}
""",
        )
    )
    assert config.secrets == []
    assert len(listener(config, "0.0.0.0_8443").filter_chains) == 1

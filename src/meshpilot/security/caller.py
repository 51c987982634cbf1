"""Who is calling the CA: identities proven by a bootstrap token or a client certificate.

    authorization: Bearer <token>     gRPC metadata, as istio-agent sends its JWT
    TLS client certificate            verified against the mesh root by the TLS layer; its
                                      SPIFFE URI SAN is the identity (renewal)

Messages describe the credential (pod, namespace, expiry), never its value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509

from meshpilot.security.identity import IdentityError, SpiffeId
from meshpilot.security.tokens import TokenAuthority, TokenError

__all__ = ["AuthenticationError", "Caller", "authenticate"]

_BEARER = "bearer "
# gRPC's auth context key for the verified peer certificate (PEM).
_PEER_CERT = "x509_pem_cert"


class AuthenticationError(Exception):
    """The call carries no usable credential; the message says why (no secret in it)."""


@dataclass(frozen=True, slots=True)
class Caller:
    identities: tuple[SpiffeId, ...]
    credential: str  # how it was proven, for logs: "token of pod x.ns", "client certificate"


def authenticate(
    metadata: Iterable[tuple[str, str | bytes]],
    auth_context: Callable[[], Mapping[str, Sequence[bytes]]],
    tokens: TokenAuthority,
    trust_domain: str,
) -> Caller:
    """The identities this call proves: from its token, or else its client certificate."""
    token = _bearer_token(metadata)
    if token is not None:
        try:
            claims = tokens.verify(token)
        except TokenError as exc:
            raise AuthenticationError(f"bearer token rejected: {exc}") from None
        pod = f"{claims.pod}.{claims.namespace}" if claims.pod else claims.namespace
        return Caller((claims.identity(trust_domain),), f"token of pod {pod}")
    certs = auth_context().get(_PEER_CERT) or []
    if certs:
        return Caller(_certificate_identities(certs[0], trust_domain), "client certificate")
    raise AuthenticationError(
        "no credential: send 'authorization: Bearer <token>' metadata "
        "(meshpilot token issue), or present the current certificate as TLS client certificate"
    )


def _bearer_token(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    for key, value in metadata:
        if key.lower() != "authorization":
            continue
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if not text.lower().startswith(_BEARER):
            raise AuthenticationError("authorization metadata is not 'Bearer <token>'")
        return text[len(_BEARER) :].strip()
    return None


def _certificate_identities(pem: bytes, trust_domain: str) -> tuple[SpiffeId, ...]:
    try:
        cert = x509.load_pem_x509_certificate(pem)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        raise AuthenticationError("the client certificate has no SPIFFE identity") from None
    found: list[SpiffeId] = []
    for uri in names.get_values_for_type(x509.UniformResourceIdentifier):
        try:
            identity = SpiffeId.parse(uri)
        except IdentityError:
            continue
        if identity.trust_domain == trust_domain:
            found.append(identity)
    if not found:
        raise AuthenticationError(
            f"the client certificate has no SPIFFE identity in trust domain {trust_domain}"
        )
    return tuple(found)

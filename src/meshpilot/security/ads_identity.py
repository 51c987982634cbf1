"""Who an ADS stream on the TLS ports is: the identities its credential proves.

    authorization: Bearer <token>     gRPC metadata, as for the CA (security/tokens.py)
    TLS client certificate            grpc.aio: its auth context (asked for on 15013 only);
                                      through the front Envoy (15012): the certificate Envoy
                                      verified against the mesh roots, x-forwarded-client-cert

A token that does not verify does not hide a valid certificate. A stream that proves nothing
is served, but is unverified: it gets no `kubernetes://` secrets (xds/generate/secrets.py).
The plaintext port has no authenticator at all. Logs describe a credential, never its value.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import unquote_to_bytes

import grpc

from meshpilot.model.proxy import VerifiedIdentity
from meshpilot.security.caller import AuthenticationError, authenticate
from meshpilot.security.tokens import TokenAuthority

__all__ = ["AdsAuthenticator"]

log = logging.getLogger(__name__)

_XFCC = "x-forwarded-client-cert"
_XFCC_CERT = re.compile(r'(?:^|;)Cert="([^"]*)"')
_PEER_CERT = "x509_pem_cert"  # grpc's auth context key for the verified client certificate


class AdsAuthenticator:
    """Called once per stream (xds/grpc_service.py `ads_handler`), before its first answer."""

    def __init__(self, tokens: TokenAuthority, trust_domain: str) -> None:
        self._tokens = tokens
        self._trust_domain = trust_domain

    def __repr__(self) -> str:
        return f"AdsAuthenticator(trust_domain={self._trust_domain!r})"

    def __call__(
        self, context: grpc.aio.ServicerContext, forwarded: bool
    ) -> tuple[VerifiedIdentity, ...]:
        metadata = tuple(context.invocation_metadata() or ())
        if forwarded:
            cert = _forwarded_certificate(metadata)
            auth_context = lambda: cert  # noqa: E731 (the front Envoy's word, not the socket's)
        else:
            auth_context = context.auth_context
        try:
            caller = authenticate(metadata, auth_context, self._tokens, self._trust_domain)
        except AuthenticationError as exc:
            if not _has_token(metadata):
                log.debug("ADS: stream proves no identity: %s", exc)
                return ()
            try:  # a bad token: the certificate may still prove who is calling
                caller = authenticate((), auth_context, self._tokens, self._trust_domain)
            except AuthenticationError:
                log.warning("ADS: stream proves no identity: %s", exc)
                return ()
        return tuple(VerifiedIdentity(i.namespace, i.service_account) for i in caller.identities)


def _has_token(metadata: Iterable[tuple[str, str | bytes]]) -> bool:
    return any(key.lower() == "authorization" for key, _ in metadata)


def _forwarded_certificate(
    metadata: Iterable[tuple[str, str | bytes]],
) -> Mapping[str, Sequence[bytes]]:
    """The certificate the front Envoy verified, from its x-forwarded-client-cert (it drops
    whatever a caller sends under that name, and only it reaches the streams' socket)."""
    for key, value in metadata:
        if key.lower() != _XFCC:
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        found = _XFCC_CERT.search(text)
        return {_PEER_CERT: [unquote_to_bytes(found.group(1))]} if found else {}
    return {}

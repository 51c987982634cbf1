"""`istio.v1.auth.IstioCertificateService/CreateCertificate`: the CA's gRPC endpoint.

    request  {csr: PEM, validity_duration: seconds, metadata}   + authorization: Bearer <token>
    response {cert_chain: [leaf PEM, intermediates..., root PEM]}

Status codes: UNAUTHENTICATED without a valid credential, PERMISSION_DENIED when the CSR asks
for an identity the caller did not prove, INVALID_ARGUMENT for an unusable CSR. Refusals
are logged with the peer and the identities involved, never with the token. Counters carry
Istio's citadel_server_* names.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import grpc
from cryptography import x509

from meshpilot.security.ca import MAX_TTL, CertificateAuthority, CsrError, CsrIdentityError, Issued
from meshpilot.security.ca_api import (
    SERVICE_NAME,
    IstioCertificateRequest,
    IstioCertificateResponse,
)
from meshpilot.security.caller import AuthenticationError, Caller, authenticate
from meshpilot.security.tokens import TokenAuthority
from meshpilot.xds.metrics import Counter

__all__ = ["CaMetrics", "CaRefusal", "CsrService"]

log = logging.getLogger(__name__)

_MAX_SECONDS = int(MAX_TTL.total_seconds())


class CaMetrics:
    """Istio's CA server counters (security/pkg/server/ca/monitoring.go)."""

    def __init__(self) -> None:
        self.csr = Counter("citadel_server_csr_count", "The number of CSRs received.")
        self.auth_failures = Counter(
            "citadel_server_authentication_failure_count",
            "The number of authentication failures.",
        )
        self.parsing_errors = Counter(
            "citadel_server_csr_parsing_err_count", "The number of errors in parsing CSRs."
        )
        self.identity_errors = Counter(
            "citadel_server_id_extraction_err_count",
            "The number of CSRs refused for asking another identity.",
        )
        self.issued = Counter(
            "citadel_server_success_cert_issuance_count",
            "The number of certificates issuances that have succeeded.",
        )
        self.sign_errors = Counter(
            "citadel_server_csr_sign_err_count", "The number of errors in signing CSRs."
        )

    def render(self) -> str:
        metrics = (
            self.csr,
            self.auth_failures,
            self.parsing_errors,
            self.identity_errors,
            self.issued,
            self.sign_errors,
        )
        return "".join(f"{line}\n" for metric in metrics for line in metric.render())


class CaRefusal(Exception):
    """A CSR the CA does not sign: the gRPC status and the caller-facing message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class CsrService:
    """The CA's one call, served the same way by the grpc.aio TLS ports (15012, 15013) and
    by the CA port (ca_http.py behind Envoy): `issue()` does the work, each transport only
    maps its refusals to its own way of ending a call."""

    def __init__(self, ca: CertificateAuthority, tokens: TokenAuthority) -> None:
        self.ca = ca
        self.tokens = tokens
        self.metrics = CaMetrics()

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to add to a grpc.aio server."""
        method = grpc.unary_unary_rpc_method_handler(
            self.create_certificate,
            request_deserializer=_parse_request,
            response_serializer=IstioCertificateResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {"CreateCertificate": method})

    async def create_certificate(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request is None:
            reason = "the request is not an IstioCertificateRequest"
            log.warning("CA: refused a call from %s: %s", context.peer(), reason)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, reason)
        try:
            chain = self.issue(
                request, context.invocation_metadata() or (), context.auth_context, context.peer
            )
        except CaRefusal as refusal:
            await context.abort(refusal.code, refusal.message)
            raise AssertionError("unreachable: abort raises") from None
        return IstioCertificateResponse(cert_chain=chain)

    def issue(
        self,
        request: Any,
        metadata: Iterable[tuple[str, str | bytes]],
        auth_context: Callable[[], Mapping[str, Sequence[bytes]]],
        peer: Callable[[], str],
    ) -> tuple[str, ...]:
        """The PEM chain for the CSR of `request`, for the identity the call proves;
        CaRefusal (logged here, with the peer and never the token) otherwise."""
        self.metrics.csr.inc()
        try:
            # auth_context is asked only without a token: it costs a C round trip.
            caller = authenticate(metadata, auth_context, self.tokens, self.ca.trust_domain)
        except AuthenticationError as exc:
            self.metrics.auth_failures.inc()
            log.warning("CA: refused CSR from %s: %s", peer(), exc)
            raise CaRefusal(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None
        # Clamped before timedelta (int64 seconds overflow it); sign() caps at its maximum.
        seconds = min(int(request.validity_duration), _MAX_SECONDS)
        ttl = dt.timedelta(seconds=seconds) if seconds else None
        try:
            issued = self._sign(request.csr, caller, ttl)
        except CsrIdentityError as exc:
            self.metrics.identity_errors.inc()
            log.warning("CA: refused CSR from %s (%s): %s", peer(), caller.credential, exc)
            raise CaRefusal(grpc.StatusCode.PERMISSION_DENIED, f"CSR refused: {exc}") from None
        except CsrError as exc:
            self.metrics.parsing_errors.inc()
            log.warning("CA: invalid CSR from %s (%s): %s", peer(), caller.credential, exc)
            raise CaRefusal(grpc.StatusCode.INVALID_ARGUMENT, f"invalid CSR: {exc}") from None
        except Exception:
            self.metrics.sign_errors.inc()
            log.exception("CA: signing a CSR from %s failed", peer())
            raise CaRefusal(grpc.StatusCode.INTERNAL, "the CA failed to sign the CSR") from None
        self.metrics.issued.inc()
        if log.isEnabledFor(logging.DEBUG):
            _log_issued(issued, caller)
        return issued.chain_pem

    def _sign(self, csr: str, caller: Caller, ttl: dt.timedelta | None) -> Issued:
        """Sign for the proven identity the CSR asks for (a certificate may prove several)."""
        for identity in caller.identities[:-1]:
            try:
                return self.ca.sign(csr, identity, ttl)
            except CsrIdentityError:
                continue
        return self.ca.sign(csr, caller.identities[-1], ttl)


def _parse_request(raw: bytes) -> IstioCertificateRequest | None:
    """The request deserializer: never raises (gRPC would log a traceback and answer
    UNKNOWN); None for bytes that are not an IstioCertificateRequest."""
    try:
        return IstioCertificateRequest.FromString(raw)
    except Exception:  # protobuf's DecodeError, or text that is not UTF-8
        return None


def _log_issued(issued: Issued, caller: Caller) -> None:
    leaf = issued.leaf
    log.debug(
        "CA: issued %s (serial %x, expires %s) to %s",
        leaf.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value.get_values_for_type(x509.UniformResourceIdentifier),
        leaf.serial_number,
        leaf.not_valid_after_utc.isoformat(),
        caller.credential,
    )

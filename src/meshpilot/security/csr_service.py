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
from typing import Any, NoReturn

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

__all__ = ["CaMetrics", "CsrService"]

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


class CsrService:
    def __init__(self, ca: CertificateAuthority, tokens: TokenAuthority) -> None:
        self.ca = ca
        self.tokens = tokens
        self.metrics = CaMetrics()

    def handler(self) -> grpc.GenericRpcHandler:
        """The generic handler to add to a grpc.aio server."""
        method = grpc.unary_unary_rpc_method_handler(
            self.create_certificate,
            request_deserializer=IstioCertificateRequest.FromString,
            response_serializer=IstioCertificateResponse.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {"CreateCertificate": method})

    async def create_certificate(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.metrics.csr.inc()
        try:
            caller = authenticate(
                context.invocation_metadata() or (),
                context.auth_context,  # asked only without a token: it costs a C round trip
                self.tokens,
                self.ca.trust_domain,
            )
        except AuthenticationError as exc:
            self.metrics.auth_failures.inc()
            log.warning("CA: refused CSR from %s: %s", context.peer(), exc)
            await _refuse(context, grpc.StatusCode.UNAUTHENTICATED, str(exc))
        # Clamped before timedelta (int64 seconds overflow it); sign() caps at its maximum.
        seconds = min(int(request.validity_duration), _MAX_SECONDS)
        ttl = dt.timedelta(seconds=seconds) if seconds else None
        try:
            issued = self._sign(request.csr, caller, ttl)
        except CsrIdentityError as exc:
            self.metrics.identity_errors.inc()
            log.warning("CA: refused CSR from %s (%s): %s", context.peer(), caller.credential, exc)
            await _refuse(context, grpc.StatusCode.PERMISSION_DENIED, f"CSR refused: {exc}")
        except CsrError as exc:
            self.metrics.parsing_errors.inc()
            log.warning("CA: invalid CSR from %s (%s): %s", context.peer(), caller.credential, exc)
            await _refuse(context, grpc.StatusCode.INVALID_ARGUMENT, f"invalid CSR: {exc}")
        except Exception:
            self.metrics.sign_errors.inc()
            log.exception("CA: signing a CSR from %s failed", context.peer())
            await _refuse(context, grpc.StatusCode.INTERNAL, "the CA failed to sign the CSR")
        self.metrics.issued.inc()
        if log.isEnabledFor(logging.DEBUG):
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
        return IstioCertificateResponse(cert_chain=issued.chain_pem)

    def _sign(self, csr: str, caller: Caller, ttl: dt.timedelta | None) -> Issued:
        """Sign for the proven identity the CSR asks for (a certificate may prove several)."""
        for identity in caller.identities[:-1]:
            try:
                return self.ca.sign(csr, identity, ttl)
            except CsrIdentityError:
                continue
        return self.ca.sign(csr, caller.identities[-1], ttl)


async def _refuse(
    context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str
) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("unreachable: abort raises")

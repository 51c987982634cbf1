"""The injection webhook (istiod's 15017): HTTPS, `POST /inject` and `/inject/...`.

    POST /inject[/...]   AdmissionReview admission.k8s.io/v1 or v1beta1 → AdmissionReview
                         (admission.py); the path may set istio-proxy env (inject_envs)

Refusals, as Istio's serveInject answers them, checked in this order:

    not POST                        405
    an empty body                   400 "no body found"
    Content-Type not JSON           415 "invalid Content-Type, want `application/json`"
    a body over MAX_BODY            413 (Istio answers 400; kube-apiserver sends at most 3 MiB
                                    objects, and 6 MiB is Istio's own read limit)
    not JSON, not an AdmissionReview, no request uid
                                    400 naming what is wrong (no uid to answer to)

Everything else is answered 200 with an AdmissionReview (allowed, or refused with a reason).
The serving certificate is issued by the mesh CA for `istiod[-<rev>].istio-system.svc`;
kube-apiserver trusts it by the MutatingWebhookConfiguration's caBundle (the CA root).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from meshpilot import http1
from meshpilot.inject.admission import AdmissionError, parse_review, review_response
from meshpilot.inject.config import Injector
from meshpilot.security.ca import CertificateAuthority

__all__ = ["MAX_BODY", "InjectionWebhook", "handle_inject", "webhook_dns_names"]

log = logging.getLogger(__name__)

MAX_BODY = 6 * 1024 * 1024  # Istio's kube.MaxRequestBodyBytes
_IN_THREAD = 256 * 1024  # bodies past this are answered in a worker thread
InjectorSource = Callable[[], Injector]


def webhook_dns_names(revision: str = "") -> tuple[str, ...]:
    """The names kube-apiserver reaches the webhook by (its Service istiod[-<rev>])."""
    service = f"istiod-{revision}" if revision and revision != "default" else "istiod"
    return (
        f"{service}.istio-system.svc",
        f"{service}.istio-system",
        service,
        "localhost",
    )


async def handle_inject(request: http1.Request, injector: Injector) -> http1.Response:
    """One webhook request (the HTTP checks, then admission.py)."""
    if request.path != "/inject" and not request.path.startswith("/inject/"):
        return http1.Response.text(f"no such path: {request.path}\n", 404)
    if request.method != "POST":
        return http1.Response.text("method not allowed: POST an AdmissionReview\n", 405)
    if not request.body:
        return http1.Response.text("no body found\n", 400)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return http1.Response.text("invalid Content-Type, want `application/json`\n", 415)
    if len(request.body) > _IN_THREAD:
        # a big review takes tens of ms: off the loop that also serves xDS
        return await asyncio.to_thread(_answer, request.body, injector, request.path)
    return _answer(request.body, injector, request.path)


def _answer(body: bytes, injector: Injector, path: str) -> http1.Response:
    data = http1.parse_json(body, "AdmissionReview")  # BadRequest → 400
    try:
        review = parse_review(data)
    except AdmissionError as exc:
        return http1.Response.text(f"{exc}\n", 400)
    answer = review_response(review, injector, path)
    return http1.Response(
        200, json.dumps(answer, separators=(",", ":")).encode(), "application/json"
    )


class InjectionWebhook:
    """The HTTPS server; `injector()` is read per request (the store's injector config)."""

    def __init__(
        self, ca: CertificateAuthority, injector: InjectorSource, revision: str = ""
    ) -> None:
        self.ca = ca
        self.injector = injector
        self.revision = revision
        self.port = 0
        self._server: asyncio.Server | None = None

    def tls_context(self, ips: Sequence[str]) -> ssl.SSLContext:
        """A server context with a fresh key and certificate from the mesh CA."""
        creds = self.ca.serving_credentials(webhook_dns_names(self.revision), ips)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        # ssl loads a key only from a file: a private temporary one, removed at once
        with tempfile.TemporaryDirectory(prefix="meshpilot-webhook-") as tmp:
            key, chain = Path(tmp) / "key.pem", Path(tmp) / "chain.pem"
            key.touch(mode=0o600)
            key.write_bytes(creds.key_pem)
            chain.write_bytes(creds.chain_pem)
            context.load_cert_chain(chain, key)
        return context

    async def start(self, host: str, port: int) -> int:
        ips = [host] if host not in ("0.0.0.0", "::") else []
        ips += [ip for ip in ("127.0.0.1",) if ip not in ips]
        context = await asyncio.to_thread(self.tls_context, ips)
        # kept alive: kube-apiserver reuses its connection to the webhook for each pod
        self._server = await http1.serve(
            self._handle, host, port, max_body=MAX_BODY, tls=context, keep_alive=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("injection webhook on https://%s:%d/inject", host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, request: http1.Request) -> http1.Response:
        return await handle_inject(request, self.injector())

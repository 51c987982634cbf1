"""Keeping the workload certificate fresh: first issue, rotation, retries.

A new key and CSR are made for every renewal (the old key is never reused). Rotation is due
at `rotate_at` of the certificate's lifetime (80%, the issue's bar; Istio's
SECRET_GRACE_PERIOD_RATIO counts the other way). The lifetime starts when we asked, not at a
backdated not-before, so a CA that backdates for clock skew does not make us renew at once.
Until the CA answers, the last certificate keeps being served (Envoy keeps its connections),
with retries backing off exponentially, and a clear warning of how long it stays valid; once
it has expired, errors say so. Retries are jittered (between half the backoff and all of
it: the proxies of a restarted control plane do not call at once) and capped at 1 s while
the proxy has no valid certificate (it cannot serve: it must be back within about a second
of the CA), at 30 s while it still serves one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from meshpilot.agent.certs.store import SecretStore
from meshpilot.agent.certs.workload import WorkloadCert, accept_chain, build_csr, new_key
from meshpilot.errors import MeshpilotError

__all__ = ["CertificateRotator", "RotationPolicy", "Signer"]

log = logging.getLogger(__name__)


class Signer(Protocol):
    """What the rotator needs of a CA client (`agent.ca_client.CaClient`)."""

    async def sign(
        self, csr_pem: bytes, ttl_s: int, current: WorkloadCert | None = None
    ) -> list[str]: ...

    def roots(self) -> bytes: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RotationPolicy:
    ttl_s: int = 24 * 3600  # requested lifetime (Istio's SECRET_TTL)
    rotate_at: float = 0.8  # fraction of the lifetime after which a new one is fetched
    retry_initial_s: float = 0.1
    retry_max_s: float = 1.0  # without a valid certificate: the proxy cannot serve
    renew_retry_max_s: float = 30.0  # while the current certificate is still valid
    # Before the first certificate Envoy cannot become ready: say so (and how) this often.
    no_cert_log_every_s: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.rotate_at < 1:
            raise MeshpilotError(f"rotation point {self.rotate_at} must be between 0 and 1")
        if self.ttl_s < 1:
            raise MeshpilotError(f"certificate lifetime {self.ttl_s}s must be at least 1s")


class CertificateRotator:
    def __init__(
        self,
        signer: Signer,
        identity: str,
        store: SecretStore,
        policy: RotationPolicy | None = None,
        *,
        ca_name: str = "the CA",
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.signer = signer
        self.identity = identity
        self.store = store
        self.policy = policy or RotationPolicy()
        self.ca_name = ca_name
        self._now = now
        self.rotate_time: datetime | None = None  # when the current certificate is renewed
        self.failures = 0  # consecutive failed attempts
        self._no_cert_logged = float("-inf")  # monotonic time of the last such error line

    async def refresh(self) -> WorkloadCert:
        """One attempt: new key, CSR, CA call, checks; the store serves the result."""
        asked = self._now()
        key = new_key()
        chain = await self.signer.sign(
            build_csr(key, self.identity), self.policy.ttl_s, self.store.cert
        )
        cert = accept_chain(chain, key, self.identity, self.signer.roots(), "root certificate")
        start = max(cert.not_before, asked)
        lifetime = (cert.not_after - start).total_seconds()
        self.rotate_time = start + timedelta(seconds=lifetime * self.policy.rotate_at)
        self.store.update(cert)
        log.info(
            "workload certificate for %s issued: serial %s, valid until %s; renewal at %s",
            self.identity,
            cert.serial,
            _stamp(cert.not_after),
            _stamp(self.rotate_time),
        )
        return cert

    async def run(self) -> None:
        """Fetch, then renew for ever (until cancelled)."""
        while True:
            try:
                await self.refresh()
                self.failures = 0
            except MeshpilotError as exc:
                self.failures += 1
                await asyncio.sleep(self._after_failure(exc))
                continue
            assert self.rotate_time is not None
            await asyncio.sleep(max(0.0, (self.rotate_time - self._now()).total_seconds()))

    def _after_failure(self, exc: MeshpilotError) -> float:
        """Log the failure with what it means for the served certificate; the retry delay."""
        current = self.store.cert
        valid = current is not None and current.not_after > self._now()
        cap = self.policy.renew_retry_max_s if valid else self.policy.retry_max_s
        backoff = min(cap, self.policy.retry_initial_s * 2.0 ** min(self.failures - 1, 30))
        delay = random.uniform(backoff / 2, backoff)  # jittered, and never a busy loop
        if current is None:
            if time.monotonic() - self._no_cert_logged < self.policy.no_cert_log_every_s:
                return delay
            self._no_cert_logged = time.monotonic()
            log.error(
                "no workload certificate for %s yet, so Envoy stays unready (mTLS listeners "
                "and clusters wait for it): %s; retrying in %.1fs. Is the control plane's CA "
                "running at %s? Start `meshpilot discovery`, or give the agent its address "
                "(--ca-address), its root (--root-cert) and a token (--token-file, "
                "`meshpilot token issue`)",
                self.identity, exc, delay, self.ca_name,
            )  # fmt: skip
            return delay
        left = (current.not_after - self._now()).total_seconds()
        if left <= 0:
            log.error(
                "workload certificate %s for %s EXPIRED at %s and cannot be renewed: %s; "
                "retrying in %.1fs",
                current.serial, self.identity, _stamp(current.not_after), exc, delay,
            )  # fmt: skip
            return delay
        log.warning(
            "cannot renew workload certificate %s for %s from %s: %s; still serving it "
            "(valid until %s, %.0fs left); retrying in %.1fs",
            current.serial, self.identity, self.ca_name, exc, _stamp(current.not_after),
            left, delay,
        )  # fmt: skip
        # Never sleep past expiry without one more try.
        return max(0.05, min(delay, left))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

"""SDS secrets the control plane serves over ADS: `credentialName` certificates
(Istio's pilot/pkg/xds/sds.go and pilot/pkg/credentials/kube/secrets.go).

- Only a proxy whose stream proved its identity (`Proxy.verified`: a client certificate or a
  token, xds/identity.py) is served any: a plaintext stream, or one that proved nothing, is
  answered with no resources (Istio: "not authorized to receive secrets", one log line).
- `kubernetes://<name>` (or `kubernetes://<namespace>/<name>`) reads Secret `<name>` in the
  proxy's own namespace, which must be its verified identity's; any other namespace is
  refused, as Istio refuses it without a ReferenceGrant (one log line naming the refused
  resources). Keys `cert`/`key` win over `tls.crt`/`tls.key` (any Secret type), plus
  `tls.ocsp-staple` as the OCSP staple -> a `tls_certificate` secret.
- `kubernetes://<name>-cacert` -> a `validation_context` with `trusted_ca` (and `crl`): from
  Secret `<name>-cacert` if it exists, else from Secret `<name>`; keys `cacert` (+`crl`), then
  `ca.crt` (+`ca.crl`).
- Only the names asked for are answered, never the agent's `default`/`ROOTCA` or files. A
  missing or unusable Secret yields no resource (Istio logs and skips it; the listener keeps
  its chain, which waits for the secret). Key material is never logged.
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Collection
from dataclasses import dataclass

from envoy.config.core.v3 import base_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2

from meshpilot.config.kube.core import Secret
from meshpilot.model.proxy import Proxy
from meshpilot.model.push_context import PushContext
from meshpilot.xds.names import CACERT_SUFFIX, CREDENTIAL_PREFIX

__all__ = ["generate_secrets", "secret_resource"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SecretRef:
    resource: str  # the SDS name as asked
    namespace: str
    name: str

    @property
    def ca_only(self) -> bool:
        return self.name.endswith(CACERT_SUFFIX)


def parse_resource(resource: str, proxy_namespace: str) -> SecretRef | None:
    """`kubernetes://name` or `kubernetes://ns/name`; None for names the agent serves."""
    if not resource.startswith(CREDENTIAL_PREFIX):
        return None
    ns, sep, name = resource[len(CREDENTIAL_PREFIX) :].partition("/")
    if not sep:
        ns, name = proxy_namespace, ns
    return SecretRef(resource, ns, name) if name else None


def _decoded(secret: Secret) -> dict[str, bytes] | None:
    """The Secret's data as the API server stores it (stringData wins); None if malformed."""
    out: dict[str, bytes] = {}
    try:
        for key, value in secret.data.items():
            out[key] = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    out.update((k, v.encode()) for k, v in secret.string_data.items())
    return out


def _inline(data: bytes) -> base_pb2.DataSource:
    return base_pb2.DataSource(inline_bytes=data)


def _tls_certificate(data: dict[str, bytes]) -> common_pb2.TlsCertificate | None:
    for cert_key, key_key, staple_key in (
        ("cert", "key", ""),
        ("tls.crt", "tls.key", "tls.ocsp-staple"),
    ):
        if data.get(cert_key) and data.get(key_key):
            out = common_pb2.TlsCertificate(
                certificate_chain=_inline(data[cert_key]), private_key=_inline(data[key_key])
            )
            if staple_key and data.get(staple_key):
                out.ocsp_staple.CopyFrom(_inline(data[staple_key]))
            return out
    return None


def _validation_context(
    data: dict[str, bytes],
) -> common_pb2.CertificateValidationContext | None:
    for ca_key, crl_key in (("cacert", "crl"), ("ca.crt", "ca.crl")):
        if data.get(ca_key):
            out = common_pb2.CertificateValidationContext(trusted_ca=_inline(data[ca_key]))
            if data.get(crl_key):
                out.crl.CopyFrom(_inline(data[crl_key]))
            return out
    return None


def _lookup(push: PushContext, namespace: str, name: str) -> dict[str, bytes] | None:
    obj = push.secret(namespace, name)
    return _decoded(obj.model) if obj is not None else None


def secret_resource(push: PushContext, ref: SecretRef) -> secret_pb2.Secret | None:
    """The Envoy secret for one reference, or None when the Secret cannot serve it."""
    if not ref.ca_only:
        data = _lookup(push, ref.namespace, ref.name)
        cert = _tls_certificate(data) if data is not None else None
        return secret_pb2.Secret(name=ref.resource, tls_certificate=cert) if cert else None
    own = push.secret(ref.namespace, ref.name)
    if own is not None:
        data = _decoded(own.model)
    else:
        data = _lookup(push, ref.namespace, ref.name.removesuffix(CACERT_SUFFIX))
    ctx = _validation_context(data) if data is not None else None
    return secret_pb2.Secret(name=ref.resource, validation_context=ctx) if ctx else None


def generate_secrets(
    push: PushContext, proxy: Proxy, names: Collection[str] | None
) -> list[secret_pb2.Secret]:
    """The `kubernetes://` secrets among `names` that the proxy's verified identity may read,
    sorted; SDS is never wildcard (None: none)."""
    refs = [
        ref
        for ref in (parse_resource(r, proxy.namespace) for r in sorted(set(names or ())))
        if ref is not None
    ]
    if not refs:
        return []
    verified = proxy.verified
    if verified is None:
        log.warning(
            "SDS: proxy %s is not authorized to receive secrets (%d asked): it proved no "
            "identity; connect over the TLS port with the workload certificate or a token",
            proxy.id,
            len(refs),
        )
        return []
    allowed = [r for r in refs if r.namespace == verified.namespace == proxy.namespace]
    if len(allowed) < len(refs):
        denied = sorted(r.resource for r in refs if r not in allowed)
        log.warning(
            "SDS: proxy %s (%s) may not read %s: a secret is served only to its own namespace",
            proxy.id,
            verified,
            ", ".join(denied[:3]) + (f" and {len(denied) - 3} more" if len(denied) > 3 else ""),
        )
    out = []
    for ref in allowed:
        secret = secret_resource(push, ref)
        if secret is not None:
            out.append(secret)
    return out

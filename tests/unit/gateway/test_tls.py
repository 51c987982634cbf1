"""DownstreamTlsContext per Gateway TLS mode."""

from __future__ import annotations

from envoy.config.core.v3 import config_source_pb2
from envoy.extensions.transport_sockets.tls.v3 import common_pb2, secret_pb2

from meshpilot.config.istio.gateway import ServerTLSSettings
from meshpilot.xds.generate.gateway.tls import downstream_tls_context, filter_cipher_suites
from tests.unit.gateway.meshes import (
    gateway,
    gateway_config,
    listener,
    tls_context,
    virtual_service,
)


def tls(**fields: object) -> ServerTLSSettings:
    return ServerTLSSettings.model_validate(fields)


def assert_ads(sds: secret_pb2.SdsSecretConfig, name: str) -> None:
    """A credential served by the control plane: ADS, no initial fetch timeout."""
    assert sds.name == name
    assert sds.sds_config.HasField("ads")
    assert sds.sds_config.resource_api_version == config_source_pb2.V3
    assert not sds.sds_config.HasField("initial_fetch_timeout")


def assert_agent(sds: secret_pb2.SdsSecretConfig, name: str, fetch_timeout: bool) -> None:
    """A secret the agent serves over sds-grpc."""
    assert sds.name == name
    api = sds.sds_config.api_config_source
    assert api.api_type == config_source_pb2.ApiConfigSource.GRPC
    assert api.set_node_on_first_message_only
    assert api.transport_api_version == config_source_pb2.V3
    assert [g.envoy_grpc.cluster_name for g in api.grpc_services] == ["sds-grpc"]
    assert sds.sds_config.HasField("initial_fetch_timeout") is fetch_timeout


def test_simple_serves_the_credential_over_ads() -> None:
    ctx = downstream_tls_context(tls(mode="SIMPLE", credential_name="shop-cert"))
    common = ctx.common_tls_context
    (cert,) = common.tls_certificate_sds_secret_configs
    assert_ads(cert, "kubernetes://shop-cert")
    assert list(common.alpn_protocols) == ["h2", "http/1.1"]
    assert ctx.HasField("require_client_certificate") and not ctx.require_client_certificate.value
    assert common.WhichOneof("validation_context_type") is None


def test_simple_with_subject_alt_names_validates_them() -> None:
    ctx = downstream_tls_context(
        tls(mode="SIMPLE", credential_name="c", subject_alt_names=["client.example.com"])
    )
    sans = ctx.common_tls_context.validation_context.match_subject_alt_names
    assert [m.exact for m in sans] == ["client.example.com"]


def test_mutual_requires_a_client_cert_checked_against_cacert() -> None:
    ctx = downstream_tls_context(
        tls(
            mode="MUTUAL",
            credential_name="shop-cert",
            subject_alt_names=["spiffe://td/ns/a/sa/b"],
            verify_certificate_hash=["AB:CD"],
        )
    )
    assert ctx.require_client_certificate.value
    combined = ctx.common_tls_context.combined_validation_context
    assert_ads(combined.validation_context_sds_secret_config, "kubernetes://shop-cert-cacert")
    default = combined.default_validation_context
    assert [m.exact for m in default.match_subject_alt_names] == ["spiffe://td/ns/a/sa/b"]
    assert list(default.verify_certificate_hash) == ["AB:CD"]


def test_optional_mutual_validates_but_does_not_require() -> None:
    ctx = downstream_tls_context(tls(mode="OPTIONAL_MUTUAL", credential_name="c"))
    assert not ctx.require_client_certificate.value
    combined = ctx.common_tls_context.combined_validation_context
    assert combined.validation_context_sds_secret_config.name == "kubernetes://c-cacert"


def test_istio_mutual_uses_the_workload_certificate_from_the_agent() -> None:
    ctx = downstream_tls_context(tls(mode="ISTIO_MUTUAL", min_protocol_version="TLSV1_3"))
    common = ctx.common_tls_context
    (cert,) = common.tls_certificate_sds_secret_configs
    assert_agent(cert, "default", fetch_timeout=True)
    assert_agent(
        common.combined_validation_context.validation_context_sds_secret_config,
        "ROOTCA",
        fetch_timeout=True,
    )
    assert ctx.require_client_certificate.value
    assert not common.HasField("tls_params")  # versions only apply to SIMPLE/MUTUAL modes


def test_istio_mutual_on_a_tcp_server_offers_peer_exchange_alpn() -> None:
    config = gateway_config(
        gateway(
            "gw",
            "shop",
            """
  - port: {number: 9000, name: tls, protocol: TLS}
    hosts: ["db.example.com"]
    tls: {mode: ISTIO_MUTUAL}
""",
        ),
        virtual_service(
            "db",
            "shop",
            """
  hosts: ["db.example.com"]
  gateways: ["gw"]
  tcp: [{route: [{destination: {host: db}}]}]
""",
        ),
    )
    (chain,) = listener(config, "0.0.0.0_9000").filter_chains
    assert list(chain.filter_chain_match.server_names) == ["db.example.com"]
    alpn = list(tls_context(chain).common_tls_context.alpn_protocols)
    assert alpn == ["istio-peer-exchange", "h2", "http/1.1"]


def test_certificate_files_are_served_by_the_agent() -> None:
    ctx = downstream_tls_context(
        tls(
            mode="MUTUAL",
            server_certificate="/etc/certs/tls.crt",
            private_key="/etc/certs/tls.key",
            ca_certificates="/etc/certs/ca.crt",
            ca_crl="/etc/certs/ca.crl",
        )
    )
    common = ctx.common_tls_context
    (cert,) = common.tls_certificate_sds_secret_configs
    assert_agent(cert, "file-cert:/etc/certs/tls.crt~/etc/certs/tls.key", fetch_timeout=False)
    combined = common.combined_validation_context
    assert_agent(
        combined.validation_context_sds_secret_config,
        "file-root:/etc/certs/ca.crt",
        fetch_timeout=False,
    )
    assert combined.default_validation_context.crl.filename == "/etc/certs/ca.crl"


def test_several_credential_names_share_the_first_ca() -> None:
    ctx = downstream_tls_context(tls(mode="MUTUAL", credential_names=["rsa", "ecdsa"]))
    common = ctx.common_tls_context
    assert [s.name for s in common.tls_certificate_sds_secret_configs] == [
        "kubernetes://rsa",
        "kubernetes://ecdsa",
    ]
    assert common.combined_validation_context.validation_context_sds_secret_config.name == (
        "kubernetes://rsa-cacert"
    )


def test_builtin_credential_is_the_workload_certificate() -> None:
    ctx = downstream_tls_context(tls(mode="MUTUAL", credential_name="builtin://"))
    common = ctx.common_tls_context
    assert_agent(common.tls_certificate_sds_secret_configs[0], "default", fetch_timeout=True)
    root = common.combined_validation_context.validation_context_sds_secret_config
    assert_agent(root, "ROOTCA", fetch_timeout=True)


SUITE = "ECDHE-RSA-AES128-GCM-SHA256"


def test_protocol_versions_and_cipher_suites() -> None:
    ctx = downstream_tls_context(
        tls(
            mode="SIMPLE",
            credential_name="c",
            min_protocol_version="TLSV1_2",
            max_protocol_version="TLSV1_3",
            cipher_suites=[
                "ECDHE-RSA-AES128-GCM-SHA256",
                "NOT-A-SUITE",
                "ECDHE-RSA-AES128-GCM-SHA256",
            ],
        )
    )
    params = ctx.common_tls_context.tls_params
    assert params.tls_minimum_protocol_version == common_pb2.TlsParameters.TLSv1_2
    assert params.tls_maximum_protocol_version == common_pb2.TlsParameters.TLSv1_3
    assert list(params.cipher_suites) == [SUITE]  # unknown and repeated suites dropped


def test_cipher_filter_keeps_operator_expressions() -> None:
    assert filter_cipher_suites(["-AES128-SHA", "ALL", "AES128-SHA", "bogus"]) == [
        "-AES128-SHA",
        "ALL",
        "AES128-SHA",
    ]

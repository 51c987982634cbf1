"""Profiles, the user's spec merged over them, and istioctl's --set paths."""

from __future__ import annotations

import pytest

from meshpilot.install.load import OperatorFile, build_operator, read_operator_files
from meshpilot.install.merge import merge_spec
from meshpilot.install.profiles import PROFILES, profile_spec
from meshpilot.install.set_path import parse_set, parse_value
from meshpilot.install.spec import IstioOperatorError


def _op(spec: dict[str, object], sets: tuple[str, ...] = (), revision: str | None = None):  # type: ignore[no-untyped-def]
    return build_operator([OperatorFile("iop.yaml", {}, dict(spec))], sets, revision)


def _enabled(profile: str) -> dict[str, bool | None]:
    c = _op({"profile": profile}).spec.components
    out = {
        "base": c.base.enabled,
        "pilot": c.pilot.enabled,
        "istiodRemote": c.istiod_remote.enabled,
    }
    out.update({g.name: g.enabled for g in (*c.ingress_gateways, *c.egress_gateways)})
    return out


def test_profiles_enable_the_components_of_istioctl() -> None:
    assert _enabled("default") == {
        "base": True,
        "pilot": True,
        "istiodRemote": False,
        "istio-ingressgateway": True,
        "istio-egressgateway": False,
    }
    assert _enabled("demo")["istio-egressgateway"] is True
    assert _enabled("minimal")["istio-ingressgateway"] is False
    assert _enabled("minimal")["pilot"] is True
    assert not any(_enabled("empty").values())
    assert _enabled("remote") == {
        "base": False,
        "pilot": False,
        "istiodRemote": True,
        "istio-ingressgateway": False,
        "istio-egressgateway": False,
    }
    preview = _op({"profile": "preview"}).spec.mesh_config.default_config.proxy_metadata
    assert preview == {"ISTIO_META_DNS_CAPTURE": "true", "BOOTSTRAP_XDS_AGENT": "true"}
    demo = _op({"profile": "demo"})
    assert demo.spec.mesh_config.access_log_file == "/dev/stdout"
    assert demo.spec.components.pilot.k8s.env[0].name == "PILOT_TRACE_SAMPLING"


def test_unknown_and_unsupported_profiles() -> None:
    with pytest.raises(
        IstioOperatorError,
        match="unknown profile 'prod'; valid profiles: default, demo, empty, external, minimal, "
        "preview, remote",
    ):
        profile_spec("prod")
    with pytest.raises(
        IstioOperatorError, match="profile 'ambient' is not supported: ambient mesh needs ztunnel"
    ):
        _op({"profile": "ambient"})
    assert set(PROFILES) >= {"default", "demo", "minimal", "empty", "preview", "remote"}


def test_user_spec_merges_gateways_by_name_and_replaces_lists() -> None:
    op = _op(
        {
            "profile": "demo",
            "components": {
                "ingressGateways": [
                    {"name": "istio-ingressgateway", "k8s": {"replicaCount": 3}},
                    {"name": "internal-gw", "enabled": True},
                ],
                "pilot": {"k8s": {"env": [{"name": "X", "value": "1"}]}},
            },
        }
    )
    gateways = {g.name: g for g in op.spec.components.ingress_gateways}
    main = gateways["istio-ingressgateway"]
    assert main.enabled is True and main.k8s.replica_count == 3
    assert main.k8s.service is not None and main.k8s.service.ports is not None  # kept from demo
    assert gateways["internal-gw"].enabled is True
    assert [e.name for e in op.spec.components.pilot.k8s.env] == ["X"]  # list replaced
    assert merge_spec({"a": {"b": 1, "c": 2}}, {"a": {"c": None}}) == {"a": {"b": 1}}


def test_set_paths_and_values() -> None:
    op = _op(
        {},
        (
            "values.pilot.traceSampling=10",
            "components.ingressGateways[name:istio-ingressgateway].enabled=false",
            "components.egressGateways[0].k8s.replicaCount=2",
            "meshConfig.defaultConfig.proxyMetadata.DNS='true'",
            "values.global.proxy.holdApplicationUntilProxyStarts=true",
            "spec.hub=registry.local/istio",
            "profile=demo",
        ),
    )
    c = op.spec.components
    assert op.spec.profile == "demo" and c.egress_gateways[0].enabled is True
    assert op.spec.values.pilot is not None and op.spec.values.pilot.trace_sampling == 10.0
    assert c.ingress_gateways[0].enabled is False and c.egress_gateways[0].k8s.replica_count == 2
    assert op.spec.mesh_config.default_config.proxy_metadata["DNS"] == "true"
    assert op.spec.hub == "registry.local/istio"
    assert [parse_value(v) for v in ("true", "3", "1.5", '"3"', "x.y")] == [
        True,
        3,
        1.5,
        "3",
        "x.y",
    ]


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("values.pilot.traceSampling", "--set values.pilot.traceSampling: expected PATH=VALUE"),
        (
            "values.pilot.tracesampling=1",
            "--set values.pilot.tracesampling=1: spec.values.pilot.tracesampling: unknown field",
        ),
        (
            "components.ingressGateways[name:nope].enabled=true",
            "components.ingressGateways has no entry with name='nope'",
        ),
        (
            "components.ingressGateways[4].enabled=true",
            "components.ingressGateways has 1 entries; no index 4",
        ),
        ("components.ingressGateways[x].enabled=true", "bad list selector [x]"),
        ("hub.registry=x", "--set hub.registry=x: hub is a str, not a mapping"),
        (
            "values.pilot.traceSampling=lots",
            "spec.values.pilot.traceSampling: Input should be a valid number",
        ),
        ("revision=1.15", "spec.revision: revision '1.15' is not a DNS-1123 label"),
        ("[0]=1", "the path must start with a field name"),
    ],
)
def test_bad_set_flags_are_named(flag: str, expected: str) -> None:
    with pytest.raises(IstioOperatorError) as info:
        _op({}, (flag,))
    assert expected in str(info.value)


def test_revision_flag() -> None:
    op = _op({}, revision="1-15-4")
    assert op.revision == "1-15-4" and op.spec.values.revision == "1-15-4"
    with pytest.raises(
        IstioOperatorError,
        match=r"--revision: revision '1\.15\.4' is not a DNS-1123 label.*'1-15-4'",
    ):
        _op({}, revision="1.15.4")
    assert parse_set("a\\.b.c=1").path == ("a.b", "c")


def test_files_are_checked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    good = tmp_path / "iop.yaml"
    good.write_text(
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: minimal\n"
    )
    files = read_operator_files([str(good)])
    assert build_operator(files).spec.profile == "minimal"
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\n")
    with pytest.raises(IstioOperatorError, match=r"bad\.yaml: expected kind IstioOperator"):
        read_operator_files([str(bad)])
    with pytest.raises(IstioOperatorError, match=r"cannot read .*missing\.yaml"):
        read_operator_files([str(tmp_path / "missing.yaml")])
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  compnents: {}\n"
    )
    with pytest.raises(IstioOperatorError, match=r"typo\.yaml: spec\.compnents: unknown field"):
        build_operator(read_operator_files([str(typo)]))

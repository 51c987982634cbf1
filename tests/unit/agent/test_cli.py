"""`meshpilot proxy sidecar|router`: argument handling (runs that start Envoy are e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.agent import InterceptionMode, XdsType
from meshpilot.cli.proxy import _build, proxy
from meshpilot.model.proxy import ProxyType


def _kwargs(**overrides: object) -> dict[str, object]:
    """What click hands `_build` for `sidecar --pod demo-1.shop` with defaults."""
    ctx = proxy.commands["sidecar"].make_context("sidecar", ["--pod", "demo-1.shop"])
    return {**ctx.params, **overrides}


def test_help_lists_both_commands() -> None:
    result = CliRunner().invoke(proxy, ["--help"])
    assert result.exit_code == 0
    assert "sidecar" in result.output and "router" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sidecar", "--pod", "nonamespace"], "--pod NAME.NAMESPACE"),
        (["sidecar", "--pod", "a.b", "--label", "novalue"], "expected key=value"),
        (["sidecar", "--pod", "a.b", "--discovery-address", "istiod"], "discovery address"),
        (["sidecar", "--pod", "a.b", "--ip", "300.1.1.1"], "invalid IP"),
        (["sidecar", "--pod", "a.b", "--admin-port", "0"], "--admin-port"),
    ],
)
def test_bad_arguments_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(proxy, args, env={"POD_NAME": "", "POD_NAMESPACE": ""})
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_defaults_are_istios() -> None:
    options, runtime = _build(ProxyType.SIDECAR, _kwargs(ips=("10.0.0.9",)))
    assert options.node_id == "sidecar~10.0.0.9~demo-1.shop~shop.svc.cluster.local"
    assert options.interception_mode is InterceptionMode.REDIRECT
    assert options.xds_type is XdsType.DELTA_GRPC
    assert options.discovery_address == "127.0.0.1:15010"
    assert options.ports.envoy_admin == 15000 and options.ports.health == 15021
    assert options.termination_drain_duration_s == 5.0
    assert options.concurrency == 2 and options.drain_duration_s == 45
    assert runtime.run_as_proxy_uid is None and runtime.log_level == "warning,misc:error"


def test_labels_from_file_and_flags(tmp_path: Path) -> None:
    labels = tmp_path / "labels"
    labels.write_text('app="demo"\nversion="v1"\n')
    options, _ = _build(
        ProxyType.SIDECAR,
        _kwargs(labels_file=labels, label_args=("version=v2",), termination_drain_duration="250ms"),
    )
    assert dict(options.labels) == {"app": "demo", "version": "v2"}
    assert options.termination_drain_duration_s == 0.25


def test_pod_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "gw-1")
    monkeypatch.setenv("POD_NAMESPACE", "istio-system")
    ctx = proxy.commands["router"].make_context("router", [])
    options, _ = _build(ProxyType.ROUTER, dict(ctx.params))
    assert (options.pod_name, options.namespace) == ("gw-1", "istio-system")


def test_proxy_user_of_its_own() -> None:
    """`--proxy-uid/--proxy-gid`: the user Envoy runs as (one per pod keeps pods' SDS sockets
    apart); `--run-as-proxy-uid` applies to gateways too."""
    args = "--pod gw-1.istio-system --run-as-proxy-uid --proxy-uid 183762952 --proxy-gid 1337"
    ctx = proxy.commands["router"].make_context("router", args.split())
    options, runtime = _build(ProxyType.ROUTER, dict(ctx.params))
    assert (options.ports.proxy_uid, options.ports.proxy_gid) == (183762952, 1337)
    assert runtime.run_as_proxy_uid is True
    options, _ = _build(ProxyType.SIDECAR, _kwargs())
    assert (options.ports.proxy_uid, options.ports.proxy_gid) == (1337, 1337)  # Istio's


def test_proxy_uid_root_is_a_usage_error() -> None:
    result = CliRunner().invoke(proxy, ["sidecar", "--pod", "a.b", "--proxy-uid", "0"])
    assert result.exit_code == 2 and "--proxy-uid" in result.output, result.output

"""Envoy's command line as pilot-agent builds it."""

from __future__ import annotations

import os
from pathlib import Path

from meshpilot.agent.envoy_process import EnvoyLaunch, envoy_args, split_log_level
from meshpilot.envoy.binary import envoy_binary as proxy_binary


def launch(**kw: object) -> EnvoyLaunch:
    return EnvoyLaunch(
        binary=Path("/bin/envoy"), config_path=Path("/w/envoy-rev.json"), work_dir=Path("/w"), **kw
    )  # type: ignore[arg-type]


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_istio_flags() -> None:
    args = envoy_args(launch(drain_time_s=3, concurrency=1))
    assert args[:3] == ["/bin/envoy", "-c", "/w/envoy-rev.json"]
    assert _flag(args, "--drain-time-s") == "3"
    assert _flag(args, "--drain-strategy") == "immediate"
    assert _flag(args, "--local-address-ip-version") == "v4"
    assert _flag(args, "--concurrency") == "1"
    assert _flag(args, "-l") == "warning"
    assert "--allow-unknown-static-fields" in args
    assert "--disable-hot-restart" in args


def test_base_id_enables_hot_restart() -> None:
    args = envoy_args(launch(base_id=7))
    assert _flag(args, "--base-id") == "7" and "--disable-hot-restart" not in args
    dynamic = envoy_args(launch(use_dynamic_base_id=True))
    assert "--use-dynamic-base-id" in dynamic and "--disable-hot-restart" not in dynamic


def test_component_log_levels() -> None:
    assert split_log_level("info,misc:error, upstream:debug") == (
        "info",
        ["misc:error", "upstream:debug"],
    )
    args = envoy_args(launch(log_level="debug,config:trace"))
    assert _flag(args, "-l") == "debug"
    assert _flag(args, "--component-log-level") == "config:trace"


def test_ipv6_only_node() -> None:
    assert _flag(envoy_args(launch(ipv6=True)), "--local-address-ip-version") == "v6"


def test_proxy_binary_is_the_executable_not_the_wrapper() -> None:
    path = proxy_binary()
    assert os.access(path, os.X_OK)
    assert path.read_bytes()[:2] != b"#!"

"""Envoy's command line as pilot-agent builds it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshpilot.agent.envoy_process import (
    ORPHAN_EXIT,
    EnvoyLaunch,
    death_signal_prefix,
    envoy_args,
    split_log_level,
)
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


_SPAWN_AND_WAIT = """
import os, subprocess, sys, time
from meshpilot.agent.envoy_process import death_signal_prefix
agent_pid = int(sys.argv[1]) if len(sys.argv) > 1 else os.getpid()
child = subprocess.Popen([*death_signal_prefix(agent_pid), "sleep", "60"])
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux setpriv")
def test_envoy_dies_with_its_agent() -> None:
    agent = subprocess.Popen([sys.executable, "-c", _SPAWN_AND_WAIT], stdout=subprocess.PIPE)
    try:
        assert agent.stdout is not None
        child = int(agent.stdout.readline())
        assert _alive(child)
        agent.kill()
        agent.wait()
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        agent.kill()
        agent.wait()


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux setpriv")
def test_a_child_whose_agent_is_already_gone_never_execs() -> None:
    # A parent pid that is not ours stands for "the agent died between fork and arming".
    gone = subprocess.run(
        [*death_signal_prefix(os.getpid() + 999_999), "sh", "-c", "echo ran"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert gone.returncode == ORPHAN_EXIT
    assert gone.stdout == ""
    here = subprocess.run(
        [*death_signal_prefix(os.getpid()), "sh", "-c", "echo ran"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert (here.returncode, here.stdout) == (0, "ran\n")

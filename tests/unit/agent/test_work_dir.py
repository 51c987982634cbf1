"""The agent's working directory: bootstrap, SDS socket directory, reachable by Envoy's UID."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from meshpilot.agent.agent import BOOTSTRAP_FILE, blocking_directory, prepare_work_dir
from meshpilot.agent.options import SDS_SOCKET_PATH, AgentOptions
from meshpilot.errors import MeshpilotError
from meshpilot.model.proxy import ProxyType

OPTIONS = AgentOptions(proxy_type=ProxyType.SIDECAR, pod_name="p", namespace="ns")


def test_bootstrap_and_sds_directory(tmp_path: Path) -> None:
    config = prepare_work_dir(OPTIONS, tmp_path / "w", None)
    assert config == tmp_path / "w" / BOOTSTRAP_FILE
    assert json.loads(config.read_text())["node"]["id"].startswith("sidecar~127.0.0.1~p.ns~")
    assert (tmp_path / "w" / SDS_SOCKET_PATH).parent.is_dir()


def test_blocking_directory() -> None:
    root = Path(tempfile.mkdtemp(prefix="meshpilot-test-"))
    try:
        root.chmod(0o755)
        inner = root / "a" / "b"
        inner.mkdir(parents=True)
        assert blocking_directory(inner, 54321, 54321) is None
        (root / "a").chmod(0o700)
        assert blocking_directory(inner, 54321, 54321) == root / "a"
        assert blocking_directory(inner, os.getuid(), os.getgid()) is None  # the owner
        (root / "a").chmod(0o711)
        assert blocking_directory(inner, 54321, 54321) is None
    finally:
        shutil.rmtree(root)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to the proxy UID needs root")
def test_proxy_uid_owns_the_tree_and_must_reach_it(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="meshpilot-test-"))
    try:
        root.chmod(0o755)
        config = prepare_work_dir(OPTIONS, root / "w", (1337, 1337))
        assert config.stat().st_uid == 1337 and (root / "w").stat().st_uid == 1337
        assert (root / "w" / SDS_SOCKET_PATH).parent.stat().st_uid == 1337
        root.chmod(0o700)
        with pytest.raises(MeshpilotError, match="cannot reach its working directory"):
            prepare_work_dir(OPTIONS, root / "w2", (1337, 1337))
    finally:
        root.chmod(0o755)
        shutil.rmtree(root)

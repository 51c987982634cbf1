"""A real three-member etcd cluster on loopback (Debian's etcd-server), for failover tests:
its members on free ports, each with its data in the test's tmp_path; which one leads is
asked of etcd itself (the maintenance Status call, over its JSON gateway). Stopped at the
end of the test whatever happened.

    def test_x(etcd_cluster: EtcdCluster) -> None:
        store = EtcdStore(parse_etcd_url(etcd_cluster.url("/meshpilot")))
"""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.etcd_server import EtcdServer

__all__ = ["EtcdCluster", "etcd_cluster_fixture"]

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class EtcdCluster:
    members: list[EtcdServer]

    @classmethod
    def start(cls, root: Path, size: int = 3) -> EtcdCluster:
        members = [EtcdServer(root / f"etcd-{i}", name=f"m{i}") for i in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in members)
        cluster = cls(members)
        try:
            for member in members:
                member.initial_cluster = initial
                member.start(wait=False)  # a member is healthy once a quorum runs
            for member in members:
                member.wait_healthy()
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def url(self, prefix: str = "/meshpilot") -> str:
        return f"etcd://{','.join(m.endpoint for m in self.members)}{prefix}"

    def running(self) -> list[EtcdServer]:
        return [m for m in self.members if m.proc is not None and m.proc.poll() is None]

    def leader(self) -> EtcdServer | None:
        """The member that leads now, by the members' own account; None during an election."""
        for member in self.running():
            request = urllib.request.Request(
                f"http://{member.endpoint}/v3/maintenance/status", b"{}", method="POST"
            )
            try:
                with _OPENER.open(request, timeout=2) as reply:
                    status = json.loads(reply.read())
            except OSError:
                continue
            if status.get("leader") and status["leader"] == status["header"]["member_id"]:
                return member
        return None

    def kill(self, member: EtcdServer) -> None:
        assert member.proc is not None
        member.proc.send_signal(signal.SIGKILL)
        member.proc.wait(10)

    def stop(self) -> None:
        for member in self.members:
            member.stop()


@pytest.fixture(name="etcd_cluster")
def etcd_cluster_fixture(tmp_path: Path) -> Iterator[EtcdCluster]:
    cluster = EtcdCluster.start(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()

"""One pod's workload key is out of reach of every other pod's proxy (universal mode).

The demo mesh (real netns pods, capture, real Envoys, the CA in `meshpilot discovery`): each
proxy runs as a user of its own, and its agent's SDS socket lives in a directory only that
user may enter. As another pod's proxy (its Envoy's UID and GID, inside its network
namespace) the probe asks the victim's socket for `default`, by its path and through
/proc/<pid>/root of the victim's Envoy (what a private mount namespace would leave open to
a process of the same UID): both are refused, while the victim's own proxy user gets the
key its Envoy holds.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.agent_harness import process_ids
from tests.e2e.live_mesh import running_mesh
from tests.e2e.secure_mesh import workload_key

from meshpilot.agent.options import sds_socket_path
from meshpilot.demo.mesh import DemoMesh
from meshpilot.demo.pods import NOBODY
from meshpilot.demo.topology import INGRESS_POD
from meshpilot.runtime.pod import RunAs

pytestmark = pytest.mark.envoy

PROBE = Path(__file__).with_name("sds_probe.py")
VICTIM = "ratings-v1"
VICTIM_ID = "spiffe://cluster.local/ns/default/sa/ratings"
# What a refused connect says: no such path visible, no permission, or nobody listening.
REFUSED = {"ENOENT", "EACCES", "EPERM", "ECONNREFUSED"}


@pytest.fixture(scope="module")
def mesh() -> Iterator[DemoMesh]:
    yield from running_mesh()


def envoy_user(mesh: DemoMesh, pod: str) -> RunAs:
    """The UID and GID the pod's Envoy runs as."""
    uid, gid = process_ids(mesh.envoy_pid(pod))
    return RunAs(uid, gid)


def probe(mesh: DemoMesh, pod: str, user: RunAs, socket: str) -> dict[str, Any]:
    """sds_probe.py inside `pod`'s network namespace, as `user`."""
    result = mesh.pods[pod].exec([sys.executable, str(PROBE), socket], run_as=user, timeout=20)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_every_proxy_runs_as_a_user_of_its_own(mesh: DemoMesh) -> None:
    users = {pod: envoy_user(mesh, pod) for pod in mesh.agent_dirs}
    assert INGRESS_POD in users and VICTIM in users
    uids = [user.uid for user in users.values()]
    assert len(set(uids)) == len(uids), f"proxies share a UID: {users}"
    assert 0 not in uids, f"a proxy runs as root: {users}"
    for pod, user in users.items():  # its SDS socket's directory is its own, and private
        directory = sds_socket_path(mesh.agent_dirs[pod]).parent.stat()
        assert (directory.st_uid, directory.st_mode & 0o777) == (user.uid, 0o700), pod


def test_the_pods_own_proxy_gets_its_key(mesh: DemoMesh) -> None:
    socket = str(sds_socket_path(mesh.agent_dirs[VICTIM]))
    answer = probe(mesh, VICTIM, envoy_user(mesh, VICTIM), socket)
    assert answer == {
        "sans": [VICTIM_ID],
        "key_sha256": hashlib.sha256(workload_key(mesh, VICTIM)).hexdigest(),
    }
    status, certs = mesh.admin(VICTIM, "/certs")  # and its Envoy holds that certificate
    assert status == 200 and VICTIM_ID in certs


@pytest.mark.parametrize(
    ("attacker", "as_app"), [("client", False), (INGRESS_POD, False), ("client", True)]
)
def test_another_pods_proxy_cannot_fetch_the_key(
    mesh: DemoMesh, attacker: str, as_app: bool
) -> None:
    """As another pod's proxy (a sidecar's, a gateway's), or as its app (nobody)."""
    socket = str(sds_socket_path(mesh.agent_dirs[VICTIM]))
    victim_envoy = mesh.envoy_pid(VICTIM)
    user = NOBODY if as_app else envoy_user(mesh, attacker)
    for path in (socket, f"/proc/{victim_envoy}/root{socket}"):
        answer = probe(mesh, attacker, user, path)
        assert answer.get("error") in REFUSED, f"{attacker} as {user} via {path}: {answer}"


def test_a_gateways_proxy_user_may_bind_low_ports(mesh: DemoMesh) -> None:
    """Gateways run Envoy as their pod's user, not root: Gateway servers on 80 or 443 still
    bind (no port is privileged in a gateway's namespace, as in Istio's gateway pods)."""
    bind = "import socket; socket.socket().bind(('0.0.0.0', 443)); print('bound')"
    gateway = mesh.pods[INGRESS_POD]
    result = gateway.exec([sys.executable, "-c", bind], run_as=envoy_user(mesh, INGRESS_POD))
    assert (result.returncode, result.stdout.strip()) == (0, "bound"), result.stderr

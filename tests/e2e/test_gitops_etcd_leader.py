"""Two `meshpilot gitops serve --store etcd://...` replicas on a real etcd: one leads the
controller (/debug/leaderz on both says which), the other serves the API and stands by.
The leader dies -> the standby takes over and syncs the next commit, once. The leader is
paused -> the standby takes over and syncs; thawed, the old leader's writes are refused by
the fence and it exits: the commit has one history entry."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401
from tests.gitops_fixtures import GitRepo, make_repo

from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.store.etcd import parse_etcd_url
from meshpilot.store.etcd.backend import EtcdStore
from meshpilot.store.etcd.codec import etcd_key

MESHPILOT = Path(sys.executable).parent / "meshpilot"
APP = ConfigKey(Kind.APPLICATION, "argocd", "shop")
VS = ConfigKey(Kind.VIRTUAL_SERVICE, "shop", "reviews")
SVC = ConfigKey(Kind.SERVICE, "shop", "reviews")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def service(port: int) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata:
  name: reviews
  annotations: {{argocd.argoproj.io/sync-wave: "0"}}
spec:
  ports:
  - {{port: {port}, name: http}}
"""


def virtual_service(v1: int) -> str:
    return f"""\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  annotations: {{argocd.argoproj.io/sync-wave: "1"}}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {{host: reviews}}
      weight: {v1}
    - destination: {{host: reviews.other.svc.cluster.local}}
      weight: {100 - v1}
"""


def wait_for(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def post(url: str, body: dict[str, Any], token: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        with _OPENER.open(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def get(url: str, token: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with _OPENER.open(request, timeout=10) as reply:
        return json.loads(reply.read())


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[str]
    api: str

    def leaderz(self) -> dict[str, Any]:
        with _OPENER.open(self.api + "/debug/leaderz", timeout=2) as reply:
            return dict(json.loads(reply.read()))


@dataclass
class Cluster:
    url: str
    repo: GitRepo
    reader: EtcdStore
    start: Callable[[str], Replica]
    work: Path

    def login(self, replica: Replica) -> str:
        """A session of the admin on `replica` (the password the first replica made)."""
        found = sorted(self.work.glob("state-*/server/initial-admin-password"))
        assert found, "no initial admin password"
        body = {"username": "admin", "password": found[0].read_text().strip()}
        status, answer = post(replica.api + "/api/v1/session", body)
        assert status == 200, answer
        return str(answer["token"])

    def get(self, key: ConfigKey) -> dict[str, Any] | None:
        self.reader.refresh()
        return self.reader.manifest(key)

    def history(self) -> list[dict[str, Any]]:
        app = self.get(APP) or {}
        return list(app.get("status", {}).get("history") or [])

    def weight(self) -> int | None:
        vs = self.get(VS)
        return None if vs is None else int(vs["spec"]["http"][0]["route"][0]["weight"])


@pytest.fixture
def cluster(etcd: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    register_gitops_kinds()
    url = etcd.url("/meshpilot")
    repo = make_repo(
        tmp_path / "repo", {"mesh/svc.yaml": service(9080), "mesh/vs.yaml": virtual_service(100)}
    )
    app = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "shop", "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": str(repo.path), "path": "mesh", "targetRevision": "main"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": "shop"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
    }
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(app))
    subprocess.run([str(MESHPILOT), "apply", "-f", str(tmp_path / "app.yaml"), "--store", url],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    started: list[Replica] = []

    def start(name: str) -> Replica:
        args = [str(MESHPILOT), "gitops", "serve", "--store", url, "--listen", "127.0.0.1:0",
                "--app-resync", "1s", "--self-heal-timeout", "0s", "--lease-ttl", "2",
                "--state-dir", str(tmp_path / f"state-{name}")]  # fmt: skip
        proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"API (http://127\.0\.0\.1:\d+)", line)
        assert match, line + proc.stderr.read()
        replica = Replica(name, proc, match.group(1))
        started.append(replica)
        return replica

    try:
        yield Cluster(url, repo, EtcdStore(parse_etcd_url(url)), start, tmp_path)
    finally:
        for replica in started:
            if replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGCONT)
                replica.proc.kill()
            replica.proc.wait(timeout=10)


def _leader(a: Replica, b: Replica) -> tuple[Replica, Replica]:
    def settled() -> tuple[Replica, Replica] | None:
        za, zb = a.leaderz(), b.leaderz()
        if za["leading"] != zb["leading"] and za["leader"] == zb["leader"] != "":
            return (a, b) if za["leading"] else (b, a)
        return None

    found: tuple[Replica, Replica] = wait_for(settled, "one leader, named by both")
    return found


def test_the_standby_takes_over_a_killed_leader_and_syncs_once(cluster: Cluster) -> None:
    a, b = cluster.start("a"), cluster.start("b")
    leader, standby = _leader(a, b)
    assert standby.leaderz()["leader"].endswith(f"(API {leader.api})")
    wait_for(lambda: len(cluster.history()) == 1, "the first sync's history entry")
    # The standby serves reads, and refuses what the controller does, naming the leader.
    token = cluster.login(standby)
    apps = standby.api + "/api/v1/applications"
    wait_for(lambda: get(apps + "/argocd/shop/history", token)["history"], "history read")
    status, answer = post(apps + "/argocd/shop/sync", {"prune": True}, token)
    assert status == 503, answer
    assert f"stands by; the leader is {leader.leaderz()['identity']}" in answer["message"]
    first = cluster.history()[0]["revision"]
    leader.proc.kill()
    leader.proc.wait()
    killed = time.monotonic()
    wait_for(lambda: standby.leaderz()["leading"], "the standby leads", timeout=10)
    print(f"standby leads {time.monotonic() - killed:.2f} s after the leader died")
    commit = cluster.repo.commit({"mesh/vs.yaml": virtual_service(50)}, "50/50")
    wait_for(lambda: cluster.weight() == 50, "the new commit synced by the new leader")
    wait_for(lambda: len(cluster.history()) == 2, "its history entry")
    time.sleep(2.5)  # more resyncs: nothing is synced again
    assert [h["revision"] for h in cluster.history()] == [first, commit]


def test_a_paused_leader_is_fenced_and_the_commit_is_synced_once(cluster: Cluster) -> None:
    """The leader is frozen (a long GC pause, a stalled VM) before it sees a commit; its
    lease expires, the standby takes over and syncs the commit. Thawed, the old leader
    acts on what it knew (the app out of sync): the fence refuses its writes, it exits,
    and the commit has one history entry."""
    a, b = cluster.start("a"), cluster.start("b")
    leader, standby = _leader(a, b)
    wait_for(lambda: len(cluster.history()) == 1, "the first sync's history entry")
    leader.proc.send_signal(signal.SIGSTOP)
    commit = cluster.repo.commit(
        {"mesh/svc.yaml": service(9090), "mesh/vs.yaml": virtual_service(30)}, "two waves"
    )
    wait_for(lambda: standby.leaderz()["leading"], "the standby leads", timeout=10)
    wait_for(lambda: cluster.weight() == 30, "the commit synced by the new leader")
    wait_for(lambda: [h["revision"] for h in cluster.history()][-1:] == [commit], "history")
    leader.proc.send_signal(signal.SIGCONT)
    assert leader.proc.wait(timeout=20) != 0  # lost its lease: stops writing and exits
    assert leader.proc.stderr is not None
    assert "lost the leadership" in leader.proc.stderr.read()
    time.sleep(2.5)
    revisions = [h["revision"] for h in cluster.history()]
    assert revisions.count(commit) == 1, revisions
    assert cluster.weight() == 30


def test_the_leader_killed_mid_sync_the_other_finishes_it_once(cluster: Cluster) -> None:
    """The automated sync of a commit is in the store as Running before its first write:
    the leader is killed as soon as it shows, the standby takes over, finds the operation
    Running with nobody running it, runs it to its end and records it once."""
    a, b = cluster.start("a"), cluster.start("b")
    leader, standby = _leader(a, b)
    wait_for(lambda: len(cluster.history()) == 1, "the first sync's history entry")
    commit = cluster.repo.commit(
        {"mesh/svc.yaml": service(9090), "mesh/vs.yaml": virtual_service(30)}, "two waves"
    )

    def phase() -> str:
        app = cluster.get(APP) or {}
        return str(app.get("status", {}).get("operationState", {}).get("phase", ""))

    raw = etcd_key(cluster.reader.prefix, APP)  # read alone: the operation lasts a moment

    def running() -> bool:
        kvs = cluster.reader.client.get_many([raw]).kvs
        return bool(kvs) and b'"phase":"Running"' in kvs[0].value

    deadline = time.monotonic() + 20
    while not running():
        assert time.monotonic() < deadline, "the operation never showed in the store"
        time.sleep(0.002)
    leader.proc.kill()
    leader.proc.wait()
    interrupted = phase() == "Running" and commit not in [h["revision"] for h in cluster.history()]
    wait_for(lambda: standby.leaderz()["leading"], "the standby leads", timeout=10)
    wait_for(lambda: phase() == "Succeeded" and cluster.weight() == 30, "the sync finished")
    wait_for(lambda: [h["revision"] for h in cluster.history()][-1:] == [commit], "history")
    time.sleep(2.5)  # more resyncs: nothing is synced or recorded again
    revisions = [h["revision"] for h in cluster.history()]
    assert revisions.count(commit) == 1, revisions
    print(f"killed before the operation was recorded: {interrupted}")

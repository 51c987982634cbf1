"""GitOps end to end: a commit reaches Envoy, and rollback returns it.

Everything is real: a git repository made from examples/gitops/mesh-config, the live
DirectoryStore written by the `meshpilot` verbs (run in process through the CLI, as a user
types them), a `meshpilot discovery --store DIR` subprocess serving that store, and a real
Envoy (a client sidecar, interceptionMode NONE) connected to it. Two Python HTTP servers on
127.0.0.2 and 127.0.0.3 answer "v1" and "v2"; their Pods carry no sidecar labels, so the
client talks plaintext to them (auto-mTLS has nothing to upgrade).

- `gitops sync` puts the 80/20 VirtualService in Envoy's route (ACKed) and traffic splits so;
  a commit moving to 50/50 plus a sync reaches Envoy with no NACK; `gitops rollback APP 0`
  brings 80/20 back; a bad commit (a negative weight) fails the sync with file, line and
  field, and Envoy keeps 80/20;
- a hand `meshpilot apply` of a changed VirtualService reaches Envoy and makes
  `gitops get --refresh` say OutOfSync; then `gitops serve` with selfHeal undoes it, and a
  push webhook syncs a new commit at once.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from tests.conftest import REPO
from tests.e2e.ads_harness import (
    EnvoyProcess,
    StoreDiscovery,
    http_get,
    istio_metadata,
    wait_for,
)
from tests.e2e.workload_sds import WorkloadSds
from tests.gitops_fixtures import GitRepo, make_repo

from meshpilot.cli.main import cli
from meshpilot.runtime.ports import free_port

pytestmark = pytest.mark.envoy

EXAMPLE = REPO / "examples" / "gitops"
MESHPILOT = Path(sys.executable).parent / "meshpilot"
EXAMPLE_PORT = "9080"
EXAMPLE_REPOS = "file:///tmp/meshpilot-gitops"
HOST = "web.shop.svc.cluster.local"
VS_FILE = "mesh/virtual-service.yaml"


def meshpilot(*args: str) -> tuple[int, str]:
    """One `meshpilot` command line, in process; (exit status, stdout + stderr)."""
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


# ---------------------------------------------------------------- backends


class _Backend(ThreadingHTTPServer):
    daemon_threads = True


def _handler(body: bytes) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def _backends() -> tuple[int, list[_Backend]]:
    """A port free on 127.0.0.1 (the client's outbound listener) with v1 on 127.0.0.2 and
    v2 on 127.0.0.3 bound to it."""
    for _ in range(10):
        port, servers = free_port(), []
        try:
            for ip, name in (("127.0.0.2", b"v1"), ("127.0.0.3", b"v2")):
                servers.append(_Backend((ip, port), _handler(name)))
            return port, servers
        except OSError:
            for server in servers:
                server.server_close()
    raise AssertionError("no port free on 127.0.0.1-3")


# ---------------------------------------------------------------- the world


@dataclass
class GitopsMesh:
    tmp: Path
    port: int
    backends: list[_Backend]
    repo: GitRepo
    store: Path
    discovery: StoreDiscovery
    envoy: EnvoyProcess
    processes: list[Any]  # everything started, stopped by the fixture

    @property
    def store_args(self) -> list[str]:
        return ["--store", str(self.store)]

    @property
    def repo_url(self) -> str:
        return f"file://{self.repo.path}"

    def example(self, relative: str) -> str:
        """An example file as this test uses it: its port and repository URLs."""
        text = (EXAMPLE / relative).read_text().replace(EXAMPLE_PORT, str(self.port))
        return text.replace(EXAMPLE_REPOS, f"file://{self.tmp}")

    def vs(self, v1: int, v2: int) -> str:
        text = self.example(f"mesh-config/{VS_FILE}")
        return text.replace("weight: 80", f"weight: {v1}").replace("weight: 20", f"weight: {v2}")

    def weights(self) -> dict[str, int]:
        """{subset: weight} of Envoy's route to web (from Envoy's own config_dump)."""
        for config in self.envoy.config_dump()["configs"]:
            if not config["@type"].endswith("RoutesConfigDump"):
                continue
            for dynamic in config.get("dynamic_route_configs", []):
                route_config = dynamic["route_config"]
                if route_config["name"] != str(self.port):
                    continue
                for vhost in route_config.get("virtual_hosts", []):
                    if vhost["name"] == f"{HOST}:{self.port}":
                        route = vhost["routes"][0]["route"]
                        clusters = route.get("weighted_clusters", {}).get("clusters", [])
                        return {c["name"].split("|")[2]: int(c["weight"]) for c in clusters}
        return {}

    def acked(self) -> bool:
        """Every type the client watches is ACKed at the latest push, with no error."""
        entries = [e for e in self.discovery.json("/debug/syncz") if e["proxy"] == "client.shop"]
        if not entries:
            return False
        types = entries[0]["types"]
        return all(w["status"] == "SYNCED" and not w["last_error"] for w in types.values())

    def wait_weights(self, v1: int, v2: int, timeout: float = 10) -> float:
        """Until Envoy routes v1/v2 so and has ACKed it; seconds waited."""
        started = time.monotonic()
        wanted = {"v1": v1, "v2": v2}
        wait_for(lambda: self.weights() == wanted, f"Envoy route weights {wanted}", timeout)
        wait_for(self.acked, "the client ACKed every type", timeout)
        assert not self.envoy.rejected_updates(), self.envoy.log_text()[-2000:]
        return time.monotonic() - started

    def traffic(self, requests: int = 200) -> Counter[str]:
        host = f"{HOST}:{self.port}"
        answers: Counter[str] = Counter()
        for _ in range(requests):
            status, body = http_get(f"http://127.0.0.1:{self.port}/", {"Host": host}, timeout=2)
            answers[body if status == 200 else f"{status} {body}"] += 1
        return answers

    def commit_vs(self, v1: int, v2: int) -> str:
        return self.repo.commit({VS_FILE: self.vs(v1, v2)}, f"web {v1}/{v2}")

    def app_status(self) -> dict[str, Any]:
        code, out = meshpilot("gitops", "get", "web", "--refresh", "-o", "json", *self.store_args)
        assert code == 0, out
        status: dict[str, Any] = json.loads(out)["status"]
        return status


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[GitopsMesh]:
    port, backends = _backends()
    for server in backends:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    sds = WorkloadSds(tmp_path / "sds.sock").start()
    started: list[Any] = []
    try:
        world = _world(tmp_path, port, backends, started)
        yield world
        assert not world.envoy.rejected_updates(), "Envoy rejected an update (NACK)"
        rejects = {k: v for k, v in world.discovery.rejects().items() if v}
        assert not rejects, f"the control plane saw NACKs: {rejects}"
    finally:
        for item in reversed(started):
            if isinstance(item, subprocess.Popen):
                _stop(item)
            else:
                item.stop()
        sds.stop()
        for server in backends:
            server.shutdown()
            server.server_close()


def _world(tmp: Path, port: int, backends: list[_Backend], started: list[Any]) -> GitopsMesh:
    def text(relative: str) -> str:
        content = (EXAMPLE / relative).read_text().replace(EXAMPLE_PORT, str(port))
        return content.replace(EXAMPLE_REPOS, f"file://{tmp}")

    files = {
        str(p.relative_to(EXAMPLE / "mesh-config")): text(str(p.relative_to(EXAMPLE)))
        for p in sorted((EXAMPLE / "mesh-config").rglob("*.yaml"))
    }
    repo = make_repo(tmp / "mesh-config", files)
    (tmp / "argocd").mkdir()
    for name in ("project.yaml", "application.yaml"):
        (tmp / "argocd" / name).write_text(text(f"argocd/{name}"))
    store = tmp / "live"
    code, out = meshpilot(
        "apply", "-f", str(EXAMPLE / "workloads.yaml"), "-f", str(tmp / "argocd"),
        "--store", str(store),
    )  # fmt: skip
    assert code == 0, out
    discovery = StoreDiscovery([], tmp, debounce="50ms", store=store)
    started.append(discovery)
    discovery.start()
    node = "sidecar~127.0.0.1~client.shop~shop.svc.cluster.local"
    metadata = istio_metadata("shop", {"app": "client"}, interception="NONE")
    envoy = EnvoyProcess("client", node, metadata, tmp, discovery)
    started.append(envoy)
    envoy.start().wait_live()
    return GitopsMesh(tmp, port, backends, repo, store, discovery, envoy, started)


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the tests


def test_commit_reaches_envoy_rollback_returns_it_bad_commit_changes_nothing(
    mesh: GitopsMesh,
) -> None:
    assert mesh.weights() == {}, "nothing is synced yet"
    code, out = meshpilot("gitops", "sync", "web", *mesh.store_args)
    assert code == 0, out
    assert "Phase:              Succeeded" in out
    mesh.wait_weights(80, 20)
    answers = mesh.traffic()
    assert set(answers) == {"v1", "v2"} and 130 <= answers["v1"] <= 190, answers

    mesh.commit_vs(50, 50)
    code, out = meshpilot("gitops", "sync", "web", *mesh.store_args)
    assert code == 0, out
    took = mesh.wait_weights(50, 50)
    assert took < 5, f"the commit reached Envoy after {took:.1f}s"
    answers = mesh.traffic()
    assert set(answers) == {"v1", "v2"} and 70 <= answers["v1"] <= 130, answers

    code, out = meshpilot("gitops", "history", "web", *mesh.store_args)
    assert code == 0 and [line.split()[0] for line in out.splitlines()[1:]] == ["0", "1"], out
    code, out = meshpilot("gitops", "rollback", "web", "0", *mesh.store_args)
    assert code == 0, out
    mesh.wait_weights(80, 20)

    pushes = mesh.discovery.pushes("rds")
    mesh.commit_vs(50, -50)
    code, out = meshpilot("gitops", "sync", "web", *mesh.store_args)
    assert code == 1, out
    assert "Phase:              Failed" in out
    assert re.search(
        rf"{VS_FILE}:\d+: .*spec\.http\[0\]\.route\[1\]\.weight: weight -50 must not be negative",
        out,
    ), out
    time.sleep(0.5)  # longer than the store poll plus the debounce: nothing follows
    assert mesh.weights() == {"v1": 80, "v2": 20}
    assert mesh.discovery.pushes("rds") == pushes, "a failed sync pushes nothing"
    status = mesh.app_status()
    assert status["operationState"]["phase"] == "Failed"


def test_hand_edit_is_drift_and_serve_heals_it_and_syncs_on_webhook(mesh: GitopsMesh) -> None:
    code, out = meshpilot("gitops", "sync", "web", *mesh.store_args)
    assert code == 0, out
    mesh.wait_weights(80, 20)
    assert mesh.app_status()["sync"]["status"] == "Synced"

    hand = mesh.tmp / "hand-edit.yaml"
    hand.write_text(mesh.vs(90, 10).replace("name: web", "name: web\n  namespace: shop", 1))
    code, out = meshpilot("apply", "-f", str(hand), *mesh.store_args)
    assert code == 0, out
    mesh.wait_weights(90, 10)  # the live store is what the mesh serves
    status = mesh.app_status()
    assert status["sync"]["status"] == "OutOfSync"
    drifted = {r["kind"]: r["status"] for r in status["resources"]}
    assert drifted == {
        "Service": "Synced",
        "DestinationRule": "Synced",
        "VirtualService": "OutOfSync",
    }

    # Automated sync with selfHeal, under the controller.
    app = yaml.safe_load(mesh.example("argocd/application.yaml"))
    app["spec"]["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}}
    (mesh.tmp / "argocd" / "application.yaml").write_text(yaml.safe_dump(app))
    code, out = meshpilot("apply", "-f", str(mesh.tmp / "argocd"), *mesh.store_args)
    assert code == 0, out
    base = _serve(mesh)
    healed = mesh.wait_weights(80, 20, timeout=15)

    sha = mesh.commit_vs(50, 50)
    body = json.dumps({
        "ref": "refs/heads/main",
        "after": sha,
        "repository": {"clone_url": mesh.repo_url, "default_branch": "main"},
    }).encode()  # fmt: skip
    pushed = time.monotonic()
    status_code, answer = _post(base + "/api/webhook", body, {"X-GitHub-Event": "push"})
    assert (status_code, answer) == (200, {"refreshed": ["argocd/web"]})
    mesh.wait_weights(50, 50)
    after_webhook = time.monotonic() - pushed
    assert after_webhook < 5, f"the webhook's commit reached Envoy after {after_webhook:.1f}s"

    code, out = meshpilot("apply", "-f", str(hand), *mesh.store_args)
    assert code == 0, out
    edited = _live_vs(mesh)["metadata"]["resourceVersion"]
    # selfHeal writes Git's version back (Envoy may or may not see the edit in between).
    wait_for(lambda: _live_vs(mesh)["metadata"]["resourceVersion"] != edited, "selfHeal", 15)
    live = _live_vs(mesh)["spec"]["http"][0]["route"]
    assert [r["weight"] for r in live] == [50, 50]
    mesh.wait_weights(50, 50)
    final = mesh.app_status()["sync"]
    assert (final["status"], final["revision"]) == ("Synced", sha)
    print(f"selfHeal after start {healed:.2f}s, webhook to Envoy {after_webhook:.2f}s")


def _live_vs(mesh: GitopsMesh) -> dict[str, Any]:
    code, out = meshpilot(
        "get", "virtualservice", "web", "-n", "shop", "-o", "json", *mesh.store_args
    )
    assert code == 0, out
    manifest: dict[str, Any] = json.loads(out)
    return manifest


def _serve(mesh: GitopsMesh) -> str:
    """`meshpilot gitops serve` as a subprocess (stopped by the fixture); its API URL."""
    proc = subprocess.Popen(
        [str(MESHPILOT), "gitops", "serve", *mesh.store_args, "--listen", "127.0.0.1:0",
         "--self-heal-timeout", "0s"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    mesh.processes.append(proc)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    match = re.search(r"API (http://127\.0\.0\.1:\d+)", line)
    assert match, line
    # Keep reading its log so that the pipe never fills.
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return match.group(1)


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(url, body, headers, method="POST")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())

"""B8/B9 for the GitOps controller, one run:

    python bench/gitops.py [--apps 100] [--objects 5] [--drifts 20] [--pushes 10]
                           [--all-commits 1] [--json FILE]

World: a local git repo with N app directories (Service, DestinationRule, VirtualService,
and ConfigMaps up to --objects each), a real DirectoryStore, N Applications (automated,
prune, selfHeal,
`manifest-generate-paths: .`), the controller in-process (self-heal timeout 0, resync 5 s).
- drift: another process's store handle rewrites one app's VirtualService (an
  out-of-band `apply`, bench/gitops_writer.py);
  timed from the store change event the controller receives to (a) the app's status
  written OutOfSync and (b) the VirtualService restored (self-heal complete);
- idle: CPU seconds (ours + git children) per reconcile of all N unchanged apps;
- webhook: commit to one app's directory, POST a GitHub push payload to /api/webhook,
  time to the app Synced at the new commit; baseline in the same run: `git fetch` of that
  commit into a warm mirror + render of the same path with an empty manifest cache;
  with `--envoys N` (default 0: off), `meshpilot discovery --store` serves the store to N
  real sidecar Envoys (bench/gitops_envoys.py) and each push is also timed to every Envoy
  having ACKed a route with the commit's weights (discovery's /debug/syncz `acked_at`;
  `--envoy-debounce` is discovery's --debounce, 100ms as Istio's PILOT_DEBOUNCE_AFTER);
- all-apps commit: one commit changing every app's VirtualService, one push webhook
  naming every changed file; time until every app is Synced at that commit.
Each phase records the load average when it ends (the box may be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.gitops_fixtures import make_repo

from bench.gitops_envoys import Fleet
from bench.gitops_writer import StoreWriter
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.config.yaml_source import RawDocument
from meshpilot.gitops.controller import CachingRepoService, Controller, ControllerSettings
from meshpilot.gitops.model import register_gitops_kinds
from meshpilot.gitops.render import Renderer, RendererConfig, RenderRequest
from meshpilot.gitops.repo import RepoService
from meshpilot.gitops.server import GitopsServer
from meshpilot.store.base import ChangeEvent
from meshpilot.store.directory import DirectoryStore


def files_for(i: int, weight: int, objects: int = 5) -> dict[str, str]:
    """Service, DestinationRule, VirtualService and `objects - 3` ConfigMaps."""
    name = f"svc{i}"
    files = {
        f"apps/a{i}/svc.yaml": f"apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\n"
        f"spec:\n  ports: [{{port: 80, name: http}}]\n",
        f"apps/a{i}/dr.yaml": f"apiVersion: networking.istio.io/v1\nkind: DestinationRule\n"
        f"metadata: {{name: {name}}}\nspec:\n  host: {name}\n",
        f"apps/a{i}/vs.yaml": vs_file(i, weight),
    }
    for c in range(1, max(objects - 3, 0) + 1):
        files[f"apps/a{i}/cm{c}.yaml"] = (
            f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{c}-{i}}}\ndata: {{k: v}}\n"
        )
    return files


def vs_file(i: int, weight: int) -> str:
    ns, name = f"ns{i}", f"svc{i}"
    return (
        f"apiVersion: networking.istio.io/v1\nkind: VirtualService\n"
        f"metadata: {{name: {name}}}\nspec:\n  hosts: [{name}]\n  http:\n  - route:\n"
        f"    - destination: {{host: {name}}}\n      weight: {weight}\n"
        f"    - destination: {{host: {name}.{ns}.svc.cluster.local}}\n"
        f"      weight: {100 - weight}\n"
    )


def app(i: int, repo: str) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": f"a{i}", "namespace": "argocd",
                     "annotations": {"argocd.argoproj.io/manifest-generate-paths": "."}},
        "spec": {
            "project": "default",
            "source": {"repoURL": repo, "path": f"apps/a{i}", "targetRevision": "main"},
            "destination": {"server": "https://kubernetes.default.svc", "namespace": f"ns{i}"},
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
    }  # fmt: skip


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p * (len(values) - 1)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    register_gitops_kinds()
    tmp = Path(tempfile.mkdtemp(prefix="bench-gitops-"))
    files: dict[str, str] = {}
    for i in range(args.apps):
        files.update(files_for(i, 100, args.objects))
    repo = make_repo(tmp / "repo", files)
    store = DirectoryStore(tmp / "store", poll_interval=0.02)
    other = StoreWriter(tmp / "store")
    renderer = Renderer(CachingRepoService(tmp / "cache"), RendererConfig(temp_dir=tmp))
    settings = ControllerSettings(app_resync=args.resync, self_heal_timeout=0.0)
    controller = Controller(store, renderer, settings)
    server = GitopsServer(controller)
    marks: dict[str, float] = {}
    fleet = None
    if args.envoys:
        fleet = Fleet(tmp / "store", tmp / "envoys", args.envoys, args.envoy_debounce)
        fleet.keep_logs = Path(args.envoy_logs) if args.envoy_logs else None
    task = asyncio.create_task(controller.run())
    try:
        port = await server.start("127.0.0.1", 0)
        return await _run(args, tmp, repo, store, other, renderer, controller, port, marks, fleet)
    finally:
        await server.stop()
        controller.stop()
        await task
        other.close()
        if fleet is not None:
            fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def _run(
    args: argparse.Namespace,
    tmp: Path,
    repo: Any,
    store: DirectoryStore,
    other: StoreWriter,
    renderer: Renderer,
    controller: Controller,
    port: int,
    marks: dict[str, float],
    fleet: Fleet | None,
) -> dict[str, Any]:

    def on_change(event: ChangeEvent) -> None:  # in the thread that saw the write
        # Runs inside every store write of the controller: read the typed object (a
        # manifest would be a deep copy of the whole Application, status and all).
        now = time.monotonic()
        for key in event.keys:
            if key.kind is Kind.APPLICATION:
                obj = store.get(key)
                sync = obj.model.status.sync if obj is not None else None
                status = str(sync.status) if sync is not None else None
                marks.setdefault(f"{key.name}:{status}:{sync.revision if sync else None}", now)
            else:
                marks.setdefault(f"obj:{key.name}:{store.snapshot().version}", now)
                marks[f"last:{key.kind}:{key.namespace}/{key.name}"] = now
                marks.setdefault(f"first:{key.kind}:{key.namespace}/{key.name}", now)

    store.subscribe(on_change)
    await other.apply(
        [RawDocument("<bench>", i + 1, app(i, str(repo.path)), {}) for i in range(args.apps)]
    )
    head = repo.git("rev-parse", "HEAD")
    t0 = time.monotonic()
    synced = [f"a{i}:Synced:{head}" for i in range(args.apps)]
    await until_marked(marks, synced, "every app Synced at the first commit", 600, 0.05)
    first_sync = time.monotonic() - t0
    loads = {"initial_sync": load()}

    detect, heal = [], []
    for r in range(args.drifts):
        i = r % args.apps
        doc = {"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
               "metadata": {"name": f"svc{i}", "namespace": f"ns{i}"},
               "spec": {"hosts": [f"svc{i}"], "http": [{"route": [
                   {"destination": {"host": f"svc{i}"}, "weight": 50},
                   {"destination": {"host": f"svc{i}.ns{i}.svc.cluster.local"},
                    "weight": 50}]}]}}  # fmt: skip
        key = f"last:VirtualService:ns{i}/svc{i}"
        first = f"first:VirtualService:ns{i}/svc{i}"  # the drift's own event
        marks.pop(f"a{i}:OutOfSync:{head}", None)
        marks.pop(key, None)
        marks.pop(first, None)
        await other.apply([RawDocument("<drift>", 1, doc, {})])
        await until_marked(marks, [key], f"the drift's change event of svc{i}")
        event_at = marks[first]
        await until_marked(marks, [f"a{i}:OutOfSync:{head}"], f"a{i} OutOfSync")
        detect.append(marks[f"a{i}:OutOfSync:{head}"] - event_at)
        vs_key = ConfigKey(Kind.VIRTUAL_SERVICE, f"ns{i}", f"svc{i}")
        deadline = time.monotonic() + 60
        while True:
            live = store.manifest(vs_key) or {}
            # restored, and its change event delivered (the store publishes, then calls)
            if live["spec"]["http"][0]["route"][0].get("weight") == 100 and marks[key] > event_at:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: timed out waiting for a{i} to self-heal")
            await asyncio.sleep(0.005)
        heal.append(marks[key] - event_at)
        await asyncio.sleep(0.05)
    loads["drift"] = load()

    # idle: unchanged apps reconciled by the resync only
    await asyncio.sleep(args.resync + 1)
    repos = renderer.repos
    assert isinstance(repos, CachingRepoService)
    c0, n0, g0 = cpu(), controller.metrics.reconciles, repos.git_resolves
    await asyncio.sleep(2 * args.resync)
    idle_cpu = cpu() - c0
    idle_reconciles = controller.metrics.reconciles - n0
    idle_resolves = repos.git_resolves - g0
    per_pass = idle_cpu / max(idle_reconciles, 1) * args.apps
    loads["idle"] = load()

    webhook, baseline, envoys, pushed = [], [], [], []
    per_commit: dict[str, float] = {}
    if fleet is not None:  # started here so that the earlier phases run as before
        await asyncio.to_thread(fleet.start)
        await asyncio.to_thread(fleet.wait_synced)
        counts0 = await asyncio.to_thread(fleet.counts)
    mirror = RepoService(tmp / "baseline-cache")
    mirror.resolve(str(repo.path), "main")
    for r in range(args.pushes):
        i = (r * 7) % args.apps
        sha = repo.commit({f"apps/a{i}/vs.yaml": vs_file(i, 90 - r)})
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"clone_url": str(repo.path), "default_branch": "main"},
                           "commits": [{"modified": [f"apps/a{i}/vs.yaml"]}]}).encode()  # fmt: skip
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/webhook", body,
                                         {"X-GitHub-Event": "push"}, method="POST")  # fmt: skip
        before = await asyncio.to_thread(fleet.routes) if fleet is not None else {}
        wall, start = time.time(), time.monotonic()
        await asyncio.to_thread(_post, request, 10)
        await until_marked(marks, [f"a{i}:Synced:{sha}"], f"a{i} Synced at {sha}", step=0.002)
        webhook.append(marks[f"a{i}:Synced:{sha}"] - start)
        if fleet is not None:
            weights = [90 - r, 100 - (90 - r)]
            sent, acked = await asyncio.to_thread(fleet.wait_applied, before, i, weights)
            pushed.append(sent - wall)
            envoys.append(acked - wall)
        b0 = time.monotonic()
        commit = mirror.resolve(str(repo.path), "main")  # ls-remote + fetch
        fresh = Renderer(mirror, RendererConfig(temp_dir=tmp))
        fresh.render(RenderRequest(repo_url=str(repo.path), revision=commit, path=f"apps/a{i}"))
        baseline.append(time.monotonic() - b0)
        await asyncio.sleep(0.1)
    loads["webhook"] = load()
    if fleet is not None:  # the all-apps phase runs as before
        counts = await asyncio.to_thread(fleet.counts)
        per_commit = {k: round((v - counts0.get(k, 0)) / args.pushes, 2) for k, v in counts.items()}
        await asyncio.to_thread(fleet.stop)

    all_apps: list[float] = []
    all_apps_cpu: list[float] = []
    for r in range(args.all_commits):
        changed = {f"apps/a{i}/vs.yaml": vs_file(i, 70 - r) for i in range(args.apps)}
        sha = repo.commit(changed)
        body = json.dumps({"ref": "refs/heads/main", "after": sha,
                           "repository": {"clone_url": str(repo.path), "default_branch": "main"},
                           "commits": [{"modified": sorted(changed)}]}).encode()  # fmt: skip
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/webhook", body,
                                         {"X-GitHub-Event": "push"}, method="POST")  # fmt: skip
        start, c0 = time.monotonic(), cpu()
        await asyncio.to_thread(_post, request, 60)
        synced = [f"a{i}:Synced:{sha}" for i in range(args.apps)]
        await until_marked(marks, synced, f"every app Synced at {sha}", 600, 0.02)
        all_apps.append(max(marks[f"a{i}:Synced:{sha}"] for i in range(args.apps)) - start)
        all_apps_cpu.append(cpu() - c0)
    loads["all_apps_commit"] = load()

    return {
        "apps": args.apps,
        "objects_per_app": args.objects,
        "initial_sync_all_s": round(first_sync, 3),
        "drift_detect_ms_p50": round(statistics.median(detect) * 1000, 1),
        "drift_detect_ms_p99": round(pct(detect, 0.99) * 1000, 1),
        "self_heal_ms_p50": round(statistics.median(heal) * 1000, 1),
        "self_heal_ms_p99": round(pct(heal, 0.99) * 1000, 1),
        "drift_detect_ms_each": [round(x * 1000, 1) for x in detect],
        "self_heal_ms_each": [round(x * 1000, 1) for x in heal],
        "idle_cpu_s_per_pass_of_all_apps": round(per_pass, 3),
        "idle_reconciles_measured": idle_reconciles,
        "idle_git_resolves_measured": idle_resolves,
        "webhook_to_synced_ms_p50": round(statistics.median(webhook) * 1000, 1),
        "webhook_to_synced_ms_p99": round(pct(webhook, 0.99) * 1000, 1),
        "baseline_fetch_render_ms_p50": round(statistics.median(baseline) * 1000, 1),
        "ratio_p50": round(statistics.median(webhook) / statistics.median(baseline), 2),
        **_envoy_figures(envoys, pushed, baseline, args.envoys, args.envoy_debounce),
        **({"discovery_per_commit": per_commit} if fleet else {}),
        "all_apps_commit_to_all_synced_s": [round(x, 2) for x in all_apps],
        "all_apps_commit_cpu_s": [round(x, 2) for x in all_apps_cpu],
        "load_average_1m_after_phase": loads,
    }


def _envoy_figures(
    envoys: list[float], pushed: list[float], baseline: list[float], count: int, debounce: str
) -> dict[str, Any]:
    """B8 with real Envoys: webhook POST to every Envoy ACKed, and its ratio to the baseline;
    POST to discovery's first send of the route shows where the time goes."""
    if not envoys:
        return {}
    return {
        "envoys": count,
        "discovery_debounce": debounce,
        "webhook_to_route_sent_ms_p50": round(statistics.median(pushed) * 1000, 1),
        "webhook_to_all_envoys_acked_ms_p50": round(statistics.median(envoys) * 1000, 1),
        "webhook_to_all_envoys_acked_ms_p99": round(pct(envoys, 0.99) * 1000, 1),
        "envoys_ratio_p50": round(statistics.median(envoys) / statistics.median(baseline), 2),
        "envoys_ratio_p99": round(pct(envoys, 0.99) / pct(baseline, 0.99), 2),
        "webhook_to_route_sent_ms_each": [round(x * 1000) for x in pushed],
        "webhook_to_all_envoys_acked_ms_each": [round(x * 1000) for x in envoys],
    }


async def until_marked(
    marks: dict[str, float], keys: list[str], what: str, timeout: float = 60, step: float = 0.005
) -> None:
    """Wait until every key is marked; a run that would hang says what it waited for."""
    deadline = time.monotonic() + timeout
    while not all(key in marks for key in keys):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench: timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(step)


def _post(request: urllib.request.Request, timeout: float) -> bytes:
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        body: bytes = reply.read()
        return body


def load() -> float:
    return round(os.getloadavg()[0], 2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", type=int, default=100)
    parser.add_argument("--drifts", type=int, default=20)
    parser.add_argument("--objects", type=int, default=5, help="objects per app (>= 3)")
    parser.add_argument("--pushes", type=int, default=10)
    parser.add_argument("--all-commits", type=int, default=1, help="commits touching all apps")
    parser.add_argument("--resync", type=float, default=5.0)
    parser.add_argument("--envoys", type=int, default=0, help="real Envoys to time ACKs (0: off)")
    parser.add_argument(
        "--envoy-debounce", default="100ms", help="discovery's --debounce (Istio's default)"
    )
    parser.add_argument("--envoy-logs", default="", help="keep discovery's and Envoys' logs here")
    parser.add_argument("--json", default="")
    result = asyncio.run(main(parser.parse_args()))
    text = json.dumps(result, indent=2)
    print(text)
    if parser.parse_args().json:
        Path(parser.parse_args().json).write_text(text + "\n")

"""`meshpilot discovery` serving real Envoy over ADS, SotW and Delta.

Each test starts its own control plane (a subprocess on free ports, stopped with SIGTERM:
it must exit 0) and its own Envoys; the finalizers fail the test if any Envoy rejected an
update (its `update_rejected` stats) or the control plane recorded a NACK.

- every golden input (and examples/bookinfo) is ACKed by Envoy for every proxy of its golden
  cases, for every xDS type it subscribes to, and Envoy holds exactly the clusters and
  listeners the control plane says that proxy gets;
- traffic: a request through Envoy's listener reaches a Python server on 127.0.0.x; editing
  the VirtualService file reroutes it within 2 s, with no failed request and no Envoy
  restart; a burst of five edits is one push;
- a file made invalid YAML keeps the last good config serving and shows the error;
- a new Pod reaches callers through an EDS-only push.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.e2e.ads_harness import (
    SHORT_TYPES,
    DiscoveryProcess,
    EnvoyProcess,
    can_use_netns,
    istio_metadata,
    wait_for,
)
from tests.e2e.ads_mesh import NEW_POD, ROUTING, DiscoveryFactory, EnvoyFactory, Mesh, write
from tests.e2e.workload_sds import WorkloadSds
from tests.unit.golden.cases import GoldenCase, load_cases
from tests.wasm_module import golden_module

pytestmark = pytest.mark.envoy


@pytest.fixture(params=["sotw", "delta"])
def delta(request: pytest.FixtureRequest) -> bool:
    return bool(request.param == "delta")


@pytest.fixture
def start_discovery(tmp_path: Path) -> Iterator[DiscoveryFactory]:
    started: list[DiscoveryProcess] = []

    def start(paths: list[Path], **kw: Any) -> DiscoveryProcess:
        proc = DiscoveryProcess(paths, tmp_path, **kw)
        started.append(proc)
        return proc.start()

    yield start
    problems = []
    for proc in started:
        if proc.proc is not None and proc.proc.poll() is None:
            nacks = {k: v for k, v in proc.rejects().items() if v}
            errors = [
                (c["proxy"], t, w["last_error"])
                for c in proc.json("/debug/syncz")
                for t, w in c["types"].items()
                if w["last_error"]
            ]
            if nacks or errors:
                problems.append(f"control plane saw NACKs: {nacks} {errors}")
        status = proc.stop()
        if status != 0:
            problems.append(
                f"discovery exited {status} on SIGTERM:\n{proc.log.read_text()[-3000:]}"
            )
    assert not problems, "\n".join(problems)


@pytest.fixture
def start_envoy(tmp_path: Path) -> Iterator[EnvoyFactory]:
    started: list[EnvoyProcess] = []
    sds = WorkloadSds(tmp_path / "sds.sock").start()

    def start(name: str, node_id: str, metadata: dict[str, Any], **kw: Any) -> EnvoyProcess:
        envoy = EnvoyProcess(name, node_id, metadata, tmp_path, **kw)
        started.append(envoy)
        return envoy.start()

    yield start
    rejected = {}
    try:
        for envoy in started:
            running = envoy.proc is not None and envoy.proc.poll() is None
            if running and (found := envoy.rejected_updates()):
                rejected[envoy.name] = (found, envoy.log_text()[-2000:])
    finally:
        for envoy in started:
            envoy.stop()
        sds.stop()
    assert not rejected, f"Envoy rejected updates (NACK): {rejected}"


# ---------------------------------------------------------------- golden inputs and bookinfo


def _input_sets() -> dict[str, list[GoldenCase]]:
    groups: dict[tuple[Path, ...], list[GoldenCase]] = defaultdict(list)
    for case in load_cases():
        groups[case.inputs].append(case)
    return {cases[0].inputs[0].stem: cases for cases in groups.values()}


INPUT_SETS = _input_sets()


def _node_id(case: GoldenCase) -> str:
    name, _, namespace = case.proxy.partition(".")
    # The pod's address comes from the Pod in the input; the id's IP is only a fallback.
    return f"{case.proxy_type}~10.0.0.1~{name}.{namespace}~{namespace}.svc.cluster.local"


def _expected_types(dump: dict[str, Any]) -> set[str]:
    """The types Envoy will subscribe to for this config (from our own config_dump)."""
    counts = {c["@type"].rsplit(".", 1)[-1]: c for c in dump["configs"]}
    expected = {"cds", "lds"}
    if counts["EndpointsConfigDump"]["dynamic_endpoint_configs"]:
        expected.add("eds")
    if counts["RoutesConfigDump"]["dynamic_route_configs"]:
        expected.add("rds")
    if counts["SecretsConfigDump"]["dynamic_active_secrets"]:
        expected.add("sds")
    if "EcdsConfigDump" in counts:
        expected.add("ecds")
    return expected


def _all_synced(discovery: DiscoveryProcess, expected: dict[str, set[str]]) -> bool:
    syncz = {c["proxy"]: c for c in discovery.json("/debug/syncz")}
    for proxy, types in expected.items():
        entry = syncz.get(proxy)
        if entry is None or not types <= entry["types"].keys():
            return False
        if any(w["status"] != "SYNCED" for w in entry["types"].values()):
            return False
    return True


def _names(dump: dict[str, Any], section: str, key: str, inner: str) -> set[str]:
    for config in dump["configs"]:
        if config["@type"].endswith(section):
            return {item[inner]["name"] for item in config.get(key, [])}
    return set()


@pytest.mark.parametrize("input_set", sorted(INPUT_SETS))
def test_golden_inputs_are_acked_by_envoy(
    input_set: str, delta: bool, start_discovery: DiscoveryFactory, start_envoy: EnvoyFactory
) -> None:
    _acked_by_envoy(INPUT_SETS[input_set], delta, start_discovery, start_envoy)


@pytest.mark.parametrize("case", [c for c in load_cases() if c.name == "wasm-plugins"])
def test_extension_configs_are_acked_by_envoy(
    case: GoldenCase, delta: bool, start_discovery: DiscoveryFactory, start_envoy: EnvoyFactory
) -> None:
    """ECDS: the WasmPlugins' configs (a module Envoy runs, RBAC stand-ins of remote ones) and
    an EnvoyFilter EXTENSION_CONFIG, subscribed to by the HCM filters that name them."""
    envoys = _acked_by_envoy([case], delta, start_discovery, start_envoy)
    envoy, ours = envoys[case.proxy]
    ecds = ("EcdsConfigDump", "ecds_filters", "ecds_filter")
    assert _names(envoy.config_dump(), *ecds) == _names(ours, *ecds) != set()


def _acked_by_envoy(
    cases: list[GoldenCase],
    delta: bool,
    start_discovery: DiscoveryFactory,
    start_envoy: EnvoyFactory,
) -> dict[str, tuple[EnvoyProcess, dict[str, Any]]]:
    if not can_use_netns():
        pytest.skip("needs root: each Envoy gets a network namespace for its fixed ports")
    golden_module()  # the WasmPlugin case's file:// module, loaded by Envoy
    discovery = start_discovery(list(cases[0].inputs))
    expected: dict[str, set[str]] = {}
    envoys = {}
    for case in cases:
        dump = discovery.json(f"/debug/config_dump?proxyID={case.proxy}&type={case.proxy_type}")
        expected[case.proxy] = _expected_types(dump)
        name, _, namespace = case.proxy.partition(".")
        metadata = istio_metadata(namespace, {}, POD_NAME=name)
        envoy = start_envoy(
            case.name, _node_id(case), metadata, discovery=discovery, delta=delta, own_netns=True
        )
        envoys[case.proxy] = (envoy, dump)
    try:
        wait_for(lambda: _all_synced(discovery, expected), f"every type ACKed: {expected}", 30)
    except AssertionError as exc:
        # Say where it stopped: what the control plane saw and what each Envoy logged.
        logs = "\n".join(f"--- {e.name}:\n{e.log_text()[-3000:]}" for e, _ in envoys.values())
        syncz = discovery.json("/debug/syncz")
        tail = discovery.log.read_text()[-4000:]
        raise AssertionError(f"{exc}\nsyncz: {syncz}\n{logs}\n--- discovery:\n{tail}") from None
    for proxy, (envoy, ours) in envoys.items():
        theirs = envoy.config_dump()
        clusters = ("ClustersConfigDump", "dynamic_active_clusters", "cluster")
        warming = ("ClustersConfigDump", "dynamic_warming_clusters", "cluster")
        assert _names(theirs, *clusters) | _names(theirs, *warming) == _names(ours, *clusters)
        ours_listeners = {lst["name"] for lst in _dynamic_listeners(ours)}
        assert {lst["name"] for lst in _dynamic_listeners(theirs)} == ours_listeners, proxy
    metrics = discovery.metrics()
    assert metrics['pilot_xds{version="1.28.0"}'] == len(cases)
    assert metrics['pilot_xds_pushes{type="cds"}'] >= len(cases)
    return envoys


def _dynamic_listeners(dump: dict[str, Any]) -> list[dict[str, Any]]:
    for config in dump["configs"]:
        if config["@type"].endswith("ListenersConfigDump"):
            return list(config.get("dynamic_listeners", []))
    return []


# ---------------------------------------------------------------- traffic through a sidecar


@pytest.fixture
def mesh(
    tmp_path: Path, start_discovery: DiscoveryFactory, start_envoy: EnvoyFactory
) -> Iterator[Mesh]:
    mesh = Mesh(tmp_path, start_discovery, start_envoy)
    yield mesh
    mesh.stop()


def test_virtual_service_edit_reroutes_without_restart_or_failure(mesh: Mesh, delta: bool) -> None:
    mesh.start(delta)
    mesh.wait_answer("v1")
    pid = mesh.envoy.proc.pid if mesh.envoy.proc else None
    results: Counter[tuple[int, str]] = Counter()
    stop = threading.Event()

    def traffic() -> None:
        while not stop.is_set():
            results[mesh.call()] += 1

    caller = threading.Thread(target=traffic)
    caller.start()
    try:
        time.sleep(0.2)
        write(mesh.dir / "routing.yaml", ROUTING.format(subset="v2"))
        took = mesh.wait_answer("v2", timeout=5)
        time.sleep(0.2)
    finally:
        stop.set()
        caller.join()
    assert took < 2, f"rerouted after {took:.2f}s"
    assert set(results) <= {(200, "v1"), (200, "v2")}, f"failed requests: {results}"
    assert (
        mesh.envoy.proc is not None
        and mesh.envoy.proc.pid == pid
        and mesh.envoy.proc.poll() is None
    )

    before, triggers = mesh.pushes(), mesh.config_pushes()
    for i in range(5):  # a burst: one push
        write(mesh.dir / "routing.yaml", ROUTING.format(subset="v1" if i % 2 == 0 else "v2"))
        time.sleep(0.03)
    mesh.wait_answer("v1")
    time.sleep(1.0)  # longer than the poll interval plus the debounce: no second push follows
    assert mesh.config_pushes() - triggers == 1
    after = mesh.pushes()
    sent = {t: after[t] - before[t] for t in SHORT_TYPES}
    # HTTP routes can change only RDS (model/relevance.py): SotW and Delta send it alone.
    assert sent == {"cds": 0, "eds": 0, "lds": 0, "rds": 1, "sds": 0}, sent


def test_invalid_yaml_keeps_last_good_config_and_shows_the_error(mesh: Mesh, delta: bool) -> None:
    mesh.start(delta)
    mesh.wait_answer("v1")
    before = mesh.pushes()
    write(mesh.dir / "routing.yaml", "apiVersion: networking.istio.io/v1\nkind: [unclosed\n")

    def error_shown() -> list[dict[str, Any]]:
        configz = mesh.discovery.json("/debug/configz")
        return [d for d in configz["diagnostics"] if "invalid YAML" in d["message"]]

    (diag,) = wait_for(error_shown, "the YAML error in /debug/configz", 5)
    assert diag["file"].endswith("routing.yaml") and diag["severity"] == "error"
    configz = mesh.discovery.json("/debug/configz")
    stale = {o["name"] for o in configz["objects"] if o["stale"]}
    assert stale == {"web"} and {o["kind"] for o in configz["objects"] if o["stale"]} == {
        "VirtualService",
        "DestinationRule",
    }
    for _ in range(10):
        assert mesh.call() == (200, "v1")
        time.sleep(0.05)
    assert mesh.pushes() == before, "an unreadable file pushes nothing"
    assert mesh.discovery.metrics()["meshpilot_config_errors"] >= 1
    write(mesh.dir / "routing.yaml", ROUTING.format(subset="v2"))
    mesh.wait_answer("v2", timeout=5)
    wait_for(lambda: not error_shown(), "the error cleared", 5)


def test_new_pod_reaches_callers_through_an_eds_only_push(mesh: Mesh, delta: bool) -> None:
    write(mesh.dir / "routing.yaml", ROUTING.format(subset="v2"))
    mesh.start(delta)
    mesh.wait_answer("v2")
    before = mesh.pushes()
    write(mesh.dir / "new-pod.yaml", NEW_POD)
    wait_for(lambda: mesh.call() == (200, "v2-b"), "the new pod serves", 5)
    time.sleep(0.5)
    after = mesh.pushes()
    sent = {t: after[t] - before[t] for t in SHORT_TYPES}
    assert sent == {"cds": 0, "eds": 1, "lds": 0, "rds": 0, "sds": 0}, sent
    assert mesh.discovery.metrics()['pilot_push_triggers{type="endpoint"}'] == 1
    (entry,) = mesh.discovery.json("/debug/syncz")
    assert entry["types"]["eds"]["status"] == "SYNCED"
    assert entry["types"]["eds"]["version_acked"] == entry["push_version"]
    registry = {s["hostname"]: s for s in mesh.discovery.json("/debug/registryz")}
    endpoints = registry["web.default.svc.cluster.local"]["endpoints"][str(mesh.port)]
    assert f"127.0.0.4:{mesh.port}" in endpoints


def test_sigint_ends_the_streams_and_exits_cleanly(mesh: Mesh) -> None:
    mesh.start(delta=False)
    mesh.wait_answer("v1")
    proc = mesh.discovery.proc
    assert proc is not None

    def connected() -> str:
        return mesh.envoy.get("/stats?filter=^control_plane.connected_state$")[1].split()[-1]

    assert connected() == "1"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) == 0
    wait_for(lambda: connected() == "0", "Envoy sees its ADS stream end", 5)
    assert mesh.call() == (200, "v1"), "Envoy keeps serving its last config"


WASM = """\
apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {{name: stats, namespace: default}}
spec:
  selector: {{matchLabels: {{app: client}}}}
  url: file://{module}
"""


def _ecds_names(envoy: EnvoyProcess) -> set[str]:
    return _names(envoy.config_dump(), "EcdsConfigDump", "ecds_filters", "ecds_filter")


def test_a_wasm_plugin_added_and_removed_keeps_traffic_flowing(mesh: Mesh, delta: bool) -> None:
    """Its filter's config arrives by ECDS after the listener naming it; once removed, the
    config stays while draining filter chains still name it, and no update is rejected (the
    finalizers check both sides for NACKs)."""
    mesh.start(delta)
    mesh.wait_answer("v1")
    write(mesh.dir / "wasm.yaml", WASM.format(module=golden_module()))
    name = "extensions.istio.io/wasmplugin/default.stats"
    wait_for(lambda: _ecds_names(mesh.envoy) == {name}, "the plugin's config in Envoy", 20)
    assert mesh.call() == (200, "v1")
    (mesh.dir / "wasm.yaml").unlink()
    wait_for(lambda: name not in json.dumps(_dynamic_listeners(mesh.envoy.config_dump())), "gone")
    assert mesh.call() == (200, "v1")

"""`meshpilot run` per revision: a pod is injected by the revision its namespace's tag or
revision label selects (the store's webhook configurations and injector ConfigMaps, as
`install` and `tag set` write them), and its agent dials that revision's control plane."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.inject.config import parse_injector
from meshpilot.install.operator_record import revision_socket_dir, traversable_dir
from meshpilot.runtime.run.env import PodFacts
from meshpilot.runtime.run.plan import plan_pod
from meshpilot.runtime.run.revisions import RevisionInjectors, pod_revision, revision_socket
from meshpilot.runtime.run.workloads import pods_of
from meshpilot.security.control_plane_record import ControlPlaneRecord, write_record
from meshpilot.store.directory import DirectoryStore

IOP = "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: minimal\n"
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "shop"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "command": ["sleep", "1000"]}]},
        },
    },
}


def _cli(store: Path, *args: str) -> None:
    result = CliRunner().invoke(cli, [*args, "--store", str(store)])
    assert result.exit_code == 0, result.output


def _install(tmp: Path, revision: str) -> None:
    iop = tmp / "iop.yaml"
    iop.write_text(IOP)
    _cli(tmp / "store", "install", "-f", str(iop), "-r", revision, "-y", "--no-operator")


def _revision(store: DirectoryStore, labels: dict[str, str]) -> str:
    pods = pods_of([DEPLOYMENT], parse_injector(), {"shop": labels},
                   choose=RevisionInjectors(store))  # fmt: skip
    assert len(pods) == 1 and pods[0].injected, pods[0].reason
    return pod_revision(pods[0].pod)


def test_the_default_tag_moves_new_pods_to_its_revision(tmp_path: Path) -> None:
    _install(tmp_path, "1-14-3")
    _install(tmp_path, "1-15-4")
    store_dir = tmp_path / "store"
    _cli(store_dir, "tag", "set", "default", "--revision", "1-14-3")
    store = DirectoryStore(store_dir)
    assert _revision(store, {"istio.io/rev": "default"}) == "1-14-3"
    assert _revision(store, {"istio-injection": "enabled"}) == "1-14-3"
    assert _revision(store, {"istio.io/rev": "1-15-4"}) == "1-15-4"
    _cli(store_dir, "tag", "set", "default", "--revision", "1-15-4", "--overwrite")
    store.refresh()
    assert _revision(store, {"istio.io/rev": "default"}) == "1-15-4"
    _cli(store_dir, "tag", "set", "default", "--revision", "1-14-3", "--overwrite")
    store.refresh()
    assert _revision(store, {"istio.io/rev": "default"}) == "1-14-3"


def test_a_label_no_revision_serves_leaves_the_pod_uninjected(tmp_path: Path) -> None:
    _install(tmp_path, "1-14-3")
    pods = pods_of([DEPLOYMENT], parse_injector(), {"shop": {"istio.io/rev": "1-99-0"}},
                   choose=RevisionInjectors(DirectoryStore(tmp_path / "store")))  # fmt: skip
    assert not pods[0].injected


def test_the_agent_dials_its_revisions_control_plane(tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    record = ControlPlaneRecord(os.getpid(), "127.0.0.1", 40001, 40002,
                                str(ca / "root.pem"), secure_uds="/run/b/secure.sock",
                                revision="1-15-4")  # fmt: skip
    write_record(ca, record, b"root")
    plain = ControlPlaneRecord(os.getpid(), "127.0.0.1", 40003, 40004, str(ca / "root2.pem"),
                               secure_uds="/run/plain/secure.sock")  # fmt: skip
    write_record(ca, plain, b"root")
    assert revision_socket(ca, "1-15-4") == Path("/run/b/secure.sock")
    assert revision_socket(ca, "1-14-3") is None
    assert revision_socket(ca, "") is None
    operator_socket = traversable_dir(revision_socket_dir(ca, "1-14-3")) / "secure.sock"
    operator_socket.touch()
    try:
        assert revision_socket(ca, "1-14-3") == operator_socket
        assert operator_socket.parent.stat().st_mode & 0o777 == 0o711  # pods' Envoys cross it
    finally:
        shutil.rmtree(operator_socket.parent.parent)


def test_the_installed_gateway_runs_on_its_revision_or_its_tags(tmp_path: Path) -> None:
    iop = tmp_path / "iop.yaml"
    iop.write_text(IOP.replace("minimal", "default"))
    _cli(tmp_path / "store", "install", "-f", str(iop), "-r", "1-14-3", "-y", "--no-operator")
    _install(tmp_path, "1-15-4")
    store = DirectoryStore(tmp_path / "store")
    gateway = store.manifest(ConfigKey(Kind.DEPLOYMENT, "istio-system", "istio-ingressgateway"))
    assert gateway is not None
    choose = RevisionInjectors(store)
    [pod] = pods_of([gateway], parse_injector(), {}, choose=choose)
    assert not pod.injected and choose.revision_of(pod.pod) == "1-14-3"
    plan = plan_pod(pod.pod, PodFacts(pod.name, pod.namespace, "10.0.0.2"), tmp_path / "pod")
    assert plan.proxy is not None
    argv = plan.proxy.argv
    token = argv[argv.index("--token-file") + 1]
    assert token == str(tmp_path / "pod" / "volumes" / "istio-token" / "istio-token")
    assert {v.kind for v in plan.volumes} == {"token", "ca-root"}
    # a gateway labelled with a tag follows the tag, as Istio's gateway injection does
    _cli(tmp_path / "store", "tag", "set", "default", "--revision", "1-15-4")
    store.refresh()
    pod.pod["metadata"]["labels"]["istio.io/rev"] = "default"
    assert choose.revision_of(pod.pod) == "1-15-4"


def test_run_without_files_or_all_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "--secure-uds", str(tmp_path / "s.sock")])
    assert result.exit_code == 2
    assert "give -f FILES, --all (every Deployment in the store), or both" in result.output

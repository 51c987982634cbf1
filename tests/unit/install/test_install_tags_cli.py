"""`meshpilot install --no-operator`, `tag` and `uninstall` on a real directory store: what
is written (in one write, or nothing), the refusals of istioctl, and the lines a user sees."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from meshpilot.cli.main import cli
from meshpilot.config.keys import ConfigKey
from meshpilot.config.kinds import Kind
from meshpilot.inject.webhook_target import served_names, webhook_target
from meshpilot.install.operator_record import OperatorRecord, write_operator_record
from meshpilot.store.directory import DirectoryStore

MWC = Kind.MUTATING_WEBHOOK_CONFIGURATION
IOP = """apiVersion: install.istio.io/v1alpha1
kind: IstioOperator
spec:
  profile: minimal
"""


def _run(store: Path, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, [*args, "--store", str(store)], input=stdin)


def _install(tmp: Path, revision: str, tag: str, *extra: str) -> Result:
    iop = tmp / "iop.yaml"
    iop.write_text(IOP)
    return _run(
        tmp / "store", "install", "-f", str(iop), "--revision", revision, "--set",
        f"tag={tag}", "-y", "--no-operator", *extra,
    )  # fmt: skip


def _names(store: Path) -> set[tuple[str, str]]:
    return {(k.kind.value, k.name) for k in DirectoryStore(store).snapshot().objects}


def test_install_writes_the_revision_in_one_write(tmp_path: Path) -> None:
    result = _install(tmp_path, "1-14-3", "1.14.3")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "\u2714 Istio core installed"
    assert "\u2714 Installation complete" in result.output
    assert _names(tmp_path / "store") == {
        ("IstioOperator", "installed-state-1-14-3"),
        ("ConfigMap", "istio-1-14-3"),
        ("ConfigMap", "istio-sidecar-injector-1-14-3"),
        ("MutatingWebhookConfiguration", "istio-sidecar-injector-1-14-3"),
    }
    journal = (tmp_path / "store" / ".journal").read_text().splitlines()
    assert len({line.split()[0] for line in journal if line.strip()}) == 1  # one version


def test_install_refusals_leave_the_store_as_it_was(tmp_path: Path) -> None:
    assert _install(tmp_path, "1-14-3", "1.14.3").exit_code == 0
    before = _names(tmp_path / "store")
    far = _install(tmp_path, "1-17-0", "1.17.0")
    assert far.exit_code == 1
    assert (
        "upgrade from 1.14.3 to 1.17.0 skips more than two minor versions" in far.output
        and "--force" in far.output
    )
    other = tmp_path / "other.yaml"
    other.write_text(IOP.replace("spec:", "metadata: {name: mine}\nspec:"))
    twice = _run(tmp_path / "store", "install", "-f", str(other), "-r", "1-14-3", "-y",
                 "--no-operator")  # fmt: skip
    assert twice.exit_code == 1
    assert "istio-system/installed-state-1-14-3 already installs revision '1-14-3'" in twice.output
    bad = _install(tmp_path, "1.15.4", "1.15.4")
    assert bad.exit_code == 1 and "'1.15.4' is not a DNS-1123 label" in bad.output
    assert _names(tmp_path / "store") == before
    forced = _install(tmp_path, "1-17-0", "1.17.0", "--force")
    assert forced.exit_code == 0, forced.output
    assert "WARNING: Istio is being upgraded from 1.14.3 -> 1.17.0" in forced.output


def test_tags_set_list_remove_and_injection_target(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _install(tmp_path, "1-14-3", "1.14.3").exit_code == 0
    assert _install(tmp_path, "1-15-4", "1.15.4").exit_code == 0
    assert _run(store, "tag", "list").output == (
        "No Istio revision tag MutatingWebhookConfigurations to list\n"
    )
    unknown = _run(store, "tag", "set", "default", "--revision", "9-9-9")
    assert unknown.exit_code == 1 and 'with revision "9-9-9"' in unknown.output
    assert _run(store, "tag", "set", "default", "--revision", "1-14-3").exit_code == 0
    again = _run(store, "tag", "set", "default", "--revision", "1-15-4")
    assert again.exit_code == 1
    assert 'revision tag "default" already exists, and --overwrite is false' in again.output
    clash = _run(store, "tag", "set", "1-14-3", "--revision", "1-15-4")
    assert 'there is already a revision named "1-14-3"' in clash.output
    namespace = tmp_path / "ns.yaml"
    namespace.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bar\n"
                         "  labels: {istio.io/rev: default}\n")  # fmt: skip
    assert _run(store, "apply", "-f", str(namespace)).exit_code == 0
    moved = _run(store, "tag", "set", "default", "--revision", "1-15-4", "--overwrite")
    assert moved.exit_code == 0, moved.output
    listed = _run(store, "tag", "list").output.splitlines()
    assert listed[0].split() == ["TAG", "REVISION", "NAMESPACES"]
    assert listed[1].split() == ["default", "1-15-4", "bar"]
    tag = yaml.safe_load(_run(store, "get", "mutatingwebhookconfiguration",
                              "istio-revision-tag-default", "-o", "yaml").output)  # fmt: skip
    assert tag["metadata"]["labels"]["istio.io/tag"] == "default"
    assert len(tag["webhooks"]) == 4  # with the legacy istio-injection ones
    assert {h["clientConfig"]["service"]["name"] for h in tag["webhooks"]} == {"istiod-1-15-4"}
    objects = DirectoryStore(store).snapshot().objects
    target = webhook_target(objects, {"istio.io/rev": "default"}, {})
    assert target is not None and (target.chosen, target.revision) == ("default", "1-15-4")
    assert served_names(objects, "1-15-4") == {"1-15-4", "default"}
    asked = _run(store, "tag", "remove", "default", stdin="n\n")
    assert asked.exit_code == 1 and "in use by namespaces bar" in asked.output
    removed = _run(store, "tag", "remove", "default", "-y")
    assert removed.output == "Revision tag default removed\n"


def test_uninstall_removes_one_revision_and_keeps_tags(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _install(tmp_path, "1-14-3", "1.14.3").exit_code == 0
    assert _install(tmp_path, "1-15-4", "1.15.4").exit_code == 0
    assert _run(store, "tag", "set", "prod", "--revision", "1-14-3").exit_code == 0
    result = _run(store, "uninstall", "--revision", "1-14-3", "-y", "--ca-dir",
                  str(tmp_path / "ca"))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert 'revision tag "prod" still points at revision 1-14-3' in result.output
    assert result.output.splitlines()[-1] == "\u2714 Uninstall complete"
    names = _names(store)
    assert not any("1-14-3" in name for _, name in names)
    assert ("MutatingWebhookConfiguration", "istio-revision-tag-prod") in names
    assert ("IstioOperator", "installed-state-1-15-4") in names
    purge = _run(store, "uninstall", "--purge", "-y", "--ca-dir", str(tmp_path / "ca"))
    assert purge.exit_code == 0 and _names(store) == set()
    none = _run(store, "uninstall", "--revision", "1-15-4", "-y")
    assert none.exit_code == 1
    assert "holds no installation of revision 1-15-4: nothing to uninstall" in none.output
    key = ConfigKey(MWC, "", "istio-revision-tag-prod")
    assert DirectoryStore(store).get(key) is None


def test_install_names_the_failed_step(tmp_path: Path) -> None:
    ca = tmp_path / "ca"
    # an operator (this process, alive) already runs for another store with this CA dir
    write_operator_record(ca, OperatorRecord(os.getpid(), str(tmp_path / "elsewhere")))
    iop = tmp_path / "iop.yaml"
    iop.write_text(IOP)
    result = _run(tmp_path / "store", "install", "-f", str(iop), "-y", "--ca-dir", str(ca))
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == "\u2714 Istio core installed"
    assert "\u2718 Istiod: the operator for" in result.output
    assert f"serves the store {tmp_path / 'elsewhere'}, not {tmp_path / 'store'}" in result.output

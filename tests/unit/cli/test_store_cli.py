"""The live store as a new user meets it: `apply` says what is wrong with what it writes
(and `--strict` refuses it), reads never create a store, and a store URL whose backend does
not exist yet is refused instead of becoming a directory named `kube:`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli

BROKEN_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings-typo, namespace: default}
spec:
  hosts: [ratings.example]
  gateways: [no-such-gateway]
  http:
  - route:
    - destination: {host: ratingz, subset: v9}
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: default}
spec:
  ports: [{port: 9080, name: http}]
"""
GOOD_VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
"""


@pytest.fixture
def cwd(tmp_path: Path) -> Iterator[Path]:
    """Run in an empty directory, so a store created by mistake (`./kube:`) is seen."""
    work = tmp_path / "cwd"
    work.mkdir()
    before = Path.cwd()
    os.chdir(work)
    try:
        yield work
    finally:
        os.chdir(before)


def run(*args: str, store: Path | str | None = None) -> tuple[int, str, str]:
    env = {"MESHPILOT_STORE": str(store)} if store is not None else {}
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_apply_warns_about_broken_references_with_file_and_line(tmp_path: Path) -> None:
    vs = tmp_path / "vs.yaml"
    vs.write_text(BROKEN_VS)
    store = tmp_path / "live"
    code, out, err = run("apply", "-f", str(vs), store=store)
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings-typo created\n")
    assert err.splitlines() == [
        f"Warning: {vs}:6: error IST0101: VirtualService default/ratings-typo: spec.gateways[0]: "
        'Referenced gateway not found: "no-such-gateway"',
        f"Warning: {vs}:9: error IST0101: VirtualService default/ratings-typo: "
        'spec.http[0].route[0].destination.host: Referenced host not found: "ratingz"',
        f"Warning: {vs}:9: error IST0101: VirtualService default/ratings-typo: "
        "spec.http[0].route[0].destination.subset: Referenced host+subset in destinationrule "
        'not found: "ratingz+v9"',
    ]


def test_apply_warns_but_gives_no_advice(tmp_path: Path) -> None:
    """Info findings (IST0102: a namespace without injection) are for `analyze`; apply
    prints warnings and errors only."""
    workloads = Path(__file__).resolve().parents[3] / "examples" / "gitops" / "workloads.yaml"
    code, out, err = run("apply", "-f", str(workloads), store=tmp_path / "live")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "namespace/shop created"
    analyzed = CliRunner().invoke(cli, ["analyze", "--store", str(tmp_path / "live")])
    assert "Info [IST0102] (Namespace shop " in analyzed.stdout


def test_apply_checks_against_what_the_store_holds(tmp_path: Path) -> None:
    store = tmp_path / "live"
    service, vs = tmp_path / "svc.yaml", tmp_path / "vs.yaml"
    service.write_text(SERVICE)
    vs.write_text(GOOD_VS)
    assert run("apply", "-f", str(vs), "--dry-run", store=store)[2].count("Warning:") == 1
    assert run("apply", "-f", str(service), store=store)[0] == 0
    code, out, err = run("apply", "-f", str(vs), "--strict", store=store)
    assert (code, out, err) == (0, "virtualservice.networking.istio.io/ratings created\n", "")


def test_apply_strict_refuses_and_writes_nothing(tmp_path: Path) -> None:
    vs = tmp_path / "vs.yaml"
    vs.write_text(BROKEN_VS)
    store = tmp_path / "live"
    code, out, err = run("apply", "-f", str(vs), "--strict", store=store)
    assert code == 1 and out == ""
    assert err.count("Warning: ") == 3
    assert err.endswith("Error: nothing applied (--strict): 3 errors above\n")
    assert not store.exists()
    assert run("apply", "-f", str(vs), "--dry-run", store=store)[0] == 0
    assert not store.exists()  # a dry run creates nothing either


@pytest.mark.parametrize(
    "args",
    [
        ("get", "vs"),
        ("get", "vs", "reviews", "-o", "yaml"),
        ("delete", "vs", "reviews"),
        ("gitops", "list"),
        ("gitops", "get", "shop"),
        ("gitops", "diff", "shop"),
        ("gitops", "history", "shop"),
    ],
)
def test_reads_of_a_missing_store_say_so_and_create_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    store = tmp_path / "nothing-here"
    code, out, err = run(*args, "--store", str(store))
    assert (code, out) == (1, "")
    assert err == f"Error: no store at {store}: nothing has been applied there yet\n"
    assert not store.exists()
    code, _, err = run(*args, store=store)  # the same through $MESHPILOT_STORE
    assert code == 1 and "no store at" in err and not store.exists()


@pytest.mark.parametrize("url", ["s3://bucket/x", "consul://c:8500/x"])
@pytest.mark.parametrize("verb", [("get", "vs"), ("apply", "-f", "VS"), ("gitops", "list")])
def test_store_urls_of_unsupported_backends_are_refused(
    cwd: Path, url: str, verb: tuple[str, ...]
) -> None:
    (cwd.parent / "vs.yaml").write_text(GOOD_VS)
    args = [str(cwd.parent / "vs.yaml") if a == "VS" else a for a in verb]
    code, out, err = run(*args, "--store", url)
    scheme = url.partition("://")[0]
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: store URL scheme '{scheme}' is not supported; give a directory")
    assert list(cwd.iterdir()) == []  # no ./s3: or ./consul: directory


def test_file_url_and_plain_path_name_the_same_directory(cwd: Path) -> None:
    vs = cwd.parent / "vs.yaml"
    vs.write_text(GOOD_VS)
    store = cwd.parent / "live"
    assert run("apply", "-f", str(vs), "--store", f"file://{store}")[0] == 0
    code, out, _ = run("get", "vs", "-o", "name", "--store", str(store))
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings\n")
    assert list(cwd.iterdir()) == []


def test_discovery_refuses_a_store_url_too(cwd: Path) -> None:
    code, _, err = run("discovery", "--store", "s3://bucket/x", "--no-ca")
    assert code == 1
    assert "store URL scheme 's3' is not supported" in err
    assert list(cwd.iterdir()) == []

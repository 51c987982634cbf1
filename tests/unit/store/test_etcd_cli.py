"""`meshpilot apply|get|delete --store etcd://...`: the same verbs as on a directory, on a
real etcd; a URL that is wrong or an etcd that is down is one clear line, never a
traceback, and commands that need a directory say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli
from meshpilot.runtime.ports import free_port
from tests.etcd_server import EtcdServer, etcd_fixture  # noqa: F401
from tests.etcd_tls import write_tls_files

VS = """\
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - route:
    - destination: {host: ratings}
"""


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env or {})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_apply_get_delete_on_etcd(etcd: EtcdServer, tmp_path: Path) -> None:
    (tmp_path / "vs.yaml").write_text(VS)
    url = etcd.url("/mesh/prod")
    code, out, err = run("apply", "-f", str(tmp_path / "vs.yaml"), "--store", url)
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings created\n"), err
    code, out, _ = run("get", "vs", "-o", "name", "--store", url)
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings\n")
    # $MESHPILOT_STORE names it as well
    code, out, _ = run("get", "vs", "ratings", "-o", "yaml", env={"MESHPILOT_STORE": url})
    assert code == 0 and "hosts:\n  - ratings\n" in out and "resourceVersion:" in out
    # another prefix is another store
    assert run("get", "vs", "-o", "name", "--store", etcd.url("/mesh/dev"))[1] == ""
    code, out, _ = run("delete", "vs", "ratings", "--store", url)
    assert (code, out) == (0, 'virtualservice.networking.istio.io "ratings" deleted\n')
    assert run("get", "vs", "-o", "name", "--store", url)[1] == ""


def test_an_etcd_that_is_down_is_one_clear_error(tmp_path: Path) -> None:
    url = f"etcd://127.0.0.1:{free_port()}/meshpilot"
    code, out, err = run("get", "vs", "--store", url)
    assert (code, out) == (1, "")
    assert err.startswith(f"Error: etcd {url}: list failed: unavailable: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("etcd:///meshpilot", "give at least one endpoint"),
        ("etcd://127.0.0.1/meshpilot", "endpoint '127.0.0.1' is not host:port"),
        ("etcd://h:2379/x?cacert=/ca.pem", "TLS files need an etcd+https:// URL"),
        ("etcd+https://h:2379/x?cert=/c.pem", "needs both cert= and key="),
        (
            "etcd+https://h:2379/x?cacert=/no/such/ca.pem",
            "etcd TLS cacert /no/such/ca.pem: No such",
        ),
        ("etcd://h:2379/x?timeout=3", "unknown parameter 'timeout'"),
    ],
)
def test_malformed_etcd_urls_are_refused(url: str, message: str) -> None:
    code, _, err = run("get", "vs", "--store", url)
    assert code == 1 and message in err and err.startswith("Error: "), err


def test_commands_that_need_a_directory_say_so(etcd: EtcdServer) -> None:
    code, _, err = run("gitops", "sync", "shop", "--store", etcd.url())
    assert code == 1
    assert err.startswith("Error: gitops app sync needs a directory store")
    assert f"run `meshpilot gitops serve --store {etcd.url()}`" in err
    assert "give --server URL" in err
    code, _, err = run("gitops", "history", "shop", "--store", etcd.url())  # a read: served
    assert code == 1 and "needs a directory" not in err and "shop" in err, err


def test_etcd_over_tls_with_a_client_certificate(tmp_path: Path) -> None:
    files = write_tls_files(tmp_path / "tls")
    server = EtcdServer(tmp_path / "etcd-tls", tls=files).start()
    try:
        (tmp_path / "vs.yaml").write_text(VS)
        url = server.url()
        assert url.startswith("etcd+https://127.0.0.1:")
        code, out, err = run("apply", "-f", str(tmp_path / "vs.yaml"), "--store", url)
        assert (code, out) == (0, "virtualservice.networking.istio.io/ratings created\n"), err
        assert run("get", "vs", "-o", "name", "--store", url)[1] == (
            "virtualservice.networking.istio.io/ratings\n"
        )
        # without the client certificate etcd refuses the connection: one clear error
        no_cert = f"etcd+https://{server.endpoint}/meshpilot?cacert={files.ca}"
        code, out, err = run("get", "vs", "--store", no_cert)
        assert code == 1 and err.startswith(f"Error: etcd etcd+https://{server.endpoint}/meshpilot")
        # plaintext to a TLS etcd: refused too
        code, _, err = run("get", "vs", "--store", f"etcd://{server.endpoint}/meshpilot")
        assert code == 1 and "list failed: unavailable" in err
    finally:
        server.stop()


def test_a_dead_endpoint_is_skipped_for_the_next(etcd: EtcdServer, tmp_path: Path) -> None:
    (tmp_path / "vs.yaml").write_text(VS)
    url = f"etcd://127.0.0.1:{free_port()},{etcd.endpoint}/meshpilot"
    code, out, err = run("apply", "-f", str(tmp_path / "vs.yaml"), "--store", url)
    assert (code, out) == (0, "virtualservice.networking.istio.io/ratings created\n"), err
    assert run("get", "vs", "-o", "name", "--store", url)[1] == (
        "virtualservice.networking.istio.io/ratings\n"
    )

"""`meshpilot explain`: bad input gets a one-line error naming what is wrong; -o svg draws
the path with Graphviz."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshpilot.cli.main import cli

ROOT = Path(__file__).parents[3]
BOOKINFO = str(ROOT / "examples" / "bookinfo")
PRODUCTPAGE = "productpage-v1-6b746f74dc-9stvs.default"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["explain", "-f", BOOKINFO, *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--from", "productpage-v1.default", "http://reviews:9080/"],
            "--from productpage-v1.default: no Pod named 'productpage-v1' in namespace 'default' "
            "among the input objects; closest: productpage-v1-6b746f74dc-9stvs.default",
        ),
        (
            ["--from", PRODUCTPAGE, "ftp://reviews:9080/"],
            "request 'ftp://reviews:9080/': the scheme must be http, https, tcp or tls",
        ),
        (["--from", PRODUCTPAGE, "tcp://mongodb"], "a tcp:// request needs a port"),
        (["--from", PRODUCTPAGE, "http://reviews:99999/"], "the port is not a number in 1-65535"),
        (
            ["--from", PRODUCTPAGE, "-H", "no-colon", "http://reviews:9080/"],
            "expected 'name: value'",
        ),
        (["http://reviews:9080/"], "give exactly one of --from POD.NAMESPACE or --gateway"),
    ],
)
def test_bad_input_is_one_clear_error(args: list[str], message: str) -> None:
    code, output = _run(*args)
    assert code != 0
    assert message in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--from", PRODUCTPAGE, "http://reviews:9080/"],
            "give the mesh with -f FILES|DIR or with",
        ),
        (
            ["--discovery", "127.0.0.1:1", "--from", PRODUCTPAGE, "http://reviews:9080/"],
            "127.0.0.1:1",
        ),
        (
            [
                "-f",
                BOOKINFO,
                "--config-dump",
                "/nonexistent.json",
                "--from",
                PRODUCTPAGE,
                "http://r/",
            ],
            "--config-dump /nonexistent.json: cannot read it as JSON",
        ),
    ],
)
def test_bad_sources_are_one_clear_error(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["explain", *args])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert message in result.output


def test_config_dump_of_the_source_walks_the_same_path(tmp_path: Path) -> None:
    """An Envoy-shaped config dump of productpage (here the control plane's own
    /debug/config_dump body) gives the walk the offline run gives."""
    from meshpilot.config.loader import load_paths
    from meshpilot.model.proxy import ProxyType, as_verified, proxy_from_pod
    from meshpilot.model.push_context import build_push_context
    from meshpilot.xds.debug import config_dump

    loaded = load_paths([BOOKINFO])
    push = build_push_context(loaded.served, loaded.mesh)
    pod = push.pod("default", PRODUCTPAGE.split(".")[0])
    assert pod is not None
    dump = config_dump(push, as_verified(proxy_from_pod(pod, ProxyType.SIDECAR)))
    (tmp_path / "dump.json").write_text(json.dumps(dump))
    url = ["-o", "json", "-H", "end-user: jason", "http://reviews:9080/reviews/1"]
    _, offline = _run("--from", PRODUCTPAGE, *url)
    _, dumped = _run("--config-dump", str(tmp_path / "dump.json"), "--from", PRODUCTPAGE, *url)
    assert json.loads(dumped) == json.loads(offline)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_renders_and_converts_to_png(tmp_path: Path) -> None:
    code, svg = _run("--from", PRODUCTPAGE, "-o", "svg", "http://reviews:9080/reviews/1")
    assert code == 0, svg
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    for text in ("virtualOutbound", "outbound|9080|v1|reviews.default.svc.cluster.local"):
        assert text in svg
    (tmp_path / "path.svg").write_text(svg)
    png = tmp_path / "path.png"
    subprocess.run(
        ["dot", "-Tpng", "-o", str(png), "-Kdot"], input=_dot(), text=True, check=True, timeout=60
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _dot() -> str:
    """The same path as DOT text, rendered to PNG as a reviewer looks at it."""
    from meshpilot.config.loader import load_paths
    from meshpilot.explain import build_scene, explain, parse_request, workload_of
    from meshpilot.explain.render_dot import render_dot
    from meshpilot.model.push_context import build_push_context

    loaded = load_paths([BOOKINFO])
    push = build_push_context(loaded.served, loaded.mesh)
    pod = push.pod("default", PRODUCTPAGE.split(".")[0])
    assert pod is not None
    ex = explain(
        workload_of(push, pod), parse_request("http://reviews:9080/reviews/1"), build_scene(push)
    )
    return render_dot(ex)

"""Golden files of injection: `golden/<case>.yaml` → `golden/<case>.yaml.injected`.

A case may come with `<case>.config`, `<case>.values`, `<case>.mesh` (the injector
ConfigMap's keys and the mesh config) and `<case>.revision`. Refresh with REFRESH_GOLDEN=1;
a golden without its case (or a case without its golden) fails, as in Istio's test.
Every case also checks that the RFC 6902 patch of each pod gives the injected pod, that
injecting is deterministic, and that the injected containers' args parse with the real
`meshpilot proxy` and `meshpilot iptables` commands.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner

from meshpilot.cli.iptables import iptables
from meshpilot.cli.proxy import proxy
from meshpilot.inject.config import Injector, parse_injector
from meshpilot.inject.kube_inject import inject_documents, render_documents
from meshpilot.inject.patch import apply_patch, make_patch

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".yaml") for p in GOLDEN.glob("*.yaml"))
REFRESH = os.environ.get("REFRESH_GOLDEN") == "1"


def _injector(case: str) -> Injector:
    def text(ext: str) -> str | None:
        path = GOLDEN / f"{case}.{ext}"
        return path.read_text() if path.exists() else None

    revision = (text("revision") or "").strip()
    return parse_injector(text("config"), text("values"), text("mesh"), revision)


def _pods(documents: list[Any]) -> list[dict[str, Any]]:
    pods = []
    for doc in documents:
        if not isinstance(doc, dict):
            continue
        if doc.get("kind") == "List":
            pods += _pods(doc.get("items") or [])
        elif doc.get("kind") == "Pod":
            pods.append(doc)
        elif doc.get("kind") == "CronJob":
            pods.append(doc["spec"]["jobTemplate"]["spec"]["template"])
        elif isinstance((doc.get("spec") or {}).get("template"), dict):
            pods.append(doc["spec"]["template"])
    return pods


def test_no_stale_goldens() -> None:
    cases = set(CASES)
    goldens = {p.name.removesuffix(".yaml.injected") for p in GOLDEN.glob("*.yaml.injected")}
    extras = {p.name.split(".")[0] for p in GOLDEN.iterdir()}
    assert goldens == cases, f"stale golden files or missing goldens: {goldens ^ cases}"
    assert extras <= cases, f"files of no case: {extras - cases}"
    assert len(cases) >= 30


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    source = (GOLDEN / f"{case}.yaml").read_text()
    injector = _injector(case)
    result = inject_documents(source, injector, f"{case}.yaml")
    rendered = render_documents(result.documents, result.json_input)
    golden = GOLDEN / f"{case}.yaml.injected"
    if REFRESH:
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"{case}: output differs (REFRESH_GOLDEN=1 to update)"
    again = inject_documents(source, injector, f"{case}.yaml")
    assert render_documents(again.documents, again.json_input) == rendered  # deterministic
    originals = _pods([d for d in yaml.safe_load_all(source) if d is not None])
    for original, injected in zip(originals, _pods(result.documents), strict=True):
        assert apply_patch(original, make_patch(original, injected)) == injected
        _check_args(injected)


_VAR = re.compile(r"\$\(([A-Z_]+)\)")


def _check_args(pod: dict[str, Any]) -> None:
    """The injected args are ones our real commands accept ($(VAR) as the kubelet expands)."""
    spec = pod["spec"]
    for container in spec.get("containers", []):
        if container["name"] != "istio-proxy":
            continue
        args = [
            _VAR.sub("10.0.0.1", a) if "IP" in a else _VAR.sub("x", a) for a in container["args"]
        ]
        assert args[0] == "proxy"
        command = proxy.commands[args[1]]
        with command.make_context(args[1], args[2:]) as ctx:  # raises on an unknown flag
            assert ctx.params
        hook = container.get("lifecycle", {}).get("postStart", {}).get("exec", {}).get("command")
        if hook and hook[0] == "meshpilot":
            assert hook[1:3] == ["proxy", "wait"]
            with proxy.commands["wait"].make_context("wait", hook[3:]):
                pass
    for container in spec.get("initContainers", []):
        if container["name"] != "istio-init":
            continue
        assert container["args"][0] == "iptables"
        result = CliRunner().invoke(iptables, [*container["args"][1:], "--dry-run"])
        assert result.exit_code == 0, result.output
        assert "ISTIO_REDIRECT" in result.output


def test_invented_flag_is_caught() -> None:
    # the check above is real: an option the agent lacks makes click refuse it
    with pytest.raises(click.UsageError):
        proxy.commands["sidecar"].make_context("sidecar", ["--domain", "x.svc.cluster.local"])

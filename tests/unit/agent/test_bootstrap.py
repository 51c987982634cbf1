"""Bootstrap goldens: one folder per case under golden/ with `options.yaml` (AgentOptions
fields) and `bootstrap.yaml` (the expected bootstrap, config_dump style, keys sorted).

Refresh with `REFRESH_GOLDEN=1 pytest tests/unit/agent`, then review the diff.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from meshpilot.agent.bootstrap import build_bootstrap, node_metadata
from meshpilot.agent.bootstrap_file import bootstrap_dict, bootstrap_json
from meshpilot.agent.options import ROOT_CERT_PATH, AgentOptions, InterceptionMode, XdsType
from meshpilot.envoy.binary import envoy_binary as proxy_binary
from meshpilot.model.proxy import ProxyType, parse_node_id
from meshpilot.settings import Ports
from tests.unit.agent.ca_server import LocalCa

GOLDEN = Path(__file__).parent / "golden"
REFRESH = os.environ.get("REFRESH_GOLDEN") == "1"
CASES = sorted(p.name for p in GOLDEN.iterdir() if p.is_dir())


def load_options(case: str) -> AgentOptions:
    spec: dict[str, Any] = yaml.safe_load((GOLDEN / case / "options.yaml").read_text())
    spec["proxy_type"] = ProxyType(spec["proxy_type"])
    if "interception_mode" in spec:
        spec["interception_mode"] = InterceptionMode(spec["interception_mode"])
    if "xds_type" in spec:
        spec["xds_type"] = XdsType(spec["xds_type"])
    if "ports" in spec:
        spec["ports"] = Ports(**spec["ports"])
    for key in ("ip_addresses", "stats_inclusion_prefixes", "stats_inclusion_regexps"):
        if key in spec:
            spec[key] = tuple(spec[key])
    return AgentOptions(**spec)


def dump(options: AgentOptions) -> str:
    return yaml.safe_dump(
        bootstrap_dict(build_bootstrap(options)), sort_keys=True, default_flow_style=False
    )


def test_every_case_folder_is_complete() -> None:
    """Istio's stale-golden check: a folder without its input or its golden fails."""
    assert CASES
    for case in CASES:
        assert (GOLDEN / case / "options.yaml").is_file(), f"{case}: options.yaml missing"
        if not REFRESH:
            assert (GOLDEN / case / "bootstrap.yaml").is_file(), (
                f"{case}: bootstrap.yaml missing; run REFRESH_GOLDEN=1 and review it"
            )
    stray = [p.name for p in GOLDEN.iterdir() if not p.is_dir()]
    assert not stray, f"files outside case folders: {stray}"


@pytest.mark.parametrize("case", CASES)
def test_matches_golden(case: str) -> None:
    text = dump(load_options(case))
    path = GOLDEN / case / "bootstrap.yaml"
    if REFRESH:
        path.write_text(text)
    assert path.read_text() == text, (
        f"{case}: bootstrap differs from {path}; run REFRESH_GOLDEN=1 and review the diff"
    )


@pytest.mark.parametrize("case", CASES)
def test_deterministic(case: str) -> None:
    options = load_options(case)
    assert bootstrap_json(build_bootstrap(options)) == bootstrap_json(build_bootstrap(options))


@pytest.mark.parametrize("case", CASES)
def test_node_id_is_what_the_control_plane_parses(case: str) -> None:
    options = load_options(case)
    node = parse_node_id(build_bootstrap(options).node.id)
    assert (node.type, node.ip, node.pod_name, node.namespace) == (
        options.proxy_type,
        options.ip_addresses[0],
        options.pod_name,
        options.namespace,
    )
    assert node.dns_domain == f"{options.namespace}.svc.cluster.local"


@pytest.mark.envoy
@pytest.mark.parametrize("case", CASES)
def test_envoy_accepts(case: str, tmp_path: Path) -> None:
    config = tmp_path / "envoy-rev.json"
    options = load_options(case)
    config.write_text(bootstrap_json(build_bootstrap(options)))
    if options.secure_xds:  # the agent copies the mesh root there; Envoy checks it exists
        root = tmp_path / ROOT_CERT_PATH
        root.parent.mkdir(parents=True)
        root.write_bytes(LocalCa.create().root_pem)
    result = subprocess.run(
        [str(proxy_binary()), "--mode", "validate", "-c", str(config), "-l", "error"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr + result.stdout


def test_sidecar_metadata_is_istios() -> None:
    meta = node_metadata(load_options("sidecar"))
    assert meta["NAMESPACE"] == "default"
    assert meta["SERVICE_ACCOUNT"] == "bookinfo-productpage"
    assert meta["INTERCEPTION_MODE"] == "REDIRECT"
    assert meta["WORKLOAD_NAME"] == "productpage-v1"
    assert meta["CLUSTER_ID"] == "Kubernetes"
    assert meta["LABELS"]["app"] == "productpage"
    assert meta["ISTIO_VERSION"]


def test_router_has_no_interception_mode() -> None:
    assert "INTERCEPTION_MODE" not in node_metadata(load_options("router"))


def test_ads_type_and_admin_on_loopback() -> None:
    boot = build_bootstrap(load_options("sidecar-interception-none"))
    ads = boot.dynamic_resources.ads_config
    assert ads.api_type == ads.GRPC and ads.set_node_on_first_message_only
    assert boot.admin.address.socket_address.address == "127.0.0.1"
    assert boot.admin.address.socket_address.port_value == 25000
    delta = build_bootstrap(load_options("sidecar")).dynamic_resources.ads_config
    assert delta.api_type == delta.DELTA_GRPC

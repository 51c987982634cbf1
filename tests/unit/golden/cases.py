"""Golden cases: one folder per case under golden/xds, discovered by walking the folders.

A case folder holds `proxy.yaml` (which proxy, its type, and optionally `inputs:` paths
relative to the case folder; default `config.yaml`) and the expected output, one file per
xDS type: lds.yaml, rds.yaml, cds.yaml, eds.yaml, sds.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from meshpilot.model.proxy import ProxyType

CASES_DIR = Path(__file__).parent / "xds"
SECTIONS = {
    "lds": "listeners",
    "rds": "routes",
    "cds": "clusters",
    "eds": "endpoints",
    "sds": "secrets",
}
# Compared only when the case has the file (most cases serve no extension configs).
OPTIONAL_SECTIONS = {"ecds": "extension_configs"}


@dataclass(frozen=True)
class GoldenCase:
    name: str
    folder: Path
    proxy: str
    proxy_type: ProxyType
    inputs: tuple[Path, ...]

    def golden(self, short: str) -> Path:
        return self.folder / f"{short}.yaml"


def load_cases() -> list[GoldenCase]:
    cases = []
    for folder in sorted(p for p in CASES_DIR.iterdir() if p.is_dir()):
        spec = yaml.safe_load((folder / "proxy.yaml").read_text())
        inputs = tuple((folder / p).resolve() for p in spec.get("inputs", ["config.yaml"]))
        cases.append(
            GoldenCase(
                folder.name, folder, spec["proxy"], ProxyType(spec.get("type", "sidecar")), inputs
            )
        )
    return cases


def dump(resources: list[dict[str, object]]) -> str:
    return yaml.safe_dump(resources, sort_keys=True, default_flow_style=False, width=100)

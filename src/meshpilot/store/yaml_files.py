"""YAML for the store's object files: libyaml when PyYAML was built with it (the
pure-Python loader and dumper are several times slower, and every drift check reads);
objects of the usual shape are written without PyYAML's representer (yaml_emit.py)."""

from __future__ import annotations

from typing import Any

import yaml

from meshpilot.store.yaml_emit import emit_block_yaml

__all__ = ["YAMLError", "dump_manifest", "load_manifest"]

YAMLError = yaml.YAMLError
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_manifest(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)


def dump_manifest(manifest: dict[str, Any]) -> str:
    text = emit_block_yaml(manifest)
    if text is not None:
        return text
    return str(yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False))

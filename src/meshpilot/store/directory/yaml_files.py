"""YAML for the store's object files: read with the loader's bounded reader (libyaml, and
a file someone edited by hand cannot expand aliases without bound or raise past the store);
written with libyaml's dumper when PyYAML was built with it (the pure-Python one is several
times slower), and objects of the usual shape without PyYAML's representer (yaml_emit.py)."""

from __future__ import annotations

from typing import Any

import yaml

from meshpilot.config.yaml_load import YAMLInputError, load_yaml
from meshpilot.config.yaml_resolve import Dumper
from meshpilot.store.directory.yaml_emit import emit_block_yaml

__all__ = ["YAMLInputError", "dump_manifest", "load_manifest"]


def load_manifest(text: str, file: str) -> Any:
    """The file's one document; YAMLInputError names file and line."""
    return load_yaml(text, file)


def dump_manifest(manifest: dict[str, Any]) -> str:
    text = emit_block_yaml(manifest)
    if text is not None:
        return text
    return str(yaml.dump(manifest, Dumper=Dumper, sort_keys=False, default_flow_style=False))

"""The store's direct YAML writer: whatever it writes reads back as exactly what was given
(through the store's own libyaml loader); what it cannot write safely is left to PyYAML."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from meshpilot.store.directory.yaml_emit import emit_block_yaml
from meshpilot.store.directory.yaml_files import dump_manifest, load_manifest

ROOT = Path(__file__).resolve().parents[3]

# strings a YAML 1.1 reader would turn into something else, or that need quotes
TRICKY = [
    "",
    " ",
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "n",
    "true",
    "False",
    "null",
    "Null",
    "~",
    "-",
    "0",
    "007",
    "0x1F",
    "0b101",
    "1_000",
    "1:20",
    "1.5",
    ".5",
    "1e5",
    ".inf",
    "-.Inf",
    ".NaN",
    "2026-11-23",
    "2026-11-23T09:00:00Z",
    "<<",
    "=",
    "a: b",
    "a:b",
    "a #b",
    "#x",
    "- a",
    "-a",
    "? x",
    "[x]",
    "{x}",
    "*ref",
    "&anchor",
    "!tag",
    "|",
    ">",
    "%x",
    "@x",
    "`x",
    "'quoted'",
    '"dq"',
    "it's",
    "trailing ",
    " leading",
    "a  b",
    "tab\there",
    "line\nbreak",
    "cr\rx",
    "nel\x85x",
    "ls\u2028x",
    "bom\ufeffx",
    "del\x7fx",
    "ünïcode ✓",
    "emoji 😀",
    "spiffe://cluster.local/ns/default/sa/bookinfo",
    "outbound|80|v1|reviews.default.svc",
    "successfully synced (all tasks run)",
    "x" * 200,
    "k8s.io/name",
    "a,b",
    "(x)",
]


def _corpus() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    # the inputs and Envoy configurations of every golden case, the examples, the fixtures
    for path in sorted([*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/unit/**/*.yaml")]):
        try:
            docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue
    return docs


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice([*TRICKY, 0, -7, 12345678901234567890, True, False, None, 1.5, [], {}])
    if roll < 0.75:
        return {rng.choice(TRICKY) or "k": _random_value(rng, depth + 1) for _ in range(3)}
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(1, 3))]


def test_every_example_and_corpus_object_reads_back_unchanged() -> None:
    docs = _corpus()
    assert len(docs) > 100
    written = 0
    for doc in docs:
        text = emit_block_yaml(doc)
        if text is not None:
            written += 1
            assert load_manifest(text, "t.yaml") == doc, text
        assert load_manifest(dump_manifest(doc), "t.yaml") == doc
    assert written >= len(docs) * 0.9  # the fast path is the common path


@pytest.mark.parametrize("seed", range(40))
def test_random_documents_read_back_unchanged(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        doc = {rng.choice(TRICKY) or "k": _random_value(rng, 0) for _ in range(4)}
        text = emit_block_yaml(doc)
        if text is not None:
            assert load_manifest(text, "t.yaml") == doc, text
        assert load_manifest(dump_manifest(doc), "t.yaml") == doc


def test_every_tricky_string_as_key_and_value() -> None:
    for text in TRICKY:
        doc = {text: text, "list": [text, {text: [text]}]}
        out = emit_block_yaml(doc)
        if out is not None:
            assert load_manifest(out, "t.yaml") == doc, out
        assert load_manifest(dump_manifest(doc), "t.yaml") == doc


def test_layout_matches_pyyaml_for_plain_manifests() -> None:
    doc = {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": "reviews", "namespace": "default", "labels": {}},
        "spec": {
            "hosts": ["reviews"],
            "http": [{"route": [{"destination": {"host": "reviews", "subset": "v1"}}]}],
            "tcp": [],
        },
    }
    expected = yaml.dump(doc, Dumper=yaml.SafeDumper, sort_keys=False, default_flow_style=False)
    assert emit_block_yaml(doc) == expected


def test_what_it_leaves_to_pyyaml() -> None:
    for doc in ({"f": 1.5}, {"s": "two\nlines"}, {1: "int key"}, {"k" * 129: 1}, {"t": (1,)}):
        assert emit_block_yaml(doc) is None
        assert load_manifest(dump_manifest(doc), "t.yaml") == {
            k: list(v) if isinstance(v, tuple) else v for k, v in doc.items()
        }

"""Hostile YAML (bad tags, huge integers, self-containing anchors, deep nesting, alias bombs)
is a diagnostic naming file and line: from the reader, and from `meshpilot analyze` (exit 1)."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from meshpilot.config.loader import load_paths, load_text
from meshpilot.config.yaml_source import read_text

MESHPILOT = str(Path(sys.executable).parent / "meshpilot")
HEAD = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: default}\ndata:\n"
# The classic "billion laughs": 9 levels of 9 aliases, 10^9 strings once expanded.
LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)

# (file content, line, message after "invalid YAML: ")
CASES = {
    "int": (HEAD + "  n: !!int abc\n", 5, "!!int 'abc' is not an integer"),
    "bool": (HEAD + "  flag: !!bool x\n", 5, "!!bool 'x' is not a boolean"),
    "timestamp": (HEAD + "  at: !!timestamp x\n", 5, "!!timestamp 'x' is not a timestamp"),
    "float": (HEAD + "  f: !!float abc\n", 5, "!!float 'abc' is not a number"),
    "binary": (HEAD + "  b: !!binary x\n", 5, "!!binary 'x' is not base64 data"),
    "custom-tag": (HEAD + "  c: !foo x\n", 5, "unknown tag !foo on 'x'"),
    # plain, kubectl reads so long a number as a string; tagged it must be an int
    "big-int": (
        HEAD + "  big: !!int " + "9" * 5000 + "\n",
        5,
        "integer of 5000 digits is too large",
    ),
    "recursive-anchor": (HEAD + "  a: &a [*a]\n", 5, "an anchor's value contains its alias"),
    "deep": (HEAD + "  d: " + "[" * 300 + "]" * 300 + "\n", 5, "nested deeper than 200 levels"),
    "laughs": (LAUGHS, 4, "too many aliases (alias expansion bounded"),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_yaml_is_one_diagnostic_naming_the_line(name: str) -> None:
    text, line, message = CASES[name]
    result = read_text(text, f"{name}.yaml")
    assert result.documents == []
    [diag] = result.diagnostics
    assert (diag.file, diag.line) == (f"{name}.yaml", line)
    assert diag.message.startswith(f"invalid YAML: {message}"), diag.message


def test_a_bad_document_leaves_the_others_of_its_file() -> None:
    text = CASES["int"][0] + "---\n" + HEAD.replace("name: app", "name: good") + "  k: v\n"
    result = load_text(text, "two.yaml")
    assert [o.name for o in result.objects] == ["good"]
    assert [str(d) for d in result.diagnostics] == [
        "two.yaml:5: error: invalid YAML: !!int 'abc' is not an integer"
    ]


def test_ordinary_aliases_merges_and_timestamps_still_read() -> None:
    text = (
        "base: &base {a: 1, b: 2}\n"
        "derived:\n  <<: *base\n  b: 3\n"
        "copies: [*base, *base]\n"
        "at: 2024-01-02T03:04:05Z\n"
        "eq: =\n"
    )
    result = read_text(text, "ok.yaml")
    assert result.diagnostics == []  # `b: 3` overrides a merged key: not a duplicate
    [doc] = result.documents
    assert doc.data["derived"] == {"a": 1, "b": 3}
    assert doc.data["copies"] == [{"a": 1, "b": 2}] * 2
    assert doc.data["at"] == "2024-01-02T03:04:05Z"
    assert doc.data["eq"] == "="


def test_billion_laughs_stops_at_once_with_little_memory(tmp_path: Path) -> None:
    (tmp_path / "lol.yaml").write_text(LAUGHS)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = load_paths([tmp_path])
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [d.message.split(" (")[0] for d in result.diagnostics] == [
        "invalid YAML: too many aliases"
    ]
    assert elapsed < 0.5 and peak < 50 * 2**20, (elapsed, peak)


def test_analyze_reports_each_file_and_line_and_exits_65(tmp_path: Path) -> None:
    for name, (text, _, _) in CASES.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    started = time.monotonic()
    result = subprocess.run(
        [MESHPILOT, "analyze", "-f", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert time.monotonic() - started < 20
    assert result.returncode == 65, result.stdout + result.stderr  # istioctl: unparseable input
    assert "Internal error" not in result.stderr and "Traceback" not in result.stderr
    for name, (_, line, message) in CASES.items():
        expected = f"Error [MP0001] ({tmp_path / name}.yaml:{line}) invalid YAML: {message}"
        assert expected in result.stdout + result.stderr

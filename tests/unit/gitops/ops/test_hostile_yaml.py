"""A repository file with hostile YAML fails the sync with its file and line, as invalid YAML
does; an alias bomb stops at once through the Git render path."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from meshpilot.gitops.model import OperationPhase
from meshpilot.gitops.sync.execute import execute_sync
from tests.unit.config.test_yaml_hostile import LAUGHS
from tests.unit.gitops.ops.env import make_world

CASES = {
    "int": ("kind: !!int abc\n", "mesh/bad.yaml:1: invalid YAML: !!int 'abc' is not an integer"),
    "custom-tag": ("a: 1\nb: !foo x\n", "mesh/bad.yaml:2: invalid YAML: unknown tag !foo"),
    "big-int": ("a: !!int " + "1" * 5000 + "\n", "mesh/bad.yaml:1: invalid YAML: integer of 5000"),
    "recursive": ("a: &a [*a]\n", "mesh/bad.yaml:1: invalid YAML: an anchor's value contains"),
    "laughs": (LAUGHS, "mesh/bad.yaml:4: invalid YAML: too many aliases"),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_file_fails_the_sync_naming_file_and_line(tmp_path: Path, name: str) -> None:
    text, expected = CASES[name]
    world = make_world(tmp_path)
    world.repo.commit({"mesh/bad.yaml": text}, "hostile")
    tracemalloc.start()
    started = time.perf_counter()
    try:
        outcome = execute_sync(world.app(), world.deps)
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcome.phase is OperationPhase.FAILED
    assert expected in outcome.message, outcome.message
    assert expected in world.status()["operationState"]["message"]
    assert world.live("VirtualService", "reviews") is None  # nothing of the commit applied
    assert elapsed < 10 and peak < 50 * 2**20, (elapsed, peak)

"""/debug/objectz reads back into the very objects the control plane serves (durations
included), with the line of every field, so that `analyze --discovery` sees what the files
say; a page of another shape is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshpilot.config.loader import load_paths
from meshpilot.discovery.objects_api import ObjectzError, objectz, read_objectz
from meshpilot.store.base import StoreSnapshot
from tests.conftest import REPO

INPUTS = [
    REPO / "examples" / "bookinfo",
    *sorted((REPO / "tests/unit/golden/inputs").glob("*.yaml")),
]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.stem)
def test_objects_read_back_unchanged(path: Path) -> None:
    loaded = load_paths([path])
    snapshot = StoreSnapshot(1, {o.key: o for o in loaded.objects}, loaded.mesh)
    back = read_objectz(json.loads(json.dumps(objectz(snapshot))))
    assert back.mesh == loaded.mesh
    served = {o.key: o for o in loaded.objects}
    assert [o.key for o in back.objects] == sorted(served)
    for obj in back.objects:
        assert obj.origin == served[obj.key].origin
        if obj.key.kind != "Secret":  # values are redacted
            assert obj.model == served[obj.key].model, obj.key


def test_a_page_of_another_shape_is_a_clear_error() -> None:
    with pytest.raises(ObjectzError, match="/debug/objectz page is not what this meshpilot reads"):
        read_objectz({"mesh": {}, "objects": [{"kind": "Nope"}], "diagnostics": []})

"""FileStore's merge of only the files read again (store/file_edits.py) gives, edit after edit,
the very snapshot and change events that merging every file whole gives."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from meshpilot.store import ChangeEvent, FileStore, StoreSnapshot, files
from tests.unit.xds_server.test_file_store import write

NAMES = ("web", "api", "db", "cache")
SVC = """apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: default}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: http, port: {port}}}]
"""
VS = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: default}}
spec:
  hosts: [{name}]
  http:
  - route:
    - destination: {{host: {name}, subset: v{port}}}
"""
INVALID = """apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: default}}
spec:
  hosts: [{name}]
  http: {port}
"""
BROKEN = "kind: [unclosed\n"
MESH = "outboundTrafficPolicy: {{mode: {mode}}}\n"


def _document(rng: random.Random, file: int) -> str:
    """Mostly names of the file's own; one in ten shared with the other files."""
    name = rng.choice(NAMES) if rng.random() < 0.1 else f"{rng.choice(NAMES)}-{file}"
    port = rng.choice((8080, 9090))
    template = rng.choices((SVC, VS, INVALID), weights=(10, 10, 1))[0]
    return template.format(name=name, port=port)


def _edit(rng: random.Random, root: Path) -> None:
    """One random edit: mostly a file rewritten with a few objects (names collide across
    files now and then), sometimes an invalid object, broken YAML, a mesh config, a file
    removed."""
    file = rng.randrange(4)
    name = f"f{file}.yaml"
    roll = rng.random()
    if roll < 0.05:
        (root / name).unlink(missing_ok=True)
    elif roll < 0.08:
        write(root / name, BROKEN)
    elif roll < 0.11:
        mode = rng.choice(("ALLOW_ANY", "REGISTRY_ONLY"))
        write(root / rng.choice(("meshconfig.yaml", "sub/mesh.yaml")), MESH.format(mode=mode))
    else:
        docs = {_document(rng, file) for _ in range(rng.randrange(1, 4))}
        write(root / name, "---\n".join(sorted(docs)))


def _seen(snap: StoreSnapshot) -> dict[str, Any]:
    """What a snapshot tells its readers (objects by key with their source)."""
    return {
        "version": snap.version,
        "objects": {
            k: (o.model, o.origin.file, o.origin.line_of(())) for k, o in snap.objects.items()
        },
        "mesh": snap.mesh,
        "diagnostics": sorted(str(d) for d in snap.diagnostics),
        "stale": snap.stale,
        "error": snap.error,
    }


@pytest.mark.parametrize("seed", range(8))
def test_merging_the_edited_files_alone_equals_merging_every_file(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    (tmp_path / "sub").mkdir()
    for _ in range(4):
        _edit(rng, tmp_path)
    stores = [FileStore([tmp_path], incremental=True), FileStore([tmp_path], incremental=False)]
    events: list[list[ChangeEvent]] = [[], []]
    for store, seen in zip(stores, events, strict=True):
        store.subscribe(seen.append)
        store.load()
    fast = 0
    edited = files.edited_objects

    def counting(*args: Any) -> Any:
        nonlocal fast
        found = edited(*args)
        fast += found is not None
        return found

    monkeypatch.setattr(files, "edited_objects", counting)
    for step in range(80):
        for _ in range(rng.choice((1, 1, 2, 3))):  # a read may see several files edited
            _edit(rng, tmp_path)
        for store in stores:
            store.load()
        merged, whole = (_seen(s.snapshot()) for s in stores)
        assert merged == whole, f"seed {seed}, step {step}"
        assert [e.keys for e in events[0]] == [e.keys for e in events[1]], step
    assert fast >= 3, fast  # the merge of the edited files alone did some (most, mostly)

"""replace_files: whole files, 0600, in 0700 directories made only when missing (also when
one was removed after an earlier write), and no temporary file left behind."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

from meshpilot.store.directory.atomic import fsync_dirs, replace_files


def test_missing_directories_are_made_and_existing_files_replaced(tmp_path: Path) -> None:
    target = tmp_path / "VirtualService" / "shop" / "reviews.yaml"
    dirs = replace_files([(target, "a: 1\n")])
    assert target.read_text() == "a: 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.parent.parent.stat().st_mode) == 0o700  # <Kind> too
    assert dirs == [target.parent]
    fsync_dirs(dirs)
    replace_files([(target, "a: 2\nnon-ascii: é\n")], durable=False)
    assert target.read_text(encoding="utf-8") == "a: 2\nnon-ascii: é\n"
    assert [p.name for p in target.parent.iterdir()] == ["reviews.yaml"]


def test_a_directory_removed_since_the_last_write_is_made_again(tmp_path: Path) -> None:
    first = tmp_path / "Service" / "shop" / "a.yaml"
    replace_files([(first, "x\n")])
    shutil.rmtree(tmp_path / "Service")
    second = tmp_path / "Service" / "shop" / "b.yaml"
    replace_files([(first, "y\n"), (second, "z\n")])
    assert first.read_text() == "y\n" and second.read_text() == "z\n"
    assert sorted(p.name for p in first.parent.iterdir()) == ["a.yaml", "b.yaml"]

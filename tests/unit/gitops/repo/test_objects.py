"""Object lookups through the mirror's long-lived `git cat-file --batch-check`, against
`git rev-parse` in real repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshpilot.gitops.repo import RepoService
from meshpilot.gitops.repo.errors import GitCommandError
from meshpilot.gitops.repo.objects import ObjectReader
from tests.gitops_fixtures import GitRepo, make_repo


@pytest.fixture
def origin(tmp_path: Path) -> GitRepo:
    return make_repo(tmp_path / "origin", {"apps/a/cm.yaml": "v: 1\n", "apps/b/cm.yaml": "v: 1\n"})


def _reader(service: RepoService, url: str) -> ObjectReader:
    readers = list(service._readers.values())
    assert len(readers) == 1, readers
    return readers[0]


def test_tree_ids_and_commits_match_git(origin: GitRepo, tmp_path: Path) -> None:
    service = RepoService(tmp_path / "cache")
    url = str(origin.path)
    head = service.resolve(url, "main")
    for path in ("apps/a", "apps/b", "/apps/", "."):
        rel = path.strip("/") or "."
        spec = f"{head}^{{tree}}" if rel == "." else f"{head}:{rel}"
        assert service.tree_hash(url, head, path) == origin.git("rev-parse", spec)
    assert service.tree_hash(url, head, "apps/none") is None
    reader = _reader(service, url)
    commit = reader.lookup(f"{head}^{{commit}}")
    assert commit is not None and (commit.oid, commit.type) == (head, "commit")
    assert reader.lookup("0" * 40 + "^{commit}") is None
    service.close()
    assert not reader.alive and not service._readers


def test_reader_sees_objects_fetched_after_it_started(origin: GitRepo, tmp_path: Path) -> None:
    service = RepoService(tmp_path / "cache")
    url = str(origin.path)
    first = service.resolve(url, "main")
    assert service.tree_hash(url, first, "apps/a") is not None  # the reader runs from here
    reader = _reader(service, url)
    # a small push (loose objects in the mirror) and a large one (a pack)
    second = origin.commit({"apps/a/cm.yaml": "v: 2\n"})
    assert reader.lookup(f"{second}^{{commit}}") is None  # not fetched yet
    assert service.resolve(url, "main") == second
    big = origin.commit({f"apps/b/f{i}.yaml": f"v: {i}\n" for i in range(150)})
    assert service.resolve(url, "main") == big
    assert service.tree_hash(url, big, "apps/b") == origin.git("rev-parse", f"{big}:apps/b")
    assert service.tree_hash(url, second, "apps/a") != service.tree_hash(url, first, "apps/a")
    assert _reader(service, url) is reader  # the same process answered throughout
    service.close()


def test_a_dead_reader_falls_back_to_git_and_restarts(origin: GitRepo, tmp_path: Path) -> None:
    service = RepoService(tmp_path / "cache")
    url = str(origin.path)
    head = service.resolve(url, "main")
    reader = _reader(service, url)
    assert reader._proc is not None
    reader._proc.kill()
    reader._proc.wait()
    # the lookup fails, the service answers through `git rev-parse`, nothing is lost
    assert service.tree_hash(url, head, "apps/a") == origin.git("rev-parse", f"{head}:apps/a")
    assert not reader.alive
    new = origin.commit({"apps/a/cm.yaml": "v: 3\n"})
    assert service.resolve(url, "main") == new  # a new reader is started for this
    assert _reader(service, url) is not reader
    service.close()


def test_unusable_names_are_refused(origin: GitRepo, tmp_path: Path) -> None:
    service = RepoService(tmp_path / "cache")
    url = str(origin.path)
    head = service.resolve(url, "main")
    reader = _reader(service, url)
    with pytest.raises(GitCommandError):
        reader.lookup(f"{head}:apps/a\n{head}")
    assert reader.alive  # refused before anything reached git
    # a path with a newline still gets an answer (through git rev-parse)
    assert service.tree_hash(url, head, "apps/a\nx") is None
    service.close()

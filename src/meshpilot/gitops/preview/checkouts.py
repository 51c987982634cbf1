"""The repo service for one preview: every revision resolved once (no `ls-remote` per
render) and every commit extracted once for all the apps rendered from it; the private
working trees are removed when the preview ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from meshpilot.gitops.repo.fetch import RepoService
from meshpilot.gitops.repo.urls import normalize_url

__all__ = ["PreviewRepos"]


class PreviewRepos(RepoService):
    def __init__(self, repos: RepoService, stack: ExitStack) -> None:
        super().__init__(repos.cache_root, repos.credentials, repos.timeout, repos.base_env)
        self._stack = stack  # owns the shared working trees
        self._resolved: dict[tuple[str, str], str] = {}
        self._trees: dict[tuple[str, str], Path] = {}

    def resolve(self, url: str, revision: str) -> str:
        key = (normalize_url(url), revision)
        if key not in self._resolved:
            self._resolved[key] = super().resolve(url, revision)
        return self._resolved[key]

    @contextmanager
    def checkout(
        self, url: str, commit: str, temp_parent: Path | None = None, only: str = ""
    ) -> Iterator[Path]:
        # Renderers only read the tree, except Helm's charts/ (the same for one commit);
        # plugins run in their own copy. The whole commit once serves every app (`only` unused).
        key = (normalize_url(url), commit)
        if key not in self._trees:
            tree = self._stack.enter_context(super().checkout(url, commit, temp_parent))
            self._trees[key] = tree
        yield self._trees[key]

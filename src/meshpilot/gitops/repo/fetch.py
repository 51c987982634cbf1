"""The repo service: a bare mirror per repository URL, revision resolution, checkouts.

Mirrors live in `cache_root/<sha256 of the normalised URL>.git` (spec §3.5). A revision is
resolved against `git ls-remote` (cheap: no fetch when the commit is already mirrored), so
an unchanged branch costs one round trip. Checkouts are `git archive` of one commit
extracted into a private 0700 directory that is removed when the block ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import re
import tarfile
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from meshpilot.gitops.repo.credentials import RepoCredential, select_credential
from meshpilot.gitops.repo.errors import (
    GitCommandError,
    RepoUnreachableError,
    UnknownRevisionError,
)
from meshpilot.gitops.repo.git import GitEnv, git_auth, run_git
from meshpilot.gitops.repo.messages import unreachable_message
from meshpilot.gitops.repo.objects import ObjectInfo, ObjectReader
from meshpilot.gitops.repo.tempdir import private_tempdir
from meshpilot.gitops.repo.trust import RepoTrust
from meshpilot.gitops.repo.urls import cache_key, is_local, scrub

__all__ = ["RepoService"]

_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")
_FETCH_REFS = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]


def _remote_url(url: str) -> str:
    if url.startswith("file://"):
        return url
    return str(Path(url).resolve()) if is_local(url) else url


class RepoService:
    def __init__(
        self,
        cache_root: Path,
        credentials: Sequence[RepoCredential] = (),
        timeout: float = 120.0,
        base_env: Mapping[str, str] | None = None,
        trust: RepoTrust | None = None,
    ) -> None:
        self.cache_root = cache_root
        self.credentials = list(credentials)
        self.trust = trust or RepoTrust()
        self.timeout = timeout
        self.base_env = dict(base_env or {})
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._tree_ids: dict[tuple[str, str, str], str] = {}
        self._readers: dict[str, ObjectReader] = {}  # mirror key → its cat-file process
        weakref.finalize(self, _close_readers, self._readers)
        cache_root.mkdir(parents=True, exist_ok=True, mode=0o700)

    def close(self) -> None:
        """Stop the mirrors' object readers (they start again when needed)."""
        _close_readers(self._readers)

    def mirror_path(self, url: str) -> Path:
        return self.cache_root / f"{cache_key(url)}.git"

    @contextmanager
    def _locked(self, url: str) -> Iterator[Path]:
        """One git operation per mirror at a time: threads and other processes."""
        key = cache_key(url)
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        lock_file = self.cache_root / f"{key}.lock"
        with lock, lock_file.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield self.mirror_path(url)
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    @contextmanager
    def _env(self, url: str, remote: bool = True) -> Iterator[GitEnv]:
        """git's environment; credentials and trust only for commands that talk to the
        remote (fetch, ls-remote), so mirror-local commands leave no credential files."""
        if not remote or is_local(url):
            with git_auth(None, self.base_env) as env:
                yield env
            return
        cred = select_credential(url, self.credentials)
        with git_auth(cred, self.base_env, self.trust, url) as env:
            yield env

    def _git(self, args: list[str], env: GitEnv, cwd: Path | None, url: str) -> bytes:
        try:
            return run_git(args, env, cwd=cwd, timeout=self.timeout).stdout
        except GitCommandError as exc:
            if args[0] in ("fetch", "ls-remote"):
                cred = select_credential(url, self.credentials)
                raise RepoUnreachableError(unreachable_message(url, str(exc), cred)) from None
            raise

    def ls_remote(self, url: str) -> dict[str, str]:
        """Ref name → commit (tags peeled to their commit)."""
        with self._env(url) as env:
            out = self._git(["ls-remote", _remote_url(url)], env, self.cache_root, url)
        refs: dict[str, str] = {}
        for line in out.decode().splitlines():
            sha, _, ref = line.partition("\t")
            if ref.endswith("^{}"):
                refs[ref[:-3]] = sha  # the peeled commit of an annotated tag wins
            else:
                refs.setdefault(ref, sha)
        return refs

    def _fetch(self, mirror: Path, url: str, env: GitEnv, extra: Sequence[str] = ()) -> None:
        if not (mirror / "HEAD").exists():
            run_git(["init", "--bare", "--quiet", str(mirror)], env, timeout=self.timeout)
        refs = list(extra) or _FETCH_REFS
        self._git(["fetch", "--quiet", "--prune", _remote_url(url), *refs], env, mirror, url)

    def _has_commit(self, url: str, mirror: Path, env: GitEnv, rev: str) -> str | None:
        if not (mirror / "HEAD").exists():
            return None
        try:
            info = self._object(url, mirror, f"{rev}^{{commit}}")
            return info.oid if info is not None else None
        except GitCommandError:
            pass  # the reader cannot answer: a process of its own
        try:
            out = run_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], env, mirror)
        except GitCommandError:
            return None
        return out.stdout.decode().strip() or None

    def _object(self, url: str, mirror: Path, spec: str) -> ObjectInfo | None:
        """Look `spec` up through the mirror's reader (None: no such object); raises
        GitCommandError when the reader cannot say (the caller runs git instead)."""
        key = cache_key(url)
        with self._guard:
            reader = self._readers.get(key)
            if reader is None or not reader.alive:
                try:
                    with git_auth(None, self.base_env) as env:
                        reader = ObjectReader(mirror, env.env, self.timeout)
                except OSError as exc:
                    raise GitCommandError(f"git cat-file: {exc.strerror}") from None
                self._readers[key] = reader
        return reader.lookup(spec)

    def resolve(self, url: str, revision: str) -> str:
        """targetRevision (HEAD, branch, tag, full ref or commit SHA) → a mirrored commit."""
        rev = revision.strip() or "HEAD"
        refs = self.ls_remote(url)
        candidates = [rev] if rev == "HEAD" else [f"refs/heads/{rev}", f"refs/tags/{rev}", rev]
        sha = next((refs[c] for c in candidates if c in refs), None)
        with self._locked(url) as mirror, self._env(url) as env:
            if sha is None and not _HEX.match(rev):
                raise UnknownRevisionError(
                    f"{scrub(url)}: unable to resolve '{rev}' to a commit SHA"
                )
            wanted = sha or rev
            found = self._has_commit(url, mirror, env, wanted)
            if found is None:
                self._fetch(mirror, url, env)
                found = self._has_commit(url, mirror, env, wanted)
            if found is None and len(wanted) == 40:
                # a commit no branch or tag points at (servers may allow fetching it)
                with contextlib.suppress(RepoUnreachableError):
                    self._fetch(mirror, url, env, [wanted])
                found = self._has_commit(url, mirror, env, wanted)
            if found is None:
                raise UnknownRevisionError(
                    f"{scrub(url)}: unable to resolve '{rev}' to a commit SHA"
                )
            return found

    def tree_hash(self, url: str, commit: str, path: str) -> str | None:
        """The git tree id of `path` at `commit` (None: no such directory). Two commits with
        the same tree id render that path alike (Argo CD's manifest-generate-paths idea)."""
        rel = path.strip("/") or "."
        key = (cache_key(url), commit, rel)
        with self._guard:
            hit = self._tree_ids.get(key)
        if hit is not None:
            return hit or None
        spec = f"{commit}^{{tree}}" if rel == "." else f"{commit}:{rel}"
        mirror = self.mirror_path(url)
        try:
            info = self._object(url, mirror, spec) if (mirror / "HEAD").exists() else None
            tree = info.oid if info is not None else ""
        except GitCommandError:  # the reader cannot answer: a process of its own
            with self._locked(url) as mirror, self._env(url, remote=False) as env:
                try:
                    out = run_git(["rev-parse", "--verify", "--quiet", spec], env, mirror)
                    tree = out.stdout.decode().strip()
                except GitCommandError:
                    tree = ""
        with self._guard:
            if len(self._tree_ids) > 10_000:
                self._tree_ids.clear()
            self._tree_ids[key] = tree
        return tree or None

    @contextmanager
    def checkout(
        self, url: str, commit: str, temp_parent: Path | None = None, only: str = ""
    ) -> Iterator[Path]:
        """A private directory with the tree of `commit` (only the directory `only`, at its
        place, when given: a plain directory source needs no more); removed on exit."""
        args = ["archive", "--format=tar", commit]
        if only.strip("/") not in ("", "."):
            args += ["--", only.strip("/")]
        with self._locked(url) as mirror, self._env(url, remote=False) as env:
            tar = run_git(args, env, mirror, self.timeout).stdout
        with private_tempdir(temp_parent, prefix="meshpilot-checkout-") as work:
            with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
                archive.extractall(work, filter="data")
            yield work


def _close_readers(readers: dict[str, ObjectReader]) -> None:
    for reader in list(readers.values()):
        reader.close()
    readers.clear()

"""Which apps a push concerns: Argo CD's revision rule and `manifest-generate-paths`."""

from __future__ import annotations

import pytest

from meshpilot.gitops.controller.push import MANIFEST_PATHS, PushEvent, push_concerns
from meshpilot.gitops.model import Application
from tests.unit.gitops.controller.env import app_manifest


def _app(paths: str | None) -> Application:
    manifest = app_manifest("/repo", "shop", path="apps/shop")
    if paths is not None:
        manifest["metadata"]["annotations"] = {MANIFEST_PATHS: paths}
    return Application.model_validate(manifest)


def _push(*files: str, branches: tuple[str, ...] = ("main",)) -> PushEvent:
    return PushEvent(frozenset({"/repo"}), frozenset(branches), "c0ffee", "main", frozenset(files))


@pytest.mark.parametrize(
    ("paths", "files", "concerned"),
    [
        (None, ("elsewhere/x.yaml",), True),  # no annotation: every push
        (".", (), True),  # the push lists no files: unknown, so yes
        (".", ("apps/shop/vs.yaml",), True),
        (".", ("apps/shop2/vs.yaml",), False),  # a sibling whose name starts the same
        (".", ("apps/shop",), True),  # the path itself
        (".", ("apps/cart/vs.yaml", "apps/shop/deep/er/x.yaml"), True),
        ("/shared", ("shared/values.yaml",), True),  # absolute: from the repository root
        ("/shared", ("apps/shop/shared/values.yaml",), False),
        ("../common; /global/x.yaml", ("global/x.yaml",), True),
        ("../common; /global/x.yaml", ("apps/common/a.yaml",), True),
        ("../common; /global/x.yaml", ("global/y.yaml", "apps/commons/a.yaml"), False),
        ("./sub", ("apps/shop/sub/a.yaml",), True),
        ("./sub", ("apps/shop/subway.yaml",), False),
        ("/", ("anything/at/all",), True),
    ],
)
def test_manifest_generate_paths(
    paths: str | None, files: tuple[str, ...], concerned: bool
) -> None:
    assert push_concerns(_app(paths), "apps/shop", "main", _push(*files)) is concerned


def test_the_revision_rule() -> None:
    app = _app(None)
    assert push_concerns(app, "apps/shop", "HEAD", _push())  # the default branch
    assert not push_concerns(app, "apps/shop", "HEAD", _push(branches=("dev",)))
    assert push_concerns(app, "apps/shop", "refs/heads/dev", _push(branches=("dev",)))
    assert not push_concerns(app, "apps/shop", "0123456789abcdef0123456789abcdef01234567", _push())

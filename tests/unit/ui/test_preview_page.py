"""The app page's preview of a branch, against a real in-process `GitopsServer` and a real
git repo: the CLI's preview text (the rendered diff of the change and the mesh's findings
on it), and clear errors for a branch that does not exist or a name that is not a revision."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.gitops.auth.env import Served, serving
from tests.unit.gitops.controller.env import World, app_manifest, vs
from tests.unit.ui.env import ADMIN_PASSWORD, VIEWER_PASSWORD, Browser, make_ui_world

APP = "/applications/argocd/shop"


@pytest.fixture
def world(tmp_path: Path) -> World:
    world = make_ui_world(tmp_path)
    world.put(app_manifest(str(world.repo.path)))
    world.repo.git("checkout", "-q", "-b", "canary")
    world.repo.commit({"mesh/vs.yaml": vs(80, 20)}, "canary 80/20")
    world.repo.git("checkout", "-q", "main")
    return world


@pytest.fixture
def served(world: World) -> Iterator[Served]:
    with serving(world) as served:
        yield served


def test_preview_of_a_branch_shows_the_rendered_change(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("viewer", VIEWER_PASSWORD)  # reading: a read-only user may preview
    page = browser.get(APP)
    assert f'action="{APP}/preview"' in page.body
    reply = browser.get(APP + "/preview?head=canary")
    assert reply.status == 200
    text = html.unescape(reply.body)
    assert "Preview of canary" in text
    assert "VirtualService" in text and "weight: 80" in text and "weight: 100" in text
    verdict = reply.body.split('id="preview-verdict">')[1].split("</p>")[0]
    # The test's VirtualService sends 20% to a host no service has: the mesh's check fails.
    assert 'class="badge h-Degraded">fails' in verdict, verdict
    assert "IST0101: VirtualService shop/reviews" in text


def test_preview_errors_are_named(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    missing = html.unescape(browser.get(APP + "/preview?head=no-such-branch").body)
    assert 'role="alert"' in missing and "no-such-branch" in missing
    odd = html.unescape(browser.get(APP + "/preview?head=--upload-pack%3Dx").body)
    assert "head '--upload-pack=x': not a branch, tag or commit name" in odd
    assert "Traceback" not in missing + odd

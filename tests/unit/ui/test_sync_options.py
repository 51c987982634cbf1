"""The sync form's options through the pages, against a real in-process `GitopsServer`: a dry
run writes nothing and says so, selected resources sync alone, and a failing sync shows the
operation's error (naming the file) and the app's conditions on the app page."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.gitops.auth.env import Served, serving
from tests.unit.gitops.controller.env import World, app_manifest
from tests.unit.ui.env import ADMIN_PASSWORD, Browser, make_ui_world

APP = "/applications/argocd/shop"


@pytest.fixture
def world(tmp_path: Path) -> World:
    world = make_ui_world(tmp_path)
    world.put(app_manifest(str(world.repo.path)))
    return world


@pytest.fixture
def served(world: World) -> Iterator[Served]:
    with serving(world, run_controller=True) as served:
        yield served


def _browser(served: Served) -> Browser:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    deadline = time.monotonic() + 20
    while "OutOfSync" not in browser.get(APP).body:
        assert time.monotonic() < deadline, "the controller never compared the app"
        time.sleep(0.1)
    return browser


def _finished(browser: Browser) -> str:
    """The status panel once the page's operation has finished."""
    deadline = time.monotonic() + 20
    while True:
        body = html.unescape(browser.get(APP + "/events", read=8192).body)
        if 'id="operation-phase">Running' not in body and 'id="operation-phase">' in body:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def test_dry_run_writes_nothing(served: Served, world: World) -> None:
    browser = _browser(served)
    reply = browser.request("POST", APP + "/sync", {"dry_run": "on", "prune": "on"})
    assert reply.status == 303
    panel = _finished(browser)
    assert "Sync by admin (prune, dry run)" in panel
    assert 'id="operation-phase">Succeeded' in panel and "(dry run)" in panel
    assert world.live("VirtualService", "reviews") is None
    assert world.live("Service", "reviews") is None


def test_selected_resources_sync_alone(served: Served, world: World) -> None:
    browser = _browser(served)
    page = browser.get(APP).body
    ref = "networking.istio.io/VirtualService/shop/reviews"
    assert f'value="{ref}"' in page  # the tree's checkbox for it
    reply = browser.request("POST", APP + "/sync", {"resource": [ref]})
    assert reply.status == 303
    panel = _finished(browser)
    assert "(1 selected resources)" in panel and 'id="operation-phase">Succeeded' in panel
    assert world.live("VirtualService", "reviews") is not None
    assert world.live("Service", "reviews") is None  # not selected: not written


def test_a_failing_sync_shows_its_error_and_the_conditions(served: Served, world: World) -> None:
    browser = _browser(served)
    world.repo.commit({"mesh/vs.yaml": "kind: VirtualService\nmetadata: [broken\n"}, "broken")
    reply = browser.request("POST", APP + "/sync", {})
    assert reply.status == 303
    panel = _finished(browser)
    assert 'id="operation-phase">Failed' in panel and "vs.yaml" in panel, panel
    deadline = time.monotonic() + 20
    while "Conditions" not in (page := html.unescape(browser.get(APP).body)):
        assert time.monotonic() < deadline, page
        time.sleep(0.1)
    assert "ComparisonError" in page and "vs.yaml" in page

"""The UI's HTTP side against a real in-process `GitopsServer`: every page is closed without a
session (a page added later too), the session cookie is scoped to the pages (the JSON API
still wants a bearer token, so a cross-site form cannot drive it), login and logout, forged
and cross-site form posts, the live status stream, and the pages' security headers."""

from __future__ import annotations

import html
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.gitops.auth.env import Served, serving
from tests.unit.ui.env import ADMIN_PASSWORD, VIEWER_PASSWORD, Browser, make_ui_world


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    from tests.unit.gitops.controller.env import app_manifest

    world = make_ui_world(tmp_path)
    world.put(app_manifest(str(world.repo.path)))
    with serving(world, run_controller=True) as served:
        yield served


PAGES = [
    "/", "/applications", "/applications/argocd/shop", "/applications/argocd/shop/diff",
    "/applications/argocd/shop/events", "/mesh", "/mesh/explain", "/applications/a/b/later",
]  # fmt: skip


@pytest.mark.parametrize("path", PAGES)
def test_every_page_needs_a_session(served: Served, path: str) -> None:
    browser = Browser(served.base)
    reply = browser.get(path)
    assert reply.status == 303 and reply.headers["location"].startswith("/login?next=/")
    assert browser.request("POST", path, {"x": "1"}).status == 401
    # A cookie that is not a valid token is no session either.
    browser.cookie = "meshpilot.token=forged.token.value"
    assert browser.get(path).status == 303


def test_login_sets_a_strict_http_only_cookie_that_the_api_ignores(served: Served) -> None:
    browser = Browser(served.base)
    wrong = browser.login("admin", "nope")
    assert wrong.status == 401 and "invalid username or password" in wrong.body
    reply = browser.login("admin", ADMIN_PASSWORD)
    assert reply.status == 303 and reply.headers["location"] == "/applications"
    cookie = reply.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    page = browser.get("/applications")
    assert page.status == 200 and 'href="/applications/argocd/shop"' in page.body
    # The JSON API reads only `Authorization: Bearer`: the cookie alone is refused, so a
    # page of another site cannot make the browser call it with the user's session.
    api = browser.get("/api/v1/applications")
    assert api.status == 401 and "no session information" in api.body
    assert browser.request("POST", "/api/v1/applications/argocd/shop/sync").status == 401


def test_login_never_redirects_to_another_site(served: Served) -> None:
    browser = Browser(served.base)
    for target in ("//evil.example/x", "https://evil.example/", "evil"):
        reply = browser.request(
            "POST", "/login?next=" + target, {"username": "admin", "password": ADMIN_PASSWORD}
        )
        assert reply.headers["location"] == "/applications", target


def test_logout_revokes_the_session(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    token = browser.cookie.partition("=")[2]
    assert served.call("GET", "/api/v1/applications", token=token)[0] == 200
    reply = browser.request("POST", "/logout")
    assert reply.status == 303 and "Max-Age=0" in reply.headers["set-cookie"]
    assert browser.get("/applications").status == 303  # the revoked token: no session
    status, answer = served.call("GET", "/api/v1/applications", token=token)
    assert status == 401 and "logged out" in answer["message"]


def test_form_posts_from_another_site_are_refused(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    path = "/applications/argocd/shop/sync"
    for origin in ("http://evil.example", "null"):
        reply = browser.request("POST", path, {"prune": "on"}, {"Origin": origin})
        assert reply.status == 403 and "a form of another site" in reply.body
    reply = browser.request("POST", path, {}, {"Referer": "http://evil.example/page"})
    assert reply.status == 403


def test_read_only_user_has_no_sync_form_and_is_refused(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("viewer", VIEWER_PASSWORD)
    page = browser.get("/applications/argocd/shop")
    assert page.status == 200 and 'id="sync-button"' not in page.body
    assert 'action="/applications/argocd/shop/rollback"' not in page.body
    for path in ("/applications/argocd/shop/sync", "/applications/argocd/shop/rollback"):
        reply = browser.request("POST", path, {"id": "0"})
        assert reply.status == 403, path
        assert "permission denied: applications, sync, default/shop, sub: viewer" in reply.body


def test_unknown_app_and_bad_forms_are_clear_errors(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    missing = browser.get("/applications/argocd/nope")
    assert missing.status == 404
    assert 'applications.argoproj.io "nope" not found' in html.unescape(missing.body)
    bad = browser.request("POST", "/applications/argocd/shop/sync", {"resource": "Service"})
    assert bad.status == 400 and "expected group/kind/namespace/name" in bad.body
    bad = browser.request("POST", "/applications/argocd/shop/rollback", {"id": "x"})
    assert bad.status == 400 and "must be a history id" in bad.body
    assert browser.get("/static/../__init__.py").status == 404
    assert "Traceback" not in "".join(browser.seen)


def test_sync_then_the_event_stream_reports_synced(served: Served) -> None:
    browser = Browser(served.base)
    browser.login("admin", ADMIN_PASSWORD)
    deadline = time.monotonic() + 20
    while "OutOfSync" not in browser.get("/applications/argocd/shop").body:
        assert time.monotonic() < deadline, "the controller never compared the app"
        time.sleep(0.1)
    reply = browser.request("POST", "/applications/argocd/shop/sync", {"prune": "on"})
    assert reply.status == 303 and reply.headers["location"] == "/applications/argocd/shop"
    while True:  # the stream's first event: the panel as it is now
        events = browser.get("/applications/argocd/shop/events", read=4096)
        if 'id="operation-phase">Succeeded' in events.body:
            break
        assert time.monotonic() < deadline, events.body
        time.sleep(0.2)
    assert events.headers["content-type"].startswith("text/event-stream")
    assert "content-length" not in events.headers
    assert "event: status\ndata: <div" in events.body
    assert 'id="sync-status">Synced' in events.body
    assert "Sync by admin (prune)" in events.body


def test_pages_load_nothing_from_elsewhere(served: Served) -> None:
    browser = Browser(served.base)
    login = browser.get("/login")
    csp = login.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp
    assert login.headers["cache-control"] == "no-store"
    browser.login("admin", ADMIN_PASSWORD)
    for page in (login.body, browser.get("/applications/argocd/shop").body):
        assert "http://" not in page.replace(served.base, "") and "https://" not in page
    htmx = browser.get("/static/htmx.min.js")
    assert htmx.status == 200 and htmx.headers["content-type"].startswith("text/javascript")

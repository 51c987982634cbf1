"""The web UI in a real browser (Debian's Chromium, Playwright) against a real `gitops serve`
over a real git repo and directory store: log in, the list, one app's tree and diff, a sync
whose progress arrives live to Synced, drift shown as a diff, history and rollback, a
read-only user without a sync button (and the API's 403), keyboard-only navigation, and
screenshots at 1280x800 and 390x844 in light and dark. One server and one browser for the
module; the tests run in order (the sync before the drift)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.ui_harness import (
    ADMIN_PASSWORD,
    VIEWER_PASSWORD,
    Served,
    chromium,
    cli,
    gitops_serve,
    login,
    shot,
)
from tests.unit.gitops.controller.env import vs


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Any]]:
    tmp = tmp_path_factory.mktemp("ui")
    with gitops_serve(tmp) as served, chromium(tmp) as browser:
        yield served, browser


@pytest.fixture
def admin(world: tuple[Served, Any]) -> Iterator[Any]:
    served, browser = world
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    login(page, served.url, "admin", ADMIN_PASSWORD)
    yield page
    context.close()


def _api(url: str, method: str, path: str, token: str | None, body: Any = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url + path, data, headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=20) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _token(url: str, username: str, password: str) -> str:
    request = urllib.request.Request(
        url + "/api/v1/session", json.dumps({"username": username, "password": password}).encode()
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=20) as reply:
        return str(json.loads(reply.read())["token"])


def test_pages_need_a_session(world: tuple[Served, Any]) -> None:
    served, browser = world
    page = browser.new_page()
    page.goto(served.url + "/applications/argocd/shop")
    assert page.url == served.url + "/login?next=/applications/argocd/shop"
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    assert page.get_by_role("alert").inner_text() == "invalid username or password"
    # The events stream and the diff fragment are closed too; /static is not.
    context = page.context
    assert context.request.get(served.url + "/applications/argocd/shop/diff",
                               max_redirects=0).status == 303  # fmt: skip
    assert context.request.post(served.url + "/applications/argocd/shop/sync").status == 401
    assert context.request.get(served.url + "/static/htmx.min.js").status == 200
    page.close()


def test_list_open_app_sync_live_to_synced(admin: Any, world: tuple[Served, Any]) -> None:
    served, _ = world
    page = admin
    # The controller's first comparison: the app is OutOfSync (nothing applied yet).
    for _ in range(50):
        row = page.get_by_role("row", name="shop")
        if "OutOfSync" in row.inner_text():
            break
        page.wait_for_timeout(200)
        page.reload()
    assert "OutOfSync" in row.inner_text() and "default" in row.inner_text()
    shot(page, "list-1280-light")

    # Filters: a sync status that no app has hides it; the app's own shows it.
    page.get_by_label("Sync").select_option("OutOfSync")
    page.get_by_role("button", name="Filter").click()
    assert page.get_by_role("link", name="shop").is_visible()
    page.goto(served.url + "/applications?sync=Synced")
    assert "No application matches." in page.inner_text("main")
    page.goto(served.url + "/applications")

    page.get_by_role("link", name="shop").click()
    page.wait_for_url(served.url + "/applications/argocd/shop")
    tree = page.locator(".tree").inner_text()
    assert "Service" in tree and "VirtualService" in tree and "reviews" in tree
    # The diff, side by side: nothing live, the desired VirtualService from Git.
    diff = page.locator("section.diff", has_text="networking.istio.io/VirtualService shop/reviews")
    assert "weight: 100" in diff.locator("tr.added td").last.inner_text() or "weight: 100" in (
        diff.inner_text()
    )
    shot(page, "app-outofsync-1280-light")

    page.get_by_label("Prune").check()
    page.get_by_role("button", name="Sync", exact=True).click()
    page.wait_for_url(served.url + "/applications/argocd/shop")
    # Live: the panel changes without a reload (server-sent events).
    page.locator("#operation-phase", has_text="Succeeded").wait_for()
    page.locator("#sync-status", has_text="Synced").wait_for()
    assert "Sync by admin (prune)" in page.locator("#operation").inner_text()
    page.locator("#no-diff").wait_for()  # the diff was compared again: nothing left
    page.reload()
    assert page.locator("table.history tbody tr").count() == 1
    shot(page, "app-synced-1280-light")


def test_drift_shows_in_the_diff_then_history_and_rollback(
    admin: Any, world: tuple[Served, Any]
) -> None:
    served, _ = world
    page = admin
    page.goto(served.url + "/applications/argocd/shop")
    page.locator("#sync-status", has_text="Synced").wait_for()
    # Someone edits the live VirtualService (another process, straight into the store).
    drifted = served.store.parent / "drift.yaml"
    drifted.write_text(vs(50, 50).replace("name: reviews", "name: reviews\n  namespace: shop"))
    assert cli("apply", "-f", str(drifted), "--store", str(served.store)).returncode == 0
    page.locator("#sync-status", has_text="OutOfSync").wait_for()  # live, no reload
    diff = page.locator("section.diff", has_text="VirtualService shop/reviews")
    diff.wait_for()
    changed = diff.locator("tr.changed").all_inner_texts()
    assert any("weight: 50" in row and "weight: 100" in row for row in changed), changed

    # A new commit, synced: two history entries; roll back to the first.
    served.repo.commit({"mesh/vs.yaml": vs(80, 20)}, "80/20")
    page.reload()
    page.get_by_role("button", name="Sync", exact=True).click()
    page.locator("#operation-phase", has_text="Succeeded").wait_for()
    page.reload()
    assert page.locator("table.history tbody tr").count() == 2
    page.get_by_role("button", name="Roll back to 0").click()
    page.locator("#operation", has_text="Rollback by admin").wait_for()
    page.locator("#operation-phase", has_text="Succeeded").wait_for()
    live = cli("get", "virtualservice", "reviews", "-n", "shop", "-o", "yaml",
               "--store", str(served.store))  # fmt: skip
    assert "weight: 100" in live.stdout, live.stdout + live.stderr


def test_read_only_user_sees_no_sync_and_the_api_refuses(world: tuple[Served, Any]) -> None:
    served, browser = world
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(20_000)
    login(page, served.url, "viewer", VIEWER_PASSWORD)
    page.get_by_role("link", name="shop").click()
    page.locator(".tree").wait_for()
    assert page.locator("#sync-button").count() == 0
    assert page.get_by_role("button", name="Sync").count() == 0
    assert page.get_by_role("button", name="Roll back to 0").count() == 0
    assert page.locator("input[name=resource]").count() == 0
    shot(page, "app-readonly-1280-light")
    # A forged form POST with the viewer's session: the API's refusal, as a page.
    answer = context.request.post(
        served.url + "/applications/argocd/shop/sync", form={"prune": "on"},
        headers={"Origin": served.url},
    )  # fmt: skip
    assert answer.status == 403
    assert "permission denied: applications, sync, default/shop, sub: viewer" in answer.text()
    # The JSON API with the viewer's token.
    token = _token(served.url, "viewer", VIEWER_PASSWORD)
    assert _api(served.url, "POST", "/api/v1/applications/argocd/shop/sync", token, {}) == 403
    # Another site's form cannot use an admin's cookie either.
    admin_context = browser.new_context()
    admin_page = admin_context.new_page()
    login(admin_page, served.url, "admin", ADMIN_PASSWORD)
    forged = admin_context.request.post(
        served.url + "/applications/argocd/shop/sync", form={"prune": "on"},
        headers={"Origin": "http://evil.example"},
    )  # fmt: skip
    assert forged.status == 403 and "a form of another site" in forged.text()
    admin_context.close()
    context.close()


def test_keyboard_only_reaches_an_app(admin: Any, world: tuple[Served, Any]) -> None:
    served, _ = world
    page = admin
    page.goto(served.url + "/applications")
    for _ in range(40):
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.textContent.trim()")
        if focused == "shop":
            break
    else:
        raise AssertionError("Tab never reached the app's link")
    # The focus is visible: an outline drawn around the focused link.
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none"), outline
    shot(page, "list-keyboard-focus")
    page.keyboard.press("Enter")
    page.wait_for_url(served.url + "/applications/argocd/shop")
    # The first Tab on a page goes to the skip link, which moves to the content.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent.trim()") == "Skip to content"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_readable_at_both_sizes_light_and_dark(
    world: tuple[Served, Any], scheme: str, width: int, height: int
) -> None:
    served, browser = world
    context = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    page = context.new_page()
    page.set_default_timeout(20_000)
    problems: list[str] = []  # a blocked asset (CSP), a script error, a failed request
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None
    )
    login(page, served.url, "admin", ADMIN_PASSWORD)
    # Nothing wider than the screen but the scrolled tables.
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"the list page is {overflow}px wide at {width}px"
    shot(page, f"list-{width}-{scheme}")
    page.get_by_role("link", name="shop").click()
    page.locator("#diff table, #no-diff").first.wait_for()
    overflow = page.evaluate("document.documentElement.scrollWidth")
    assert overflow <= width, f"the app page is {overflow}px wide at {width}px"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = background == "rgb(13, 17, 23)"
    assert dark == (scheme == "dark"), background
    shot(page, f"app-{width}-{scheme}")
    assert not problems, problems
    context.close()

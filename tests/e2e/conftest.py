"""Fixtures of the browser suite: the stack, Debian's Chromium, a signed-in page.

The suite never downloads a browser: it drives Debian's `chromium` (installed by `.ci/run`),
found on PATH as `.ci/run` looks for it (`CODITY_CHROMIUM` names another binary). Without it,
or without a built dashboard, every test here SKIPS with the reason and `make test` prints a
loud line about it: friendly on a laptop. With `CODITY_REQUIRE_BROWSER_SUITE=1` (`.ci/run`
sets it) the same tests FAIL instead, so CI can never go green without the browser suite.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from playwright.sync_api import Browser, BrowserContext, Page
from tests.e2e.stack import ARTIFACTS, REPO, Stack, running_stack

from codity.db.dsn import plain_dsn, with_database

CHROMIUM = Path(
    os.environ.get("CODITY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
)
#: Set by `.ci/run`: a browser suite that cannot run is a failure, not a skip.
REQUIRED = os.environ.get("CODITY_REQUIRE_BROWSER_SUITE") == "1"
DIST_INDEX = REPO / "web" / "dist" / "index.html"
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
OPERATOR = "operator@codity.test"
VIEWER = "viewer@codity.test"
PASSWORD = "correct-horse-battery-staple"  # the documented demo login


def why_not_runnable() -> str | None:
    if not CHROMIUM.exists():
        return f"BROWSER SUITE NOT RUN: {CHROMIUM} is missing (apt-get install -y chromium)"
    if importlib.util.find_spec("codity.cli.api") is None:
        return "BROWSER SUITE NOT RUN: the `codity api` command does not exist yet"
    if not DIST_INDEX.exists():
        return f"BROWSER SUITE NOT RUN: the dashboard is not built ({DIST_INDEX} missing; run make web)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: the stack is never started for a suite that cannot run.
    if not item.get_closest_marker("e2e"):
        return
    reason = why_not_runnable()
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"{reason} [CODITY_REQUIRE_BROWSER_SUITE=1]", pytrace=False)
    pytest.skip(reason)


async def _create_database(server_url: str, name: str, drop: bool = False) -> None:
    conn = await asyncpg.connect(plain_dsn(server_url))
    try:
        if drop:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


def _run_sync(coro: Coroutine[Any, Any, None]) -> None:
    # A thread of its own: the session's event loop may be running in this one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coro).result()


# Module scope, not session: the stack's processes and Playwright's event loop must be gone
# before the rest of the suite runs (its async tests need this thread's loop back).
@pytest.fixture(scope="module")
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    # CODITY_E2E_URL points the suite at a stack you already run (while developing the UI).
    given = os.environ.get("CODITY_E2E_URL")
    if given:
        yield Stack(web_url=given.rstrip("/"), api_url="", env={}, logs=ARTIFACTS)
        return
    pg_server_url: str = request.getfixturevalue("pg_server_url")
    name = f"codity_e2e_{uuid.uuid4().hex[:8]}"
    _run_sync(_create_database(pg_server_url, name))
    try:
        with running_stack(with_database(pg_server_url, name)) as running:
            yield running
    finally:
        _run_sync(_create_database(pg_server_url, name, drop=True))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser: Browser, stack: Stack) -> Iterator[Callable[..., Page]]:
    """A factory of fresh browser contexts (no shared storage) at laptop or phone width."""
    contexts: list[BrowserContext] = []
    crashes: list[str] = []

    def make(width: int = 1366, height: int = 860) -> Page:
        context = browser.new_context(
            base_url=stack.web_url,
            viewport={"width": width, "height": height},
            timezone_id="Europe/Paris",
            locale="en-GB",
        )
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        # An uncaught exception in the app fails the test even if the screen looked right.
        page.on("pageerror", lambda error: crashes.append(str(error)))
        return page

    yield make
    for context in contexts:
        context.close()
    assert not crashes, f"uncaught errors in the dashboard: {crashes}"


#: Inside a page.evaluate(async () => {...}): `access_token` = a fresh access token of the page's
#: session, obtained as the dashboard does after a reload (the httpOnly refresh cookie, the
#: CSRF header from the readable cookie). The app itself keeps its token in memory only.
ACCESS_TOKEN_JS = """
    const csrf = decodeURIComponent(document.cookie.split("; ")
        .find((c) => c.startsWith("codity_csrf=")).split("=")[1]);
    const refreshed = await fetch("/api/v1/auth/refresh",
                                  { method: "POST", headers: { "X-CSRF-Token": csrf } });
    const { access_token } = await refreshed.json();
"""


def login(page: Page, email: str = OPERATOR, password: str = PASSWORD, path: str = "/") -> None:
    page.goto(path)
    page.get_by_test_id("login-email").fill(email)
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
    page.get_by_test_id("current-role").wait_for()


def screenshot(page: Page, name: str, publish: bool = False) -> Path:
    """Save a screenshot as a test artifact. With CODITY_PUBLISH_SCREENSHOTS=1, `publish` also
    copies it to docs/screenshots (the README's pictures), so an ordinary `make test` leaves the
    working tree clean."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if publish and os.environ.get("CODITY_PUBLISH_SCREENSHOTS") == "1":
        docs = REPO / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, docs / path.name)
    return path


AXE_SOURCE = REPO / "web" / "node_modules" / "axe-core" / "axe.min.js"
#: What the suite refuses; minor and moderate findings are reported by axe but not failed on.
AXE_FAILING_IMPACTS = ("serious", "critical")


def axe_violations(page: Page) -> list[str]:
    """Run axe-core (from npm: web/node_modules/axe-core) on the page as it is now and return
    its serious and critical violations, one line each. The source is evaluated through the
    DevTools protocol rather than a <script> tag, so the dashboard's CSP stays enforced."""
    if not AXE_SOURCE.exists():
        raise AssertionError(f"{AXE_SOURCE} is missing: run `make web` (npm ci installs axe-core)")
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate("() => {" + AXE_SOURCE.read_text() + "\n}")
    results = page.evaluate(
        """async () => {
            const r = await window.axe.run(document, { resultTypes: ["violations"] });
            return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                targets: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }));
        }"""
    )
    return [
        f"{v['impact']}: {v['id']} ({v['help']}) at {v['targets']}"
        for v in results
        if v["impact"] in AXE_FAILING_IMPACTS
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    reason = why_not_runnable()
    if reason:
        terminalreporter.write_sep("!", reason, red=True, bold=True)

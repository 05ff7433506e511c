"""The dashboard in a real browser against a real stack with the demo data.

Each test drives the UI the way an operator would, then checks what the screen shows. The
stack is real: the API, two workers and the scheduler run as processes, so "completed" on the
screen means a worker ran the job, and a SIGKILLed worker is really gone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import datetime

import pytest
from playwright.sync_api import Page, expect
from tests.e2e.conftest import ACCESS_TOKEN_JS, VIEWER, axe_violations, login, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The UI answers within a poll (2 s); the margin is for a loaded 2-core CI machine.
expect.set_options(timeout=10_000)

#: Jobs run by a worker reach `completed` within this; generous for a loaded 2-core machine.
RUN_TIMEOUT_MS = 30_000


def test_operator_sees_the_overview_and_the_three_queues(new_page) -> None:
    page: Page = new_page()
    login(page)
    expect(page.get_by_test_id("page-overview")).to_be_visible()
    expect(page.get_by_test_id("chart-throughput")).to_be_visible()
    expect(page.get_by_test_id("stat-dlq")).not_to_contain_text("—")
    screenshot(page, "login-overview")
    page.get_by_test_id("nav-queues").click()
    for name in ("emails", "reports", "webhooks"):
        expect(page.get_by_test_id(f"queue-row-{name}")).to_be_visible()
    page.wait_for_timeout(500)


def test_pause_and_resume_emails(new_page) -> None:
    page: Page = new_page()
    login(page, path="/queues")
    state = page.get_by_test_id("queue-state-emails")
    expect(state).to_have_text("active")
    page.get_by_test_id("pause-emails").click()
    # Every state change asks first; Cancel changes nothing.
    expect(page.get_by_test_id("queue-confirm")).to_contain_text("Workers stop claiming")
    page.get_by_role("button", name="Cancel").click()
    expect(state).to_have_text("active")
    page.get_by_test_id("pause-emails").click()
    page.get_by_test_id("queue-confirm-submit").click()
    expect(state).to_have_text("paused")
    # Survives a reload: the server holds the state, not the page.
    page.reload()
    expect(page.get_by_test_id("queue-state-emails")).to_have_text("paused")
    screenshot(page, "queues")
    page.get_by_test_id("resume-emails").click()
    page.get_by_test_id("queue-confirm-submit").click()
    expect(page.get_by_test_id("queue-state-emails")).to_have_text("active")
    # The queue's last hour: throughput and wait/run percentiles from /stats.
    page.get_by_test_id("stats-reports").click()
    expect(page.get_by_test_id("queue-stats").get_by_test_id("throughput-chart")).to_be_visible()
    expect(page.get_by_test_id("queue-percentiles")).to_contain_text("p95")
    screenshot(page, "queue-stats")


def test_enqueue_a_job_and_watch_it_complete(new_page) -> None:
    page: Page = new_page()
    login(page, path="/jobs")
    page.get_by_test_id("enqueue-open").click()
    page.get_by_test_id("enqueue-queue").select_option("reports")
    page.get_by_test_id("enqueue-handler").fill("noop")
    page.get_by_test_id("enqueue-payload").fill(json.dumps({"from": "e2e", "n": 1}))
    page.get_by_test_id("enqueue-submit").click()
    expect(page.get_by_test_id("page-job-detail")).to_be_visible()
    expect(page.get_by_test_id("job-status")).to_have_text("completed", timeout=RUN_TIMEOUT_MS)
    expect(page.get_by_test_id("job-timeline")).to_contain_text("completed")
    screenshot(page, "job-timeline", publish=True)
    job_id = page.url.rstrip("/").rsplit("/", 1)[1]
    page.goto("/jobs")
    expect(page.get_by_test_id("jobs-table")).to_be_visible()
    screenshot(page, "jobs")
    # Search by id: exactly that job; the filters live in the URL.
    page.get_by_test_id("job-search").fill(job_id)
    page.get_by_test_id("job-search").press("Enter")
    expect(page).to_have_url(re.compile(rf"q={job_id}"))
    expect(page.get_by_test_id(re.compile(r"^job-row-"))).to_have_count(1)
    expect(page.get_by_test_id(f"job-row-{job_id}")).to_be_visible()
    # Payload search `path = value`, also kept in the URL.
    page.goto("/jobs")
    page.get_by_test_id("filter-payload").fill("payload.from = e2e")
    page.get_by_test_id("filter-payload").press("Enter")
    expect(page).to_have_url(re.compile(r"payload=payload\.from"))
    expect(page.get_by_test_id(f"job-row-{job_id}")).to_be_visible()
    page.get_by_test_id("filter-payload").fill("from = nobody")
    page.get_by_test_id("filter-payload").press("Enter")
    expect(page.get_by_test_id(f"job-row-{job_id}")).to_have_count(0)


def test_invalid_json_payload_shows_errors_next_to_the_field(new_page) -> None:
    page: Page = new_page()
    login(page, path="/jobs")
    page.get_by_test_id("enqueue-open").click()
    payload = page.get_by_test_id("enqueue-payload")
    payload.fill('{"to": "ops@example.com",}')
    page.get_by_test_id("enqueue-submit").click()
    error = page.get_by_test_id("field-error-payload")
    expect(error).to_contain_text("Invalid JSON")
    expect(payload).to_have_attribute("aria-invalid", "true")
    # Valid JSON the API refuses (over 64 KB): the API's own message, under the same field.
    payload.fill(json.dumps({"blob": "x" * 70_000}))
    page.get_by_test_id("enqueue-submit").click()
    expect(error).to_be_visible()
    expect(error).not_to_contain_text("Invalid JSON")
    expect(error).to_contain_text(re.compile("64|65|KB|large|bytes", re.IGNORECASE))
    screenshot(page, "enqueue-invalid-payload")


def test_replay_a_dead_letter_and_see_it_complete(new_page) -> None:
    page: Page = new_page()
    login(page, path="/dead-letters")
    # The demo's `noop` dead letters complete when replayed; pick one of those.
    row = page.get_by_test_id(re.compile(r"^dl-row-")).filter(has_text="noop").first
    expect(row).to_be_visible()
    screenshot(page, "dead-letters")
    row.get_by_role("button", name="Replay").click()
    notice = page.get_by_test_id("dl-notice")
    expect(notice).to_contain_text("Replayed as job #")
    job_id = re.search(r"#(\d+)", notice.inner_text()).group(1)
    page.goto(f"/jobs/{job_id}")
    expect(page.get_by_test_id("job-status")).to_have_text("completed", timeout=RUN_TIMEOUT_MS)


def test_bulk_cancel_every_job_a_filter_matches_and_watch_its_progress(new_page) -> None:
    page: Page = new_page()
    login(page, path="/jobs")
    marker = f"e2e-{time.time_ns()}"
    # 600 jobs scheduled an hour ahead (no worker claims them), tagged for a payload filter.
    made = page.evaluate(
        """async (marker) => {"""
        + ACCESS_TOKEN_JS
        + """
            const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/json" };
            const me = await (await fetch("/api/v1/auth/me", { headers })).json();
            const jobs = Array.from({ length: 600 }, (_, i) =>
                ({ handler: "noop", payload: { bulk: marker, i }, delay_s: 3600 }));
            const r = await fetch(`/api/v1/projects/${me.projects[0].id}/jobs/bulk`,
                { method: "POST", headers, body: JSON.stringify({ queue: "reports", jobs }) });
            return (await r.json()).jobs.length;
        }""",
        marker,
    )
    assert made == 600
    page.goto(f"/jobs?status=scheduled&payload=bulk%20%3D%20{marker}")
    expect(page.get_by_test_id(re.compile(r"^job-row-"))).to_have_count(50)
    # From the keyboard: the row's checkbox takes Space.
    page.get_by_test_id(re.compile(r"^job-select-")).first.focus()
    page.keyboard.press("Space")
    expect(page.get_by_test_id("bulk-count")).to_have_text("1 job selected")
    page.get_by_test_id("bulk-select-all").click()
    expect(page.get_by_test_id("bulk-count")).to_have_text("All 600 jobs matching this filter")
    page.get_by_test_id("bulk-cancel").click()
    expect(page.get_by_test_id("bulk-confirm")).to_contain_text("Cancel 600 jobs?")
    problems = axe_violations(page)
    page.get_by_test_id("bulk-confirm-submit").click()
    progress = page.get_by_test_id("bulk-progress")
    expect(progress).to_have_attribute("data-status", "running")
    expect(page.get_by_test_id("bulk-counts")).to_have_text(re.compile(r"^[1-5]\d\d done"))
    screenshot(page, "jobs-bulk-action", publish=True)
    problems += axe_violations(page)
    assert problems == [], "\n".join(problems)
    expect(progress).to_have_attribute("data-status", "completed", timeout=RUN_TIMEOUT_MS)
    expect(page.get_by_test_id("bulk-counts")).to_have_text("600 done, 0 skipped")
    expect(progress.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    # The list follows: no scheduled job of the marker is left.
    expect(page.get_by_test_id("empty-state")).to_be_visible()
    page.goto(f"/jobs?status=cancelled&payload=bulk%20%3D%20{marker}")
    expect(page.get_by_test_id(re.compile(r"^job-row-"))).to_have_count(50)


def test_a_viewer_sees_no_bulk_actions(new_page) -> None:
    viewer: Page = new_page()
    login(viewer, email=VIEWER, path="/jobs")
    expect(viewer.get_by_test_id(re.compile(r"^job-row-")).first).to_be_visible()
    expect(viewer.get_by_test_id(re.compile(r"^job-select-"))).to_have_count(0)
    expect(viewer.get_by_test_id("bulk-bar")).to_have_count(0)
    viewer.goto("/dead-letters")
    expect(viewer.get_by_test_id(re.compile(r"^dl-row-")).first).to_be_visible()
    expect(viewer.get_by_test_id(re.compile(r"^dl-select-"))).to_have_count(0)


def test_invalid_cron_shows_the_api_message_next_to_the_field(new_page) -> None:
    page: Page = new_page()
    login(page, path="/schedules")
    expect(page.get_by_test_id("schedules-table")).to_be_visible()
    screenshot(page, "schedules")
    # The demo's cron schedule: its next fire times, as the API computes them.
    page.get_by_test_id(re.compile(r"^schedule-open-")).first.click()
    expect(page.get_by_test_id("schedule-next-times").locator("li")).to_have_count(10)
    screenshot(page, "schedule-upcoming")
    page.keyboard.press("Escape")
    page.get_by_test_id("new-schedule").click()
    page.get_by_test_id("schedule-name").fill("e2e-bad-cron")
    page.get_by_test_id("schedule-cron").fill("61 * * * *")
    page.get_by_test_id("schedule-save").click()
    error = page.get_by_test_id("field-error-cron_expression")
    expect(error).to_be_visible()
    expect(error).not_to_be_empty()
    expect(page.get_by_test_id("schedule-cron")).to_have_attribute("aria-invalid", "true")
    screenshot(page, "schedule-invalid-cron")
    # A valid expression clears it and previews the next fire times.
    page.get_by_test_id("schedule-cron").fill("*/5 * * * *")
    expect(page.get_by_test_id("cron-preview").locator("li")).to_have_count(5)


def test_viewer_sees_no_mutating_controls_and_the_api_refuses_them(new_page) -> None:
    page: Page = new_page()
    login(page, email=VIEWER, path="/queues")
    expect(page.get_by_test_id("current-role")).to_have_text("viewer")
    expect(page.get_by_test_id("queue-row-emails")).to_be_visible()
    expect(page.get_by_test_id("pause-emails")).to_have_count(0)
    expect(page.get_by_test_id("drain-emails")).to_have_count(0)
    expect(page.get_by_test_id("edit-emails")).to_have_count(0)
    expect(page.get_by_test_id("new-queue")).to_have_count(0)
    screenshot(page, "queues-viewer")
    # The API refuses it anyway: the viewer's own token, straight at the pause endpoint.
    status = page.evaluate(
        """async () => {"""
        + ACCESS_TOKEN_JS
        + """
            const headers = { Authorization: `Bearer ${access_token}` };
            const me = await (await fetch("/api/v1/auth/me", { headers })).json();
            const project = me.projects[0].id;
            const queues = await (await fetch(`/api/v1/projects/${project}/queues`, { headers })).json();
            const emails = queues.items.find((q) => q.name === "emails");
            const r = await fetch(`/api/v1/projects/${project}/queues/${emails.id}/pause`, { method: "POST", headers });
            return r.status;
        }"""
    )
    assert status == 403
    page.goto("/jobs")
    expect(page.get_by_test_id("jobs-table")).to_be_visible()
    expect(page.get_by_test_id("enqueue-open")).to_have_count(0)
    page.goto("/dead-letters")
    expect(page.get_by_test_id("dead-letters-table")).to_be_visible()
    expect(page.get_by_role("button", name="Replay")).to_have_count(0)
    page.goto("/schedules")
    expect(page.get_by_test_id("schedules-table")).to_be_visible()
    expect(page.get_by_role("button", name="Trigger now")).to_have_count(0)


def test_a_viewer_sees_masked_secrets_in_a_job(new_page) -> None:
    """A payload's credentials are the job's own: the operator sees them, a viewer (who may read
    every job of the organisation) sees the mask in their place and the rest of the payload."""
    operator: Page = new_page()
    login(operator, path="/jobs")
    payload = {"seconds": 0, "headers": {"Authorization": "Bearer e2e-live-secret"}, "to": "ops"}
    job = _api_call(
        operator, "POST", "/jobs", {"queue": "reports", "handler": "sleep", "payload": payload}
    )
    operator.goto(f"/jobs/{job['id']}")
    expect(operator.get_by_test_id("job-payload")).to_contain_text("e2e-live-secret")
    viewer: Page = new_page()
    login(viewer, email=VIEWER, path=f"/jobs/{job['id']}")
    shown = viewer.get_by_test_id("job-payload")
    expect(shown).to_contain_text("••••••")
    expect(shown).to_contain_text('"to": "ops"')
    expect(shown).not_to_contain_text("e2e-live-secret")
    screenshot(viewer, "job-viewer-masked")


def test_the_session_is_an_httponly_cookie_and_a_token_in_memory(new_page) -> None:
    """Nothing a script can read holds a session: no token in localStorage or sessionStorage,
    the refresh token only in an httpOnly, SameSite=Strict cookie scoped to /api/v1/auth. A
    reload keeps the operator signed in (the cookie is exchanged for a new access token)."""
    page: Page = new_page()
    login(page, path="/queues")
    expect(page.get_by_test_id("queue-row-emails")).to_be_visible()
    stored = page.evaluate(
        "() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage } })"
    )
    assert "access_token" not in stored
    assert "ey" not in stored  # no JWT of any name
    assert "codity_refresh" not in page.evaluate("() => document.cookie")
    refresh = next(c for c in page.context.cookies() if c["name"] == "codity_refresh")
    assert refresh["httpOnly"] is True
    assert refresh["sameSite"] == "Strict"
    assert refresh["path"] == "/api/v1/auth"
    page.reload()
    expect(page.get_by_test_id("queue-row-emails")).to_be_visible()
    assert "/login" not in page.url


def test_expired_session_returns_to_login_then_to_the_same_page(new_page) -> None:
    page: Page = new_page()
    login(page, path="/jobs?status=completed")
    expect(page.get_by_test_id("jobs-table")).to_be_visible()
    # The session is gone (cookies dropped, then a reload empties the tab's memory): the
    # refresh fails, so the app must send the user to login...
    page.context.clear_cookies()
    page.reload()
    expect(page).to_have_url(re.compile(r"/login\?redirect="), timeout=10_000)
    expect(page.get_by_test_id("session-expired")).to_be_visible()
    screenshot(page, "login")
    page.get_by_test_id("login-email").fill("operator@codity.test")
    page.get_by_test_id("login-password").fill("correct-horse-battery-staple")
    page.get_by_test_id("login-submit").click()
    # ...and back to the page, filters included.
    expect(page).to_have_url(re.compile(r"/jobs\?status=completed$"))
    expect(page.get_by_test_id("filter-status")).to_have_value("completed")


def test_expired_access_token_is_refreshed_once_for_concurrent_requests(new_page) -> None:
    page: Page = new_page()
    login(page, path="/")
    expect(page.get_by_test_id("chart-throughput")).to_be_visible()
    refreshes: list[str] = []
    rejected: list[str] = []
    page.on(
        "request", lambda r: refreshes.append(r.url) if r.url.endswith("/auth/refresh") else None
    )
    page.on("response", lambda r: rejected.append(r.url) if r.status == 401 else None)
    # The access token the tab holds "expires": the API answers 401 to it from now on (the
    # token lives in the app's memory, so the network is where a test can age it).
    stale: dict[str, str] = {}

    def expire(route) -> None:  # type: ignore[no-untyped-def]
        token = route.request.headers.get("authorization", "")
        stale.setdefault("token", token)
        if token and token == stale["token"]:
            route.fulfill(status=401, json={"error": {"code": "unauthorized", "message": "expired",
                                                      "details": None, "request_id": "e2e"}})  # fmt: skip
        else:
            route.continue_()

    page.route(re.compile(r"/api/v1/(projects|org|auth/me)"), expire)
    # Opening Jobs fires two queries at once (queues and jobs); both get 401 and exactly one
    # refresh must follow: a second would present a rotated refresh cookie, which revokes the
    # whole session.
    page.get_by_test_id("nav-jobs").click()
    expect(page.get_by_test_id("jobs-table")).to_be_visible()
    page.wait_for_timeout(2500)  # a poll or two more with the renewed token
    assert len(rejected) >= 2, rejected
    assert len(refreshes) == 1, refreshes
    assert "/login" not in page.url


def test_two_tabs_reloading_at_once_both_stay_signed_in(new_page) -> None:
    """Tabs share the refresh cookie; a rotated one presented twice revokes the session, so two
    tabs restoring their sessions at once must take turns (a Web Lock) and both stay signed in."""
    first: Page = new_page()
    login(first, path="/")
    second = first.context.new_page()
    second.goto("/workers")
    expect(second.get_by_test_id("workers-table")).to_be_visible()
    answers: list[int] = []
    first.context.on(
        "response", lambda r: answers.append(r.status) if r.url.endswith("/auth/refresh") else None
    )
    # Both reload at once (evaluate does not wait for the navigation): each starts with no
    # access token in memory and exchanges the cookie for one.
    first.evaluate("() => setTimeout(() => location.reload(), 0)")
    second.evaluate("() => setTimeout(() => location.reload(), 0)")
    expect(first.get_by_test_id("chart-throughput")).to_be_visible()
    expect(second.get_by_test_id("workers-table")).to_be_visible()
    first.wait_for_timeout(2500)
    assert "/login" not in first.url
    assert "/login" not in second.url
    assert answers, "no refresh at all: the tabs kept a token somewhere they should not"
    assert all(status == 200 for status in answers), answers


def test_invite_someone_who_registers_verifies_and_accepts(new_page, stack) -> None:
    """The whole path of High 1: an owner invites by email (nobody joins yet), the invitee
    registers, confirms the address from the mail, signs in and accepts the invitation
    explicitly; the owner can see and revoke open invitations in Settings."""
    owner: Page = new_page()
    login(owner, path="/settings")
    invitations = owner.get_by_test_id("settings-invitations")
    email = f"newbie-{os.getpid()}-{int(time.time())}@codity.test"
    invitations.get_by_label("Invite by email").fill(email)
    invitations.get_by_label("Role").select_option("member")
    invitations.get_by_role("button", name="Send invitation").click()
    expect(invitations).to_contain_text(email)
    screenshot(owner, "settings-invitations")
    # Not a member because of an email: the members card does not list them.
    expect(owner.get_by_test_id("settings-members")).not_to_contain_text(email)

    newbie: Page = new_page()
    registered = newbie.request.post(
        "/api/v1/auth/register",
        data={"email": email, "password": "a long enough password", "name": "Newbie",
              "org_name": "Newbie Org"},
    )  # fmt: skip
    assert registered.status == 202, registered.text()
    newbie.goto(stack.link_to(email, "/verify-email"))
    expect(newbie.get_by_test_id("verify-email-done")).to_contain_text(email)
    newbie.goto(stack.link_to(email, "/invitations/accept"))
    # The link is behind the session: sign in first, then back to it.
    newbie.get_by_test_id("login-email").fill(email)
    newbie.get_by_test_id("login-password").fill("a long enough password")
    newbie.get_by_test_id("login-submit").click()
    newbie.get_by_test_id("accept-invitation").click()
    expect(newbie.get_by_test_id("current-role")).to_contain_text("member")
    expect(newbie.get_by_test_id("nav-queues")).to_be_visible()
    owner.reload()
    expect(owner.get_by_test_id("settings-members")).to_contain_text(email)
    expect(owner.get_by_test_id("settings-invitations")).not_to_contain_text(email)

    # An invitation can be revoked before it is used.
    other = f"revoked-{os.getpid()}-{int(time.time())}@codity.test"
    invitations = owner.get_by_test_id("settings-invitations")
    invitations.get_by_label("Invite by email").fill(other)
    invitations.get_by_role("button", name="Send invitation").click()
    expect(invitations).to_contain_text(other)
    owner.once("dialog", lambda dialog: dialog.accept())
    invitations.get_by_role("row", name=re.compile(re.escape(other))).get_by_role(
        "button", name="Revoke"
    ).click()
    expect(invitations).not_to_contain_text(other)


def test_an_admin_sets_the_projects_internal_hosts_in_settings(new_page) -> None:
    """The http_request allowlist is per project (an admin's), checked by the API."""
    page: Page = new_page()
    login(page, path="/settings")
    card = page.get_by_test_id("settings-http-allowlist")
    hosts = card.get_by_label("Hosts (comma-separated)")
    hosts.fill("not a host!")
    card.get_by_role("button", name="Save hosts").click()
    expect(page.get_by_test_id("field-error-http-allowlist")).to_be_visible()
    hosts.fill("hooks.internal, 10.0.0.5")
    card.get_by_role("button", name="Save hosts").click()
    expect(page.get_by_test_id("http-allowlist-saved")).to_be_visible()
    assert _api_call(page, "GET", "")["http_allowlist"] == ["hooks.internal", "10.0.0.5"]
    page.reload()
    expect(
        page.get_by_test_id("settings-http-allowlist").get_by_label("Hosts (comma-separated)")
    ).to_have_value("hooks.internal, 10.0.0.5")
    _api_call(page, "PATCH", "", {"http_allowlist": []})  # the shared demo stack as it was
    # A viewer has no such card (and the API refuses the PATCH).
    viewer: Page = new_page()
    login(viewer, email=VIEWER, path="/settings")
    expect(viewer.get_by_test_id("settings-projects")).to_be_visible()
    expect(viewer.get_by_test_id("settings-http-allowlist")).to_have_count(0)


def test_an_admin_sets_the_projects_weight_and_a_viewer_reads_it(new_page) -> None:
    """The fair-share weight: an organization admin changes it in settings (the API checks the
    range); a viewer sees it, read-only."""
    page: Page = new_page()
    login(page, path="/settings")
    card = page.get_by_test_id("settings-weight")
    weight = card.get_by_test_id("project-weight-input")
    expect(weight).to_have_value(str(_api_call(page, "GET", "")["weight"]))
    weight.fill("0")
    card.get_by_role("button", name="Save weight").click()
    expect(page.get_by_test_id("field-error-project-weight")).to_be_visible()
    weight.fill("3")
    card.get_by_role("button", name="Save weight").click()
    expect(page.get_by_test_id("project-weight-saved")).to_be_visible()
    assert _api_call(page, "GET", "")["weight"] == 3
    page.reload()
    expect(page.get_by_test_id("project-weight-input")).to_have_value("3")
    try:
        viewer: Page = new_page()
        login(viewer, email=VIEWER, path="/settings")
        shown = viewer.get_by_test_id("settings-weight")
        expect(shown.get_by_test_id("project-weight")).to_have_text("3")
        expect(shown.get_by_test_id("project-weight-input")).to_have_count(0)
        expect(shown.get_by_role("button", name="Save weight")).to_have_count(0)
        screenshot(viewer, "settings-weight-viewer")
    finally:
        _api_call(page, "PATCH", "", {"weight": 1})  # the shared demo stack as it was


def test_sign_out_everywhere_ends_every_tab(new_page) -> None:
    first: Page = new_page()
    login(first, path="/settings")
    elsewhere: Page = new_page()  # another browser: its own cookies
    login(elsewhere, path="/workers")
    expect(elsewhere.get_by_test_id("workers-table")).to_be_visible()
    first.once("dialog", lambda dialog: dialog.accept())
    first.get_by_test_id("logout-everywhere").click()
    expect(first).to_have_url(re.compile(r"/login"), timeout=10_000)
    # The other browser's access token is refused at its next call, and its refresh too.
    elsewhere.get_by_test_id("nav-queues").click()
    expect(elsewhere).to_have_url(re.compile(r"/login"), timeout=15_000)


def test_settings_and_phone_width(new_page) -> None:
    page: Page = new_page()
    login(page, path="/settings")
    expect(page.get_by_test_id("settings-projects")).to_contain_text("demo")
    # An API key's secret is shown once, right after it is created.
    keys = page.get_by_test_id("settings-api-keys")
    keys.get_by_label("New key name").fill("e2e-ci")
    keys.get_by_role("button", name="Create key").click()
    secret = page.get_by_test_id("api-key-secret")
    expect(secret).to_contain_text("cdy_")
    expect(keys).to_contain_text("e2e-ci")
    expect(keys).to_contain_text("operator@codity.test")  # who created it
    screenshot(page, "settings")
    secret.get_by_role("button", name="I have saved it").click()
    expect(secret).to_have_count(0)
    phone: Page = new_page(390, 844)
    login(phone, path="/queues")
    expect(phone.get_by_test_id("queue-row-emails")).to_be_visible()
    # Nothing wider than the screen except inside a scrollable table.
    overflow = phone.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(phone, "queues-phone")


def test_killed_worker_turns_red_with_frozen_uptime(new_page, stack) -> None:
    if not stack.processes and not os.environ.get("CODITY_E2E_KILL"):
        pytest.skip("needs a stack this suite started (it kills one of its workers)")
    page: Page = new_page()
    login(page, path="/workers")
    live = page.get_by_test_id(re.compile(r"^worker-status-")).filter(has_text="active")
    expect(live.first).to_be_visible()
    pid = int(live.first.get_attribute("data-testid").rsplit("-", 1)[1])
    uptime = page.get_by_test_id(f"worker-uptime-{pid}")
    # Ticking while alive.
    before = uptime.inner_text()
    expect(uptime).not_to_have_text(before, timeout=5_000)
    os.kill(pid, signal.SIGKILL)
    status = page.get_by_test_id(f"worker-status-{pid}")
    expect(status).to_have_text("dead", timeout=20_000)
    frozen = uptime.inner_text()
    time.sleep(2.5)
    assert uptime.inner_text() == frozen
    assert "rose" in (uptime.get_attribute("class") or "")
    screenshot(page, "workers", publish=True)
    page.goto("/")
    expect(page.get_by_test_id("stat-workers")).to_be_visible()
    page.wait_for_timeout(2500)
    screenshot(page, "overview", publish=True)


def test_overview_charts_from_the_rollups_in_every_window_and_theme(new_page) -> None:
    """The demo's last hour of history, rolled up by the scheduler, drawn over 1 h, 24 h, 7 d;
    readable in light and dark (axe checks the contrast of both)."""
    page: Page = new_page()
    login(page)
    charts = page.get_by_test_id("charts")
    expect(charts).to_be_visible()
    throughput = page.get_by_test_id("chart-throughput")
    # The first scheduler run back-fills the rollups; the panel polls every 30 s, so reload.
    deadline = time.monotonic() + 45
    while "no data in this window" in throughput.inner_text() and time.monotonic() < deadline:
        page.wait_for_timeout(2000)
        page.reload()
        throughput = page.get_by_test_id("chart-throughput")
    expect(throughput).not_to_contain_text("no data in this window")
    expect(throughput.locator("svg .recharts-bar-rectangle").first).to_be_attached()
    for chart in ("chart-wait", "chart-run"):
        expect(page.get_by_test_id(chart).locator("svg .recharts-line").first).to_be_attached()
    screenshot(page, "overview-charts", publish=True)
    for window in ("24h", "7d"):
        page.get_by_test_id(f"charts-window-{window}").click()
        expect(page.get_by_test_id(f"charts-window-{window}")).to_have_attribute(
            "aria-checked", "true"
        )
        expect(page.get_by_test_id("chart-throughput")).not_to_contain_text(
            "no data in this window"
        )
    page.get_by_test_id("charts-queue").select_option("reports")
    expect(page.get_by_test_id("chart-run")).to_contain_text("report.generate")
    expect(page.get_by_test_id("chart-run")).not_to_contain_text("email.send")
    assert axe_violations(page) == []
    page.get_by_test_id("theme-select").select_option("dark")
    expect(page.locator("html")).to_have_class(re.compile(r"\bdark\b"))
    screenshot(page, "overview-charts-dark")
    assert axe_violations(page) == []


def test_every_screen_passes_axe_and_works_from_the_keyboard(new_page) -> None:
    """axe-core on every screen and the main dialogs: zero serious or critical violations;
    the focus is visible, tables and dialogs work without a mouse."""
    page: Page = new_page()
    page.goto("/login")
    page.get_by_test_id("login-form").wait_for()
    problems = {"/login": axe_violations(page)}
    page.goto("/verify-email")
    expect(page.get_by_test_id("verify-email")).to_be_visible()
    problems["/verify-email"] = axe_violations(page)
    login(page)
    job_id = page.evaluate(
        """async () => {"""
        + ACCESS_TOKEN_JS
        + """
            const headers = { Authorization: `Bearer ${access_token}` };
            const me = await (await fetch("/api/v1/auth/me", { headers })).json();
            const jobs = await (await fetch(`/api/v1/projects/${me.projects[0].id}/jobs?limit=1`, { headers })).json();
            return jobs.items[0].id;
        }"""
    )
    screens = {
        "/": "page-overview",
        "/queues": "queues-table",
        "/jobs": "jobs-table",
        f"/jobs/{job_id}": "job-timeline",
        "/workers": "workers-table",
        "/schedules": "schedules-table",
        "/dead-letters": "dead-letters-table",
        "/settings": "settings-projects",
        "/invitations/accept": "page-accept-invitation",
    }
    for path, ready in screens.items():
        page.goto(path)
        expect(page.get_by_test_id(ready)).to_be_visible()
        problems[path] = axe_violations(page)
    page.goto("/jobs")
    page.get_by_test_id("enqueue-open").click()
    expect(page.get_by_test_id("enqueue-dialog")).to_be_visible()
    problems["enqueue dialog"] = axe_violations(page)
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("enqueue-dialog")).not_to_be_visible()
    page.goto("/queues")
    page.get_by_test_id("edit-emails").click()
    problems["queue dialog"] = axe_violations(page)
    page.keyboard.press("Escape")
    failing = {k: v for k, v in problems.items() if v}
    assert failing == {}, "\n".join(f"{k}: {line}" for k, v in failing.items() for line in v)

    # Keyboard: Tab reaches the navigation with a visible focus ring, Enter follows the link.
    page.goto("/")
    expect(page.get_by_test_id("page-overview")).to_be_visible()
    page.keyboard.press("Tab")
    for _ in range(12):
        focused = page.evaluate("() => document.activeElement?.dataset?.testid ?? ''")
        if focused == "nav-jobs":
            break
        page.keyboard.press("Tab")
    assert focused == "nav-jobs"
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("page-jobs")).to_be_visible()
    # Tables: rows take the focus with the arrow keys and Enter opens the row.
    first = page.get_by_test_id(re.compile(r"^job-row-")).first
    first.focus()
    page.keyboard.press("ArrowDown")
    second_id = page.evaluate("() => document.activeElement?.dataset?.testid ?? ''")
    assert second_id.startswith("job-row-")
    assert second_id != first.get_attribute("data-testid")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("page-job-detail")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/jobs/{second_id.rsplit('-', 1)[1]}$"))
    # Dialogs: opened from the keyboard, focus inside, Escape closes and focus comes back.
    page.goto("/jobs")
    opener = page.get_by_test_id("enqueue-open")
    opener.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_test_id("enqueue-dialog")
    expect(dialog).to_be_visible()
    assert page.evaluate(
        "() => document.querySelector('[data-testid=enqueue-dialog]').contains(document.activeElement)"
    )
    page.keyboard.press("Escape")
    expect(dialog).not_to_be_visible()
    assert page.evaluate("() => document.activeElement?.dataset?.testid") == "enqueue-open"


def _api_call(page: Page, method: str, path: str, body: object | None = None) -> dict:
    """Call the API from the page with the signed-in user's token (`path` below the project)."""
    return page.evaluate(
        """async ([method, path, body]) => {"""
        + ACCESS_TOKEN_JS
        + """
            const headers = { Authorization: `Bearer ${access_token}`, "Content-Type": "application/json" };
            const me = await (await fetch("/api/v1/auth/me", { headers })).json();
            const r = await fetch(`/api/v1/projects/${me.projects[0].id}${path}`,
                                  { method, headers, body: body === null ? undefined : JSON.stringify(body) });
            return await r.json();
        }""",
        [method, path, body],
    )


# Records, in the page, when each job row first appears and when its status pill changes.
WATCH_ROWS = """() => {
    window.__seen = {};
    const look = () => {
        for (const pill of document.querySelectorAll('[data-testid^="job-status-"]')) {
            const id = pill.dataset.testid.slice("job-status-".length);
            const key = `${id}:${pill.textContent.trim()}`;
            if (!(key in window.__seen)) window.__seen[key] = Date.now();
        }
    };
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, characterData: true });
    look();
}"""


def test_live_updates_show_a_new_job_and_its_completion_without_polling(new_page) -> None:
    """Polling switched off: only the event stream can bring the job onto the screen, then
    turn it completed, each within 1 s of the change in the database."""
    page: Page = new_page()
    page.goto("/login")
    page.evaluate("() => localStorage.setItem('codity.polling', 'off')")
    login(page, path="/jobs")
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-status", "live")
    page.evaluate(WATCH_ROWS)
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    job = _api_call(
        page, "POST", "/jobs", {"queue": "reports", "handler": "sleep", "payload": {"seconds": 1}}
    )
    job_id = job["id"]
    expect(page.get_by_test_id(f"job-status-{job_id}")).to_have_text(
        "completed", timeout=RUN_TIMEOUT_MS
    )
    detail = _api_call(page, "GET", f"/jobs/{job_id}")
    seen = page.evaluate("() => window.__seen")
    appeared = min(t for key, t in seen.items() if key.startswith(f"{job_id}:"))
    completed = seen[f"{job_id}:completed"]

    def ms(iso: str) -> float:
        return datetime.fromisoformat(iso).timestamp() * 1000

    assert appeared - ms(detail["created_at"]) <= 1000, (appeared, detail["created_at"])
    assert completed - ms(detail["finished_at"]) <= 1000, (completed, detail["finished_at"])
    assert navigations == []  # no reload
    screenshot(page, "jobs-live")


def test_when_the_stream_drops_the_screen_polls_and_says_so(new_page) -> None:
    page: Page = new_page()
    login(page, path="/jobs")
    status = page.get_by_test_id("live-status")
    expect(status).to_have_attribute("data-status", "live")
    # Refuse /events: the current stream ends within EVENTS_STREAM_MAX_S (8 s in this stack)
    # and cannot come back.
    page.route("**/events", lambda route: route.abort())
    expect(status).to_have_attribute("data-status", "polling", timeout=20_000)
    expect(status).to_contain_text("polling every 2 s")
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/jobs?" in r.url else None)
    page.wait_for_timeout(4500)
    assert len(polls) >= 2, polls  # the 2 s fallback is running
    page.unroute("**/events")
    expect(status).to_have_attribute("data-status", "live", timeout=20_000)


def test_edit_a_queue_then_drain_it_until_it_pauses_itself(new_page) -> None:
    """Priority, limit and retry policy from the edit dialog; drain with confirmation: the
    queue refuses new jobs, finishes its own, and the scheduler pauses it."""
    page: Page = new_page()
    login(page, path="/queues")
    _api_call(page, "POST", "/queues", {"name": "e2e-drain"})
    page.reload()
    page.get_by_test_id("edit-e2e-drain").click()
    page.get_by_test_id("queue-priority").fill("7")
    page.get_by_test_id("queue-limit").fill("3")
    page.get_by_test_id("queue-save").click()
    expect(page.get_by_test_id("queue-dialog")).to_have_count(0)
    queue = next(
        q for q in _api_call(page, "GET", "/queues?limit=200")["items"] if q["name"] == "e2e-drain"
    )
    assert (queue["priority"], queue["concurrency_limit"]) == (7, 3)
    _api_call(
        page, "POST", "/jobs", {"queue": "e2e-drain", "handler": "sleep", "payload": {"seconds": 2}}
    )
    page.get_by_test_id("drain-e2e-drain").click()
    expect(page.get_by_test_id("queue-confirm")).to_contain_text("takes no new jobs")
    page.get_by_test_id("queue-confirm-submit").click()
    state = page.get_by_test_id("queue-state-e2e-drain")
    expect(state).to_have_text("draining")
    refused = _api_call(page, "POST", "/jobs", {"queue": "e2e-drain", "handler": "noop"})
    assert refused["error"]["code"] == "queue_draining"
    screenshot(page, "queue-draining")
    # The job it had finishes; then the scheduler pauses it (the stream brings the change).
    expect(state).to_have_text("paused", timeout=RUN_TIMEOUT_MS)


def test_flow_control_settings_and_the_explain_answer_on_the_job_page(new_page) -> None:
    """A queue limited to one start an hour (set in the queue dialog): its first job runs, the
    second waits, and its page says why: rate limited, with the next start about an hour away."""
    page: Page = new_page()
    login(page, path="/queues")
    page.get_by_test_id("new-queue").click()
    page.get_by_test_id("queue-name").fill("hourly")
    page.get_by_test_id("queue-key-limit").fill("2")
    page.get_by_test_id("queue-rate-count").fill("1")
    page.get_by_test_id("queue-rate-period").fill("3600")
    page.get_by_test_id("queue-save").click()
    flow = page.get_by_test_id("queue-flow-hourly")
    expect(flow).to_contain_text("≤2 per key")
    expect(flow).to_contain_text("1 / 3600 s")

    first = _api_call(page, "POST", "/jobs", {"queue": "hourly", "handler": "noop"})
    page.goto(f"/jobs/{first['id']}")
    # Workers serving every queue pick the new one up within their queue refresh.
    expect(page.get_by_test_id("job-status")).to_have_text("completed", timeout=RUN_TIMEOUT_MS)

    def enqueue_through_the_dialog(*states: str) -> int:
        """A job of `hourly` with a concurrency key and unique key "acct-7-sync" for 10 min,
        unique among jobs in `states` (none ticked: not finished); the id of the page it opens."""
        page.goto("/jobs")
        page.get_by_test_id("enqueue-open").click()
        page.get_by_test_id("enqueue-queue").select_option("hourly")
        page.get_by_test_id("enqueue-handler").fill("noop")
        page.get_by_test_id("enqueue-concurrency-key").fill("acct-7")
        page.get_by_test_id("enqueue-unique-for").fill("600")
        page.get_by_test_id("enqueue-unique-key").fill("acct-7-sync")
        for state in states:
            page.get_by_test_id(f"enqueue-unique-state-{state}").check()
        page.get_by_test_id("enqueue-submit").click()
        expect(page.get_by_test_id("page-job-detail")).to_be_visible()
        page.wait_for_url(re.compile(r"/jobs/\d+$"))
        return int(page.url.rsplit("/", 1)[1])

    waiting = enqueue_through_the_dialog()
    expect(page.get_by_test_id("job-status")).to_have_text("queued")
    why = page.get_by_test_id("job-explain")
    blocker = why.get_by_test_id("blocker-rate_limited")
    expect(blocker).to_contain_text("1 of 1 starts in the last 3600 s")
    expect(blocker.get_by_test_id("blocker-at")).to_contain_text(
        re.compile(r"next start in (59 min|1 h [01] min)")
    )
    # The rate limit is the only reason: a live worker serves the queue and runs noop.
    expect(why.locator("li")).to_have_count(1)
    expect(why.locator("li")).to_have_attribute("data-testid", "blocker-rate_limited")
    expect(page.get_by_test_id("page-job-detail")).to_contain_text("acct-7")
    expect(page.get_by_test_id("page-job-detail")).to_contain_text("acct-7-sync")
    screenshot(page, "job-explain", publish=True)

    # The same unique key among completed jobs only: the queued one does not match, a new job.
    among_completed = enqueue_through_the_dialog("completed")
    assert among_completed != waiting
    # Among unfinished jobs (nothing ticked): a queued one matches, its page opens, no new job.
    again = enqueue_through_the_dialog()
    assert again in (waiting, among_completed)
    jobs = _api_call(page, "GET", "/jobs?queue=hourly")["items"]
    assert sorted(j["id"] for j in jobs) == sorted([first["id"], waiting, among_completed])
    assert {j["unique_key"] for j in jobs if j["id"] != first["id"]} == {"acct-7-sync"}

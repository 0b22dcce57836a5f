"""The governance console in a real headless Chromium (Debian's, driven by Playwright) against a real
``pmw serve``: the issue's browser list, each test saving a screenshot (``$PMW_ARTIFACTS/console`` or
``artifacts/console``), and axe-core on every page with no critical violation. One served world and one
browser for the module."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from engine.errors import PMWError
from tests.console.support import (
    AXE,
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGES,
    ConsoleWorld,
    artifacts_dir,
    candidate_sets,
    reports_dir,
    require_chromium,
    seed,
)
from tests.service.support import GOVERNOR, Served


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleWorld]:
    require_chromium()
    root = tmp_path_factory.mktemp("console-browser")
    good, bad = candidate_sets(root)
    served = Served(root, env={"PMW_CONSOLE_REPORTS": str(reports_dir(root))})
    with served:
        yield ConsoleWorld(served, seed(served), good, bad)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright, world: ConsoleWorld) -> Iterator[Browser]:
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    try:
        yield launched
    finally:
        launched.close()


def signed_in_page(browser: Browser, world: ConsoleWorld, who: str) -> tuple[BrowserContext, Page]:
    """A fresh browser context signed in with ``who``'s token through the sign-in form."""
    context = browser.new_context(bypass_csp=True)  # axe is injected as an inline script
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(world.url + "/console/sign-in")
    page.fill("#token", world.tokens[who])
    page.click("#sign-in")
    page.wait_for_url(re.compile(r".*/console/policies$"))
    return context, page


@pytest.fixture
def governor(browser: Browser, world: ConsoleWorld) -> Iterator[Page]:
    context, page = signed_in_page(browser, world, GOVERNOR)
    yield page
    context.close()


def shot(page: Page, name: str) -> Path:
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def current_epoch(page: Page) -> str:
    return page.locator("#current-epoch").inner_text().strip()


def review(page: Page, world: ConsoleWorld, candidate: Path) -> None:
    page.goto(world.url + "/console/policies")
    page.fill("#candidate", str(candidate))
    page.click("#review")
    page.wait_for_selector("#tests-result", timeout=120_000)


def submit_and_see_deployed(page: Page, button: str, epoch: str) -> None:
    """Click ``button`` (deploy or roll back) and see ``epoch`` deployed (one click: a refusal fails)."""
    page.click(button)
    expect(page.locator("#outcome")).to_contain_text(f"Deployed epoch {epoch}", timeout=60_000)


def test_sign_in_with_a_governor_token(governor: Page) -> None:
    expect(governor.locator("#who")).to_have_text(GOVERNOR)
    expect(governor.locator("#current-epoch")).to_have_text(re.compile(r"p-[0-9a-f]{16}"))
    assert governor.locator("#read-only").count() == 0
    shot(governor, "sign-in-policies")


def test_a_candidate_with_a_failing_test_cannot_be_deployed(governor: Page, world: ConsoleWorld) -> None:
    before = current_epoch(governor)
    review(governor, world, world.bad)
    expect(governor.locator("#tests-result")).to_contain_text("cannot be deployed")
    assert governor.locator("#deploy").count() == 0
    expect(governor.locator("#deploy-blocked")).to_be_visible()
    shot(governor, "candidate-failing")
    csrf = governor.locator("input[name=csrf]").first.get_attribute("value")
    forced = governor.request.post(world.url + "/console/policies/deploy",
                                   form={"csrf": csrf or "", "candidate": str(world.bad)})
    assert forced.status == 400 and "policy_rejected" in forced.text()
    governor.goto(world.url + "/console/policies")
    assert current_epoch(governor) == before


def test_search_a_denial_and_open_its_explanation(governor: Page, world: ConsoleWorld) -> None:
    governor.goto(world.url + "/console/decisions")
    governor.fill("#f-agent", "bob")
    governor.select_option("#f-effect", "DENY")
    governor.click("#search")
    row = governor.locator("#decisions tbody tr", has_text="state").first
    expect(row).to_contain_text("DENY")
    shot(governor, "decisions")
    row.get_by_role("link", name=re.compile("Explain")).click()
    expect(governor.locator("#explanation h2")).to_contain_text("DENIED: bob")
    expect(governor.locator("#x-effect")).to_have_text("DENY")
    shot(governor, "explain")


def test_approve_a_pending_s3_action_and_the_agents_invoke_succeeds(governor: Page, world: ConsoleWorld) -> None:
    payload = {"query": "quarterly numbers"}
    approval = world.call("alice", "request_approval", kind="tool", object_id="search", payload=payload)
    governor.goto(world.url + "/console/approvals")
    row = governor.locator("#pending tbody tr", has_text=approval.approval_id)
    expect(row).to_contain_text(approval.action_hash)
    expect(row.locator(f"#payload-{approval.approval_id}")).to_contain_text('"quarterly numbers"')
    expect(row).to_contain_text("matches the hash")
    shot(governor, "approvals")
    row.locator(f"#approve-{approval.approval_id}").click()
    expect(governor.locator("#outcome")).to_contain_text(f"Approved {approval.approval_id}")
    shot(governor, "approved")
    invoked: Any = world.call("alice", "invoke", kind="tool", ident="search", side_effect="S3", payload=payload,
                              approval_id=approval.approval_id)
    assert invoked.approval_id == approval.approval_id


def test_deny_a_pending_s3_action_and_the_agents_invoke_is_refused(governor: Page, world: ConsoleWorld) -> None:
    payload = {"query": "salaries"}
    approval = world.call("alice", "request_approval", kind="tool", object_id="search", payload=payload)
    governor.goto(world.url + "/console/approvals")
    epoch = governor.locator("#approvals-epoch").inner_text()
    csrf = governor.locator("input[name=csrf]").first.get_attribute("value") or ""
    governor.locator(f"#deny-{approval.approval_id}").click()
    expect(governor.locator("#outcome")).to_contain_text(f"Denied {approval.approval_id}")
    expect(governor.locator("#pending tbody tr", has_text=approval.approval_id)).to_have_count(0)
    shot(governor, "denied")
    assert world.call(GOVERNOR, "get_approval", approval_id=approval.approval_id).status.value == "rejected"
    again = governor.request.post(world.url + "/console/approvals/approve", form={
        "csrf": csrf, "approval_id": approval.approval_id, "action_hash": approval.action_hash, "policy_epoch": epoch})
    assert again.status == 403 and "approval is rejected" in again.text(), again.text()[:500]
    with pytest.raises(PMWError) as refused:
        world.call("alice", "invoke", kind="tool", ident="search", side_effect="S3", payload=payload,
                   approval_id=approval.approval_id)
    assert refused.value.code == "approval_invalid" and "rejected" in refused.value.message


def test_the_payload_is_shown_escaped(governor: Page, world: ConsoleWorld) -> None:
    markup = '<img id="injected" src="x"><b>bold</b>'
    approval = world.call("alice", "request_approval", kind="tool", object_id="search", payload={"note": markup})
    try:
        governor.goto(world.url + "/console/approvals")
        shown = governor.locator(f"#payload-{approval.approval_id}")
        expect(shown).to_contain_text(markup.replace('"', '\\"'))  # the text itself, as JSON shows it
        assert governor.locator("#injected").count() == 0 and shown.locator("b").count() == 0
    finally:
        world.call(GOVERNOR, "deny_approval", approval_id=approval.approval_id)


def test_a_reviewer_cannot_deploy_or_approve(browser: Browser, world: ConsoleWorld) -> None:
    approval = world.call("alice", "request_approval", kind="tool", object_id="search", payload={"n": 2})
    context, page = signed_in_page(browser, world, "rev")
    try:
        expect(page.locator("#read-only")).to_contain_text("cannot deploy")
        before = page.locator("#current-epoch").inner_text()
        page.goto(f"{world.url}/console/policies?candidate={world.good}")
        expect(page.locator("#deploy-refused")).to_be_visible()
        assert page.locator("#deploy").count() == 0
        shot(page, "reviewer-policies")
        csrf = page.locator("input[name=csrf]").first.get_attribute("value") or ""
        refused = page.request.post(world.url + "/console/policies/deploy",
                                    form={"csrf": csrf, "candidate": str(world.good)})
        assert refused.status == 403 and "policy_denied" in refused.text()
        page.goto(world.url + "/console/approvals")
        assert page.locator(f"#approve-{approval.approval_id}").count() == 0
        assert page.locator(f"#deny-{approval.approval_id}").count() == 0
        current = page.locator("#approvals-epoch").inner_text()
        refused = page.request.post(world.url + "/console/approvals/approve", form={
            "csrf": csrf, "approval_id": approval.approval_id, "action_hash": approval.action_hash,
            "policy_epoch": current})
        assert refused.status == 403, refused.text()[:500]
        refused = page.request.post(world.url + "/console/approvals/deny", form={
            "csrf": csrf, "approval_id": approval.approval_id, "action_hash": approval.action_hash,
            "policy_epoch": current})
        assert refused.status == 403 and "policy_denied" in refused.text(), refused.text()[:500]
        shot(page, "reviewer-approvals")
        assert world.call(GOVERNOR, "get_approval", approval_id=approval.approval_id).status.value == "pending"
        page.goto(world.url + "/console/policies")
        assert page.locator("#current-epoch").inner_text() == before
    finally:
        context.close()


def test_the_topology_slider_shows_the_conflict_room_open_then_closed(governor: Page, world: ConsoleWorld) -> None:
    governor.goto(world.url + "/console/topology?group=room")
    versions = [int(v) for v in governor.locator("#versions option").evaluate_all("os => os.map(o => o.value)")]
    opened = next(v for v in versions if _open_rooms_at(governor, world, v).count("r-conflict"))
    assert "room r-conflict" in (governor.locator("svg.topology").text_content() or "")
    shot(governor, "topology-open")
    with governor.expect_navigation():
        governor.locator("#v").fill(str(opened + 1))  # the slider: its change submits the form
    expect(governor.locator("#topology-version")).to_have_text(str(opened + 1))
    assert "r-conflict" not in governor.locator("#open-rooms").inner_text()
    governor.fill("#from", str(opened))
    governor.click("#show")
    expect(governor.locator("#topology-diff")).to_contain_text("removed")
    shot(governor, "topology-closed")


def _open_rooms_at(page: Page, world: ConsoleWorld, version: int) -> str:
    page.goto(f"{world.url}/console/topology?group=room&v={version}")
    return page.locator("#open-rooms").inner_text()


@pytest.mark.parametrize("path", ["/console/sign-in", *PAGES,
                                  "/console/explain?principal=bob&kind=state&id=plan&action=write",
                                  "/console/policies?candidate={good}"])
def test_every_page_passes_axe_without_critical_violations(browser: Browser, world: ConsoleWorld, path: str) -> None:
    context, page = signed_in_page(browser, world, GOVERNOR)
    try:
        page.goto(world.url + path.format(good=world.good))
        page.add_script_tag(path=str(AXE))
        found = page.evaluate("async () => (await axe.run(document)).violations"
                              ".map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.length}))")
        critical = [v for v in found if v["impact"] == "critical"]
        assert not critical, f"{path}: {critical}"
        if path in PAGES:  # every view's picture (docs/console.md shows the world's and the reports')
            shot(page, "page-" + path.removeprefix("/console/").replace("/", "-"))
    finally:
        context.close()


# Last in the module: a reload the PDP does not confirm in time leaves the world refusing every decision
# (reported: engine/runtime.py), which would fail every test after it.
def test_a_good_candidate_deploys_and_rolls_back(governor: Page, world: ConsoleWorld) -> None:
    before = current_epoch(governor)
    review(governor, world, world.good)
    expect(governor.locator("#tests-result")).to_contain_text("Passed")
    expect(governor.locator("#shadow-summary")).to_contain_text("recorded decisions replayed")
    assert governor.locator("pre.diff").first.inner_text().count("reviewed in the console test") == 1
    new_epoch = governor.locator("#candidate-epoch").inner_text().strip()
    assert new_epoch != before
    shot(governor, "candidate-good")
    submit_and_see_deployed(governor, "#deploy", new_epoch)
    expect(governor.locator("#current-epoch")).to_have_text(new_epoch, timeout=60_000)
    shot(governor, "deployed")
    governor.select_option("#rollback-epoch", before)
    submit_and_see_deployed(governor, "#rollback", before)
    expect(governor.locator("#current-epoch")).to_have_text(before, timeout=60_000)
    epochs = [e.strip() for e in governor.locator("#history-h + table tbody td:nth-child(2)").all_inner_texts()]
    assert epochs[-3:] == [before, new_epoch, before]  # the rollback is the old epoch activated again
    shot(governor, "rolled-back")

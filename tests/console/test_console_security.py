"""The console refuses as the API refuses: every page and form without a token, with an agent's token or a
revoked one; every form without its CSRF secret or with another; a session after its token is revoked; a
report path out of the reports folder. A governor crawling every page never sees a planted private memory or
an unrevealed answer. One served world for the module (a real ``pmw serve``), plain HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urljoin

import httpx
import pytest

from engine.errors import PMWError
from tests.console.support import (
    ANSWER_SECRET,
    CSRF,
    PAGES,
    PRIVATE_SECRET,
    ConsoleWorld,
    candidate_sets,
    reports_dir,
    seed,
)
from tests.console.support import (
    signed_in as session_of,
)
from tests.service.support import GOVERNOR, Served

FORMS = ("/console/policies/deploy", "/console/policies/rollback", "/console/approvals/approve",
         "/console/approvals/deny", "/console/sign-out")
LINK = re.compile(r'(?:href|src|action)="(/console[^"#]*)"')


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleWorld]:
    root = tmp_path_factory.mktemp("console-security")
    good, bad = candidate_sets(root)
    served = Served(root, env={"PMW_CONSOLE_REPORTS": str(reports_dir(root))})
    with served:
        yield ConsoleWorld(served, seed(served), good, bad)


_OPEN: list[httpx.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def plain(world: ConsoleWorld) -> httpx.Client:
    client = httpx.Client(base_url=world.url, timeout=120.0, follow_redirects=False)
    _OPEN.append(client)
    return client


def signed_in(base_url: str, token: str) -> tuple[httpx.Client, str]:
    client, csrf = session_of(base_url, token)
    _OPEN.append(client)
    return client, csrf


@pytest.mark.parametrize("path", PAGES)
def test_every_page_refuses_a_missing_token_with_401(world: ConsoleWorld, path: str) -> None:
    answer = plain(world).get(path)
    assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
    assert 'id="token"' in answer.text  # the sign-in form, nothing of the page


@pytest.mark.parametrize("path", PAGES)
def test_every_page_refuses_an_agent_token_with_403(world: ConsoleWorld, path: str) -> None:
    answer = plain(world).get(path, headers={"Authorization": f"Bearer {world.tokens['alice']}"})
    assert answer.status_code == 403 and "not_permitted" in answer.text


def test_a_malformed_or_wrong_token_is_refused_as_the_api_refuses_it(world: ConsoleWorld) -> None:
    client = plain(world)
    for token in ("pmw_nope", world.tokens[GOVERNOR][:-4] + "0000"):
        page = client.get("/console/policies", headers={"Authorization": f"Bearer {token}"})
        api = client.get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})
        assert page.status_code == api.status_code == 401


@pytest.mark.parametrize("path", FORMS)
def test_every_form_refuses_a_missing_token(world: ConsoleWorld, path: str) -> None:
    assert plain(world).post(path, data={"csrf": "x"}).status_code == 401


@pytest.mark.parametrize("path", FORMS[:3])
def test_every_form_refuses_an_agent_token(world: ConsoleWorld, path: str) -> None:
    answer = plain(world).post(path, data={"csrf": "x"}, headers={"Authorization": f"Bearer {world.tokens['bob']}"})
    assert answer.status_code == 403 and "not_permitted" in answer.text


@pytest.mark.parametrize("path", FORMS)
@pytest.mark.parametrize("given", [None, "wrong-secret"])
def test_every_form_refuses_a_missing_or_wrong_csrf_secret(world: ConsoleWorld, path: str, given: str | None) -> None:
    client, _csrf = signed_in(world.url, world.tokens[GOVERNOR])
    before = world.call(GOVERNOR, "current_policy_epoch").epoch
    data = {"candidate": str(world.good), "epoch": before, "approval_id": "apr_x"}
    if given is not None:
        data["csrf"] = given
    answer = client.post(path, data=data)
    assert answer.status_code == 403 and "csrf_refused" in answer.text
    assert world.call(GOVERNOR, "current_policy_epoch").epoch == before
    assert client.get("/console/policies").status_code == 200  # not signed out either


def test_the_sign_in_form_refuses_a_missing_csrf_secret(world: ConsoleWorld) -> None:
    client = plain(world)
    client.get("/console/sign-in")
    answer = client.post("/console/sign-in", data={"token": world.tokens[GOVERNOR]})
    assert answer.status_code == 403 and "pmw_console=" not in answer.headers.get("set-cookie", "")


def test_the_session_cookie_is_httponly_samesite_strict_and_scoped(world: ConsoleWorld) -> None:
    client = plain(world)
    form = client.get("/console/sign-in")
    done = client.post("/console/sign-in", data={"csrf": CSRF.findall(form.text)[0],
                                                 "token": world.tokens[GOVERNOR]})
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("pmw_console="))
    assert world.tokens[GOVERNOR] not in cookie
    assert {"httponly", "samesite=strict", "path=/console"} <= {p.strip().lower() for p in cookie.split(";")}


def test_a_session_ends_when_its_token_is_revoked(world: ConsoleWorld) -> None:
    token = world.served.issue(GOVERNOR)
    client, _ = signed_in(world.url, token)
    token_id = token.removeprefix("pmw_").rpartition("_")[0]
    world.call(GOVERNOR, "revoke_token", token_id=token_id)
    assert client.get("/console/policies").status_code == 401
    assert client.get("/console/world").status_code == 401  # the session is gone, not only refused once


def test_a_reviewer_reads_but_every_action_is_refused_by_the_server(world: ConsoleWorld) -> None:
    client, csrf = signed_in(world.url, world.tokens["rev"])
    page = client.get("/console/policies")
    assert page.status_code == 200 and 'id="read-only"' in page.text
    before = world.call(GOVERNOR, "current_policy_epoch").epoch
    refused = client.post("/console/policies/deploy", data={"csrf": csrf, "candidate": str(world.good)})
    assert refused.status_code == 403 and "policy_denied" in refused.text
    assert world.call(GOVERNOR, "current_policy_epoch").epoch == before


def test_a_reviewer_reads_the_decision_log_explanations_and_the_history(world: ConsoleWorld) -> None:
    """Governance reads are the PDP's to allow (resource ``governance``): a reviewer sees them, an agent
    neither governor nor reviewer is refused them by the server."""
    client, _ = signed_in(world.url, world.tokens["rev"])
    found = client.get("/console/decisions", params={"agent": "bob", "effect": "DENY"})
    assert found.status_code == 200 and 'id="decisions"' in found.text and "policy_denied" not in found.text
    assert "DENY" in found.text
    explained = client.get("/console/explain", params={"principal": "bob", "kind": "state", "id": "plan",
                                                       "action": "write"})
    assert explained.status_code == 200 and 'id="x-effect"' in explained.text, explained.text[:2000]
    assert "policy_denied" not in explained.text
    policies = client.get("/console/policies")
    assert policies.status_code == 200 and "policy_denied" not in policies.text
    assert world.call(GOVERNOR, "current_policy_epoch").epoch in policies.text
    rev = world.served.client(world.tokens["rev"]).call
    assert rev("governance", "history", (), {})
    bob = world.served.client(world.tokens["bob"]).call
    for name, arguments in (("history", {}), ("audit", {"agent": "bob"}),
                            ("explain", {"principal_id": "bob", "kind": "state", "id": "plan", "action": "write"})):
        with pytest.raises(PMWError) as refused:
            bob("governance", name, (), arguments)
        assert refused.value.code == "policy_denied", name


@pytest.mark.parametrize("path", ["/console/reports/..%2F..%2Fetc/passwd", "/console/reports/flagship/events.jsonl",
                                  "/console/reports/flagship/..%2F..%2Foutside.md", "/console/reports/..",
                                  "/console/reports/flagship/%2E%2E%2Foutside.md", "/console/static/..%2Fpages.py"])
def test_report_paths_outside_the_reports_folder_are_refused(world: ConsoleWorld, path: str) -> None:
    client, _ = signed_in(world.url, world.tokens[GOVERNOR])
    answer = client.get(path)
    assert answer.status_code in (303, 400, 404), (path, answer.status_code)  # 400: the API's unknown route
    assert PRIVATE_SECRET not in answer.text


def test_a_governor_crawling_every_page_never_sees_private_memory_or_unrevealed_answers(world: ConsoleWorld) -> None:
    assert PRIVATE_SECRET in [m.content for m in world.call("alice", "list_memory")]  # planted, and readable to alice
    client, _ = signed_in(world.url, world.tokens[GOVERNOR])
    seen: set[str] = set()
    queue = [*PAGES, "/console/topology?group=room", f"/console/policies?candidate={world.good}",
             "/console/explain?principal=alice&kind=room&id=r-blind&action=read"]
    while queue and len(seen) < 200:
        path = queue.pop(0)
        if path in seen or "/sign-out" in path or "/deploy" in path or "/rollback" in path or "/approve" in path:
            continue
        seen.add(path)
        answer = client.get(path)
        assert answer.status_code in (200, 400, 404), (path, answer.status_code)
        assert PRIVATE_SECRET not in answer.text and ANSWER_SECRET not in answer.text, path
        queue += [urljoin(path, link).replace("&amp;", "&") for link in LINK.findall(answer.text)]
    assert len(seen) >= len(PAGES) + 6  # the crawl followed the pages' links
    world_page = client.get("/console/world").text
    assert "r-blind" in world_page  # the room is shown, its answer is not

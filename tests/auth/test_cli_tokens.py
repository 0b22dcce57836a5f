"""``pmw tokens issue|revoke|list`` and ``pmw init --governor``'s first token, under the session's real PDP."""

from __future__ import annotations

import json
import time

import pytest

from engine.auth.tokens import authenticate, hash_secret, parse_token
from engine.errors import Unauthenticated
from engine.models.tokens import DEFAULT_EXPIRES_IN_S
from store import Store
from tests.cli_support import (
    GOVERNOR,
    Pdp,
    Pmw,
    assert_one_denial,
    counts,
    invoke,
    pdp_fixture,  # noqa: F401 - the session's PDP (fixture ``pdp``)
    pmw_fixture,  # noqa: F401 - a migrated world (fixture ``pmw``)
    sqlite_db_url_fixture,  # noqa: F401 - a SQLite world file (fixture ``db_url``)
)


@pytest.fixture
def alice_and_bob(pmw: Pmw) -> None:
    """``alice`` and ``bob`` registered on the CLI's migrated world (tests/cli_support.py)."""
    pmw.agents("alice", "bob")


def _authenticate(db_url: str, token: str) -> str:
    store = Store(db_url)
    try:
        return authenticate(store.read, token, time.time_ns() // 1000).agent_id
    finally:
        store.close()


def test_init_with_a_governor_shows_a_working_token_once(db_url: str, pdp: Pdp) -> None:
    cli = Pmw(db_url, pdp)
    first = cli.js("init", "--governor", "root", "--name", "Root", "--term", "term-root")
    token = first["token"]
    assert token.startswith(f"pmw_{first['token_id']}_")
    assert _authenticate(db_url, token) == "root"
    listed = cli.js("tokens", "list", actor="root")
    assert [(t["token_id"], t["agent_id"], t["issued_by"]) for t in listed] == [(first["token_id"], "root", "root")]
    assert token not in json.dumps(listed)


def test_init_tells_a_human_the_token_is_shown_once(db_url: str, pdp: Pdp) -> None:
    result = invoke(db_url, "init", "--governor", "g", "--name", "G", "--term", "t-g", env=pdp.env)
    assert result.exit_code == 0, result.stderr
    line = next(ln for ln in result.stdout.splitlines() if ln.startswith("token:"))
    assert _authenticate(db_url, line.split()[-1]) == "g"
    assert "shown only this once" in result.stderr


@pytest.mark.usefixtures("alice_and_bob")
def test_a_governor_issues_lists_and_revokes(pmw: Pmw) -> None:
    issued = pmw.js("tokens", "issue", "alice", "--expires", "12h", "--scope", "read", "--label", "ci",
                    actor=GOVERNOR)
    assert (issued["agent_id"], issued["scope"], issued["label"]) == ("alice", "read", "ci")
    assert issued["expires_at_us"] - issued["created_at_us"] == 12 * 3600 * 1_000_000
    assert _authenticate(pmw.db_url, issued["token"]) == "alice"
    forever = pmw.js("tokens", "issue", "bob", "--expires", "never", actor=GOVERNOR)
    assert forever["expires_at_us"] is None
    default = pmw.js("tokens", "issue", "bob", actor=GOVERNOR)
    assert default["expires_at_us"] - default["created_at_us"] == DEFAULT_EXPIRES_IN_S * 1_000_000

    mine = pmw.js("tokens", "list", actor="alice")
    assert [t["token_id"] for t in mine] == [issued["token_id"]]
    everyone = pmw.js("tokens", "list", actor=GOVERNOR)
    assert {t["agent_id"] for t in everyone} == {"gov", "alice", "bob"}
    text = json.dumps(everyone) + pmw.ok("tokens", "list", "--agent", "bob", actor=GOVERNOR)
    _, secret = parse_token(issued["token"])
    assert "secret_sha256" not in text and hash_secret(secret) not in text and secret not in text

    revoked = pmw.js("tokens", "revoke", issued["token_id"], actor="alice")
    assert revoked["revoked_by"] == "alice"
    with pytest.raises(Unauthenticated):
        _authenticate(pmw.db_url, issued["token"])


@pytest.mark.usefixtures("alice_and_bob")
def test_an_agent_cannot_issue_nor_touch_anothers_tokens(pmw: Pmw) -> None:
    bobs = pmw.js("tokens", "issue", "bob", actor=GOVERNOR)
    for args in (("tokens", "issue", "alice"), ("tokens", "issue", "bob"), ("tokens", "revoke", bobs["token_id"]),
                 ("tokens", "list", "--agent", "bob")):
        before = counts(pmw.db_url)
        error = pmw.fails(6, *args, actor="alice")
        assert error["code"] == "policy_denied"
        assert_one_denial(before, pmw.db_url, "alice")
    assert _authenticate(pmw.db_url, bobs["token"]) == "bob"


@pytest.mark.usefixtures("alice_and_bob")
@pytest.mark.parametrize("args", [("--expires", "3y"), ("--expires", "0d"), ("--expires", "-1h"),
                                  ("--expires", "12"), ("--scope", "admin"), ("--label", "")])
def test_bad_options_exit_3_and_write_nothing(pmw: Pmw, args: tuple[str, str]) -> None:
    before = counts(pmw.db_url)
    error = pmw.fails(3, "tokens", "issue", "alice", *args, actor=GOVERNOR)
    assert error["code"] == "invalid_input"
    assert counts(pmw.db_url) == before


@pytest.mark.usefixtures("alice_and_bob")
def test_the_same_op_id_gives_the_secret_once(pmw: Pmw) -> None:
    first = pmw.js("tokens", "issue", "alice", "--op-id", "cli-issue-1", actor=GOVERNOR)
    again = pmw.js("tokens", "issue", "alice", "--op-id", "cli-issue-1", actor=GOVERNOR)
    assert first["token"] and again["token"] is None
    assert again["token_id"] == first["token_id"]

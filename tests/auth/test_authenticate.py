"""``authenticate``: every way a token fails is a typed ``Unauthenticated``, unknown and wrong secret alike;
the store is read on every call, so a revocation made elsewhere (another store connection, another
process) counts from the next call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.auth.tokens import MAX_TOKEN_CHARS, authenticate, parse_token, scope_allows, token_string
from engine.errors import Unauthenticated
from engine.models.tokens import TokenScope
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from store import Store
from tests.conftest import REPO, add_agent, book_of


@pytest.fixture
def issued(pworld: World) -> tuple[World, str, str]:
    add_agent(pworld, "alice", ["state.write"])
    token = pworld.issue_token("gov", "alice")
    assert token.token is not None
    return pworld, token.token_id, token.token


def _refusal(world: World, token: object) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as refused:
        authenticate(book_of(world).store.read, token, world.clock.now_us())  # type: ignore[arg-type]
    return refused.value


@pytest.mark.parametrize("token", [None, ""])
def test_a_missing_token_is_refused(issued: tuple[World, str, str], token: str | None) -> None:
    refused = _refusal(issued[0], token)
    assert (refused.code, refused.reason, refused.token_id, refused.exit_code) == ("unauthenticated", "missing",
                                                                                    None, 10)


@pytest.mark.parametrize("token", [
    "Bearer pmw_tok_1_" + "a" * 64, "pmw_", "pmw__" + "a" * 64, "tok_1_" + "a" * 64, "pmw_tok1", "x" * 5000,
    "pmw_" + "t" * 200 + "_" + "a" * 64, "pmw_tok/1_" + "a" * 64, 12345, b"pmw_tok_1_" + b"a" * 64])
def test_a_malformed_token_is_refused_without_an_id(issued: tuple[World, str, str], token: object) -> None:
    refused = _refusal(issued[0], token)
    assert (refused.reason, refused.token_id) == ("malformed", None)


@pytest.mark.parametrize("secret", ["A" * 64, "a" * 63, "a" * 65, "g" * 64, "a" * 32 + "_" + "a" * 31])
def test_a_malformed_secret_names_the_id_that_parsed(issued: tuple[World, str, str], secret: str) -> None:
    world, token_id, _ = issued
    refused = _refusal(world, f"pmw_{token_id}_{secret}")
    assert refused.reason == "malformed"
    assert refused.token_id == (token_id if "_" not in secret else f"{token_id}_{secret.partition('_')[0]}")


def test_unknown_id_and_wrong_secret_are_the_same_refusal(issued: tuple[World, str, str]) -> None:
    world, token_id, token = issued
    _, secret = parse_token(token)
    wrong = _refusal(world, token_string(token_id, "0" * 64 if secret != "0" * 64 else "1" * 64))
    unknown = _refusal(world, token_string("tok_unknown", secret))
    assert (wrong.reason, wrong.token_id) == ("invalid", token_id)
    assert (unknown.reason, unknown.token_id) == ("invalid", "tok_unknown")
    assert wrong.message.replace(token_id, "ID") == unknown.message.replace("tok_unknown", "ID")
    assert wrong.to_dict().keys() == unknown.to_dict().keys()
    assert secret not in wrong.message and secret not in unknown.message


def test_a_good_token_of_the_longest_form_parses() -> None:
    token = token_string("t" * 128, "f" * 64)
    assert len(token) == MAX_TOKEN_CHARS
    assert parse_token(token) == ("t" * 128, "f" * 64)


def test_a_revocation_by_another_connection_counts_on_the_next_call(issued: tuple[World, str, str],
                                                                     tmp_path: Path) -> None:
    world, token_id, token = issued
    read = book_of(world).store.read
    assert authenticate(read, token, world.clock.now_us()).agent_id == "alice"
    url = f"sqlite:///{tmp_path / 'world.db'}"
    other = Store(url)  # another connection pool on the same file, as another process would hold
    try:
        assert authenticate(other.read, token, world.clock.now_us()).token_id == token_id
        world.revoke_token("gov", token_id)
        assert _refusal(world, token).reason == "revoked"
        with pytest.raises(Unauthenticated):
            authenticate(other.read, token, world.clock.now_us())
    finally:
        other.close()


def test_a_revocation_by_another_process_counts_on_the_next_call(issued: tuple[World, str, str],
                                                                  tmp_path: Path, pdp_client: CerbosPdp) -> None:
    world, token_id, token = issued
    read = book_of(world).store.read
    assert authenticate(read, token, world.clock.now_us()).agent_id == "alice"
    script = (  # another runtime process: revokes through its own World, decided by the same PDP
        "import sys\n"
        "from engine.policy.cerbos_adapter import CerbosPdp\n"
        "from engine.policy.enforcement import PdpAuthorizer\n"
        "from engine.policy.pdp_process import PdpAddress\n"
        "from engine.world.book import RuntimeBook\n"
        "from store import Store\n"
        "store = Store(sys.argv[1])\n"
        "pdp = CerbosPdp(PdpAddress(grpc=sys.argv[2], http=sys.argv[3]))\n"
        "book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read))\n"
        "print(book.world.revoke_token('gov', sys.argv[4]).revoked_by)\n")
    address = pdp_client.address
    done = subprocess.run([sys.executable, "-c", script, f"sqlite:///{tmp_path / 'world.db'}", address.grpc,
                           address.http, token_id], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "CERBOS_NO_TELEMETRY": "1"}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gov"
    assert _refusal(world, token).reason == "revoked"


@pytest.mark.parametrize(("scope", "write", "allowed"), [
    ("read", False, True), ("read", True, False), ("act", False, True), ("act", True, True),
    (TokenScope.READ, True, False), ("admin", False, False), ("", False, False)])
def test_scope_allows(scope: str, write: bool, allowed: bool) -> None:
    assert scope_allows(scope, write) is allowed

"""``pmw serve`` as a trust boundary: a real server process, two CLI clients (real processes) and one
embedded client on the same world. No token is refused; a token acts only as its agent; a revoked token is
refused on the very next call; a read-scoped token cannot write; no token is at rest in clear anywhere in
the data directory or the server's logs."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.client.http import RemoteError
from engine.runtime import Runtime
from engine.settings import load_settings
from tests.service.support import Served, secret_anywhere


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("serve-tokens")) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(served: Served) -> dict[str, str]:
    return {name: served.add_agent(name, ["state.write"]) for name in ("alice", "bob")}


def test_no_token_is_refused_by_the_cli_and_the_api(served: Served, tokens: dict[str, str]) -> None:
    done = served.cli(None, "--json", "state", "get", "k")
    assert done.returncode == 10, done.stderr
    assert json.loads(done.stderr)["code"] == "unauthenticated"
    request = urllib.request.Request(served.url + "/v1/world/get_state", data=b'{"arguments": {"key": "k"}}',
                                     method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    refused.value.close()
    assert refused.value.code == 401
    assert refused.value.headers["WWW-Authenticate"].startswith("Bearer")
    bad = served.cli("pmw_tok_0123456789abcdef_" + "0" * 64, "--json", "state", "get", "k")
    assert bad.returncode == 10 and json.loads(bad.stderr)["code"] == "unauthenticated"


def test_a_token_acts_only_as_its_agent(served: Served, tokens: dict[str, str]) -> None:
    wrote = served.cli(tokens["alice"], "--json", "state", "set", "alice-key", '{"n": 1}', "--expect-version", "0")
    assert wrote.returncode == 0, wrote.stderr
    as_bob = served.cli(tokens["alice"], "--as", "bob", "--json", "state", "set", "bob-key", "1",
                        "--expect-version", "0")
    assert as_bob.returncode == 6, as_bob.stderr
    assert json.loads(as_bob.stderr)["code"] == "not_permitted"
    with pytest.raises(RemoteError) as refused:  # the same through the API, the actor in the body
        served.client(tokens["alice"]).call("world", "compare_and_set_state", (),
                                            {"key": "bob-key", "expected_version": 0, "value": 1, "actor": "bob"})
    assert refused.value.code == "not_permitted" and refused.value.exit_code == 6
    gov = served.client(served.governor_token)
    with pytest.raises(RemoteError) as missing:  # nothing was written
        gov.call("world", "get_state", ("bob-key",), {"actor": "gov"})
    assert missing.value.code == "not_found"
    entry = gov.call("world", "get_state", ("alice-key",), {"actor": "gov"})
    assert (entry.updated_by, entry.value) == ("alice", {"n": 1})  # the token's agent, not a field


def test_two_cli_clients_and_an_embedded_client_share_one_world(served: Served, tokens: dict[str, str]) -> None:
    assert served.cli(tokens["alice"], "state", "set", "shared", '"from alice"', "--expect-version", "0"
                      ).returncode == 0
    seen = served.cli(tokens["bob"], "--json", "state", "get", "shared")
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout)["value"] == "from alice"
    settings = load_settings(db_url=served.env["PMW_DB_URL"])
    with Runtime.open(settings) as embedded:  # in process, on the same store and the same deployment
        entry = embedded.world.get_state("shared", actor="gov")
        assert entry is not None and entry.updated_by == "alice"
        embedded.world.compare_and_set_state("bob", "shared", entry.version, "from the embedded client")
    again = served.cli(tokens["alice"], "--json", "state", "get", "shared")
    assert json.loads(again.stdout)["value"] == "from the embedded client"


def test_a_read_token_cannot_write(served: Served, tokens: dict[str, str]) -> None:
    reader = served.issue("alice", "--scope", "read")
    written = served.cli(tokens["alice"], "state", "set", "read-token-key", "1", "--expect-version", "0")
    assert written.returncode == 0, written.stderr  # its own key: no other test's writes needed
    seen = served.cli(reader, "--json", "state", "get", "read-token-key")
    assert seen.returncode == 0 and json.loads(seen.stdout)["value"] == 1, seen.stderr
    refused = served.cli(reader, "--json", "state", "set", "read-only", "1", "--expect-version", "0")
    assert refused.returncode == 6 and "read" in json.loads(refused.stderr)["reason"]


def test_a_revoked_token_is_refused_on_the_next_call(served: Served, tokens: dict[str, str]) -> None:
    token = served.issue("bob")
    assert served.cli(token, "--json", "state", "get", "shared").returncode == 0
    token_id = "tok_" + token.split("_")[2]
    revoked = served.cli(served.governor_token, "--json", "tokens", "revoke", token_id)
    assert revoked.returncode == 0, revoked.stderr
    after = served.cli(token, "--json", "state", "get", "shared")
    assert after.returncode == 10, after.stderr
    assert json.loads(after.stderr)["code"] == "unauthenticated"
    assert served.cli(tokens["bob"], "--json", "state", "get", "shared").returncode == 0  # bob's other token


def test_no_token_is_at_rest_in_clear(served: Served, tokens: dict[str, str]) -> None:
    everything = [served.governor_token, *tokens.values()]
    for token in everything:
        secret = token.rsplit("_", 1)[1]
        assert secret_anywhere(served.data, secret) == [], "a token's secret is in the data directory"
        assert secret not in served.stderr()
    assert secret_anywhere(Path(served.data), everything[0]) == []


def raw_post(served: Served, path: str, body: bytes, token: str, **headers: str) -> tuple[int, dict[str, object]]:
    """One request as an attacker would send it: any bytes, any headers."""
    request = urllib.request.Request(served.url + path, data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {token}", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            raw = exc.read()
        finally:
            exc.close()
        return exc.code, json.loads(raw) if raw.startswith(b"{") else {"text": raw.decode(errors="replace")}


def head(served: Served) -> int:
    """The log's last position (read as the governor: a read writes nothing)."""
    return int(max(e.seq for e in served.client(served.governor_token).call(
        "world", "events", (), {"limit": 1, "newest": True, "actor": "gov"})))


@pytest.mark.parametrize(("path", "body", "status", "code"), [
    ("/v1/world/execute", b'{"arguments": {}}', 404, "not_found"),                    # not a call
    ("/v1/world/record_decision", b'{"arguments": {}}', 404, "not_found"),            # runtime bookkeeping
    ("/v1/world/_store", b"{}", 404, "not_found"),                                    # private
    ("/v1/governance/_runtime", b"{}", 404, "not_found"),
    ("/v1/world/enqueue_wake", b'{"arguments": {"target_agent": "bob", "cause": "x", "idempotency_key": "k",'
                               b' "causation": {"causation_id": "e"}}}', 400, "invalid_input"),  # the runtime's
    ("/v1/world/claim_wake", b'{"arguments": {"agent_id": "bob"}}', 403, "not_permitted"),  # another's wakes
    ("/v1/world/ack_wake", b'{"arguments": {"worker": "pull:bob", "wake_id": "wak_1"}}', 403, "not_permitted"),
    ("/v1/world/compare_and_set_state", b'{"positional": ["bob", "k", 0, 1]}', 403, "not_permitted"),
    ("/v1/world/get_state", b'{"arguments": {"key": "k"}, "extra": 1}', 400, "invalid_input"),
    ("/v1/world/get_state", b'{"arguments": {"key": "k", "nope": 1}}', 400, "invalid_input"),
    ("/v1/world/get_state", b'{"arguments": {"key": NaN}}', 400, "invalid_input"),
    ("/v1/world/get_state", b"[" * 5000 + b"]" * 5000, 400, "invalid_input"),
    ("/v1/world/get_state", b"\xff\xfe", 400, "invalid_input"),
    ("/v1/governance/history", b"{}", 403, "policy_denied"),                         # alice is no governor
    ("/v1/wakes/wak_none/decision", b'{"arguments": {"decision": {"decision": "no_action"}}}', 409,
     "wake_not_leased"),
])
def test_what_an_attacker_can_name_is_refused_and_changes_nothing(
        served: Served, tokens: dict[str, str], path: str, body: bytes, status: int, code: str) -> None:
    before = head(served)
    got, answer = raw_post(served, path, body, tokens["alice"])
    assert (got, answer.get("code")) == (status, code), answer
    denial = 1 if code == "policy_denied" else 0  # a policy denial leaves its one audit event, nothing else
    assert head(served) == before + denial
    assert served.health()["status"] == "ok"


def test_a_foreign_host_header_and_an_oversize_body_are_refused(served: Served, tokens: dict[str, str]) -> None:
    got, answer = raw_post(served, "/v1/world/get_state", b'{"arguments": {"key": "k"}}', tokens["alice"],
                           Host="evil.example:80")
    assert got == 400 and "host" in json.dumps(answer).lower()
    # an oversize body is refused from its Content-Length, before a byte of it is read
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(served.url).netloc, timeout=60)
    try:
        connection.putrequest("POST", "/v1/world/get_state")
        for name, value in (("Content-Type", "application/json"), ("Content-Length", str(9 * 1024 * 1024)),
                            ("Authorization", f"Bearer {tokens['alice']}")):
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 400 and json.loads(response.read())["code"] == "payload_too_large"
    finally:
        connection.close()
    assert served.health()["status"] == "ok"


def test_a_body_is_parsed_only_once_its_token_is_checked(served: Served, tokens: dict[str, str]) -> None:
    deep = b"[" * 5000 + b"]" * 5000
    got, answer = raw_post(served, "/v1/world/get_state", deep, "")  # no token: refused before any parse
    assert (got, answer.get("code")) == (401, "unauthenticated")
    got, answer = raw_post(served, "/v1/world/get_state", deep, tokens["alice"])  # a token: the body's fault
    assert (got, answer.get("code")) == (400, "invalid_input")


def test_the_metrics_are_a_governance_read_over_the_server(served: Served, tokens: dict[str, str]) -> None:
    """``pmw metrics`` in client mode: the server's world answers a governor; alice (a worker) is refused by
    the PDP, her denial recorded and nothing else written."""
    shown = served.cli_in_process(served.governor_token, "--json", "metrics")
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    assert {m["name"] for m in found["metrics"]} >= {"ICR", "UAR", "DSR", "HCS", "RSR", "EC"}
    assert found["last_seq"] >= 1 and found["reader"] == "gov"
    before = head(served)
    refused = served.cli_in_process(tokens["alice"], "--json", "metrics")
    assert refused.exit_code != 0 and "policy_denied" in refused.output, refused.output
    assert head(served) == before + 1  # her denial's audit event, nothing else

"""Read-set tokens through a real ``pmw serve`` with the real PDP, on SQLite and on PostgreSQL: the race of
seed 004 over the REST API (alice reads, bob writes, alice resends her stale value with the version patched
and her read token: ``409 stale_read`` naming what changed, nothing written), a forged token refused, and
the same through the Python client (``engine.client``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.client import connect
from engine.errors import StaleRead
from tests.service.support import Served
from tests.transports.test_rest_support import AGENT_CAPABILITIES, call


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    env = {"PMW_DB_URL": request.getfixturevalue("pg_url")} if request.param == "postgres" else None
    with Served(tmp_path, serve_args=["--no-controller"], env=env) as world:
        yield world


def test_the_stale_resend_race_through_the_api(served: Served) -> None:
    alice, bob = (served.add_agent(a, AGENT_CAPABILITIES) for a in ("alice", "bob"))
    assert call(served, "PUT", "/v1/state/plan", {"value": {"steps": 1}}, alice, If_None_Match="*")[0] == 200
    status, _, read = call(served, "GET", "/v1/state/plan", None, alice)
    assert (status, read["version"]) == (200, 1) and read["read_token"].startswith("rs1."), read
    assert call(served, "PUT", "/v1/state/plan", {"value": {"steps": 2}}, bob, If_Match='"1"')[0] == 200
    resend = {"key": "plan", "expected_version": 2, "value": {"steps": 10}, "read_token": read["read_token"]}
    status, _, refused = call(served, "POST", "/v1/actions/compare_and_set_state", resend, alice)
    assert (status, refused["code"]) == (409, "stale_read"), refused
    assert refused["fields"]["changed"] == [{"key": "plan", "read_version": 1, "current_version": 2}]
    status, _, put = call(served, "PUT", "/v1/state/plan", {"value": {"steps": 10}, "read_token": read["read_token"]},
                          alice, If_Match='"2"')
    assert (status, put["code"]) == (409, "stale_read"), put
    forged = {**resend, "read_token": read["read_token"][:-4] + "AAAA"}
    status, _, invalid = call(served, "POST", "/v1/actions/compare_and_set_state", forged, alice)
    assert (status, invalid["code"], invalid["fields"]["field"]) == (400, "invalid_input", "read_token"), invalid
    status, _, now = call(served, "GET", "/v1/state/plan", None, alice)
    assert (now["version"], now["value"]) == (2, {"steps": 2}), now

    world = connect(served.url, alice)  # the Python client: the same token, the same typed refusal
    seen = world.get_state("plan")
    assert call(served, "PUT", "/v1/state/plan", {"value": {"steps": 3}}, bob, If_Match='"2"')[0] == 200
    with pytest.raises(StaleRead) as stale:
        world.compare_and_set_state(key="plan", expected_version=3, value={"steps": 20}, read_token=seen.read_token)
    assert (stale.value.code, stale.value.changed) == (
        "stale_read", [{"key": "plan", "read_version": 2, "current_version": 3}])
    fresh = world.get_state("plan")
    done = world.compare_and_set_state(key="plan", expected_version=fresh.version, value={"steps": 4},
                                       read_token=fresh.read_token)
    assert (done.version, done.value) == (4, {"steps": 4})

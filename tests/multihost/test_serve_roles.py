"""``pmw serve --role`` on one PostgreSQL world: the api role runs no runner; two controller-role services
elect one leader, the other stands by and takes over when the leader stops (its lease released) or dies
(its lease runs out); the takeover time is measured. Services run in process, deciding with the session's
PDP (an external PDP: no PDP of their own to start)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.errors import InvalidInput
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime
from engine.service.host import Service
from engine.settings import Settings, load_settings
from tests.conftest import REPO

LEASE_S = 1.0


@pytest.fixture
def settings(pg_url: str, managed_pdp: ManagedPdp, tmp_path: Path) -> Settings:
    assert managed_pdp.address is not None
    s = load_settings(db_url=pg_url, pdp_address=managed_pdp.address.grpc, artifact_dir=tmp_path / "artifacts",
                      policy_dir=REPO / "policies")
    with Runtime.open(s) as rt:
        rt.book.bootstrap_governor("gov", "Governor", "t-gov")
        rt.world.activate_session("term:t-gov")
    return s


def _controller(settings: Settings) -> Service:
    return Service(settings, role="controller", governor="gov", leader_lease_s=LEASE_S, poll_s=0.05)


def _wait_leader(services: list[Service], timeout_s: float = 10.0) -> Service:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leaders = [s for s in services if s.health().leader == "leader"]
        if leaders:
            assert len(leaders) == 1
            return leaders[0]
        time.sleep(0.02)
    raise AssertionError([s.health() for s in services])


def test_the_api_role_serves_without_a_runner_and_holds_no_world_lock(settings: Settings) -> None:
    one, two = Service(settings, role="api"), Service(settings, role="api")
    try:
        one.start()
        two.start()  # side by side on one store: no data-directory lock
        assert (one.health().runner, one.health().role, one.health().leader) == ("none", "api", "none")
    finally:
        one.stop()
        two.stop()


def test_roles_refuse_agents_they_do_not_run() -> None:
    settings = load_settings(db_url="sqlite://")
    with pytest.raises(InvalidInput) as refused:
        Service(settings, role="worker")
    assert refused.value.field == "--agent"
    with pytest.raises(InvalidInput):
        Service(settings, role="api", adapters={"a": object()})  # type: ignore[dict-item]


def test_two_controllers_elect_one_leader_and_the_standby_takes_over(settings: Settings) -> None:
    a, b = _controller(settings), _controller(settings)
    try:
        a.start()
        b.start()
        leader = _wait_leader([a, b])
        standby = b if leader is a else a
        time.sleep(LEASE_S)  # several renewals: still one leader, the same one
        assert leader.health().leader == "leader" and standby.health().leader == "standby"
        generation = leader.health().leader_generation
        stopped_at = time.monotonic()
        leader.stop()  # releases the lease: the standby takes over at its next try
        assert _wait_leader([standby]) is standby
        takeover_s = time.monotonic() - stopped_at
        assert standby.health().leader_generation == (generation or 0) + 1
        assert standby.takeovers == 1
        assert takeover_s < LEASE_S + 1.0, takeover_s
        print(f"takeover after a clean stop: {takeover_s:.2f} s (lease {LEASE_S} s)")
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize(("args", "field"), [
    (["--role", "leader"], "--role"),
    (["--pdp", "not an address"], "--pdp"),
    (["--role", "worker"], "--agent"),
])
def test_pmw_serve_refuses_a_bad_role_or_pdp_before_opening_the_world(tmp_path: Path, args: list[str],
                                                                       field: str) -> None:
    from tests.cli_support import assert_clean_failure, invoke

    db = tmp_path / "w.db"
    result = invoke(f"sqlite:///{db}", "serve", "--port", "0", *args, actor="gov")
    assert_clean_failure(result, 3)
    assert field in result.output or field in (result.stderr or "")
    assert not db.exists()  # nothing opened, nothing written

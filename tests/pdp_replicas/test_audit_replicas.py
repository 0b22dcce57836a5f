"""``pmw audit`` and ``pmw policy shadow`` read every replica's decision log.

A runtime with two PDPs of its own spreads its checks over both, and each PDP writes its own log
(``decisions.log``, ``decisions-r1.log``): an audit that read only the first would miss about half of the
decisions, and a shadow replay would replay only half of the traffic."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.policy.decision_log import audit_filter, audit_rows
from engine.runtime import Runtime
from engine.service.governance import GovernanceCalls
from engine.settings import load_settings
from tests.conftest import REPO, add_agent


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, policy_deployment: Path) -> Iterator[Runtime]:
    tmp = tmp_path_factory.mktemp("replica-logs")
    settings = load_settings(db_url=f"sqlite:///{tmp / 'w.db'}", policy_dir=REPO / "policies", pdp_replicas=2,
                             policy_deploy_root=policy_deployment.parent, pdp_timeout_s=15.0)
    rt = Runtime.open(settings, supervise=False)
    rt.book.bootstrap_governor("gov", "Governor", "t-gov")
    rt.world.activate_session("term:t-gov")
    add_agent(rt.world, "alice", ["state.write"])
    yield rt
    rt.close()


def _wait_for(found: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    """The PDPs write their logs asynchronously: wait (bounded) until ``found``."""
    deadline = time.monotonic() + timeout_s
    while not found():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _logs(runtime: Runtime) -> list[Path]:
    logs = [m.audit_path for m in runtime.managed_replicas]
    assert len(logs) == 2 and all(p is not None for p in logs)
    return [p for p in logs if p is not None]


def test_the_audit_merges_every_replicas_log(runtime: Runtime) -> None:
    for n in range(20):  # alice's writes: each decided by one replica or the other
        runtime.world.compare_and_set_state("alice", f"k{n}", 0, n)
    logs = _logs(runtime)
    everything = audit_filter(agent="alice", kind="state", limit=100_000)

    def each_log_has_its_share() -> bool:
        return all(len(audit_rows(log, everything)) >= 5 for log in logs)
    _wait_for(each_log_has_its_share, "both replicas logged some of alice's 20 writes")
    _wait_for(lambda: sum(len(audit_rows(log, everything)) for log in logs) >= 20, "all 20 writes logged")

    per_log = [audit_rows(log, everything) for log in logs]
    audited = GovernanceCalls(runtime).audit("gov", agent="alice", kind="state", limit=100_000)
    assert len(audited) == sum(len(rows) for rows in per_log)
    assert {r.replica for r in audited} == {0, 1}
    for replica, rows in enumerate(per_log):  # each row once, named by the replica whose log holds it
        assert sorted(r.call_id for r in audited if r.replica == replica) == sorted(r.call_id for r in rows)
    assert [r.time_us for r in audited] == sorted(r.time_us for r in audited)  # merged in the PDPs' time order
    newest = GovernanceCalls(runtime).audit("gov", agent="alice", kind="state", limit=3)
    assert newest == audited[-3:]


def test_a_shadow_replay_replays_every_replicas_traffic(runtime: Runtime) -> None:
    logs = _logs(runtime)
    logged = [len(audit_rows(log, audit_filter(limit=100_000))) for log in logs]
    assert all(logged), logged
    report = GovernanceCalls(runtime).shadow("gov", str(REPO / "policies"))
    assert {str(p) for p in logs} <= set(report.log_files)
    assert report.changed == 0  # the deployed set against itself
    assert report.decisions_replayed >= sum(logged) > max(logged)  # every replica's decisions, not one's

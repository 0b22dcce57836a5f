"""PDP replicas with real Cerbos processes: calls spread over the replicas, survive the death of one, fail
closed when none answers, and every decision handed out is under the world's one epoch.

One runtime with two PDPs of its own (``PMW_PDP_REPLICAS=2``, unsupervised so that a killed replica stays
dead until the test brings it back) serves the module; each test restores both replicas before it ends."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import InvalidInput, PolicyUnavailable
from engine.policy.pdp_process import ManagedPdp
from engine.runtime import Runtime, probe_epoch
from engine.settings import load_settings
from tests.conftest import REPO, add_agent


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, policy_deployment: Path) -> Iterator[Runtime]:
    tmp = tmp_path_factory.mktemp("replicas")
    settings = load_settings(db_url=f"sqlite:///{tmp / 'w.db'}", policy_dir=REPO / "policies", pdp_replicas=2,
                             policy_deploy_root=policy_deployment.parent,  # the session's: deployed once
                             pdp_timeout_s=15.0)  # a dead replica refuses at once; a slow one is not dead
    rt = Runtime.open(settings, supervise=False)
    rt.book.bootstrap_governor("gov", "Governor", "t-gov")
    rt.world.activate_session("term:t-gov")
    add_agent(rt.world, "alice", ["state.write"])
    yield rt
    rt.close()


def _kill(managed: ManagedPdp) -> None:
    proc = managed.proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)


def _wait_all_up(rt: Runtime, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while any(s.state != "up" for s in rt.pdp_replicas()):
        assert time.monotonic() < deadline, rt.pdp_replicas()
        time.sleep(0.05)


def _revive(rt: Runtime) -> None:
    for managed in rt.managed_replicas:
        if managed.proc is None or managed.proc.poll() is not None:
            managed.start()  # the same loopback ports: the pool's clients reconnect
    _wait_all_up(rt)


def test_the_runtime_starts_the_replicas_it_is_asked_for_each_on_the_world_epoch(runtime: Runtime) -> None:
    statuses = runtime.pdp_replicas()
    epoch = runtime.book.current_policy_epoch()
    assert epoch is not None
    assert len(statuses) == 2 and len({s.address for s in statuses}) == 2
    assert [(s.state, s.epoch) for s in statuses] == [("up", epoch.epoch)] * 2


def test_calls_are_spread_over_every_replica(runtime: Runtime) -> None:
    before = [s.calls for s in runtime.pdp_replicas()]
    for _ in range(20):
        probe_epoch(runtime.pdp)
    after = [s.calls for s in runtime.pdp_replicas()]
    assert all(a - b >= 5 for a, b in zip(after, before, strict=True)), (before, after)


def test_killing_one_replica_mid_stream_keeps_every_write_succeeding_once(runtime: Runtime) -> None:
    world, victim = runtime.world, runtime.managed_replicas[0]
    done: list[int] = []
    errors: list[BaseException] = []

    def writes() -> None:
        version = 0
        try:
            for i in range(60):
                version = world.compare_and_set_state("alice", "stream", version, {"i": i}).version
                done.append(version)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    writer = threading.Thread(target=writes)
    writer.start()
    while len(done) < 10 and writer.is_alive():
        time.sleep(0.005)
    _kill(victim)
    writer.join(60)
    try:
        assert not errors, errors
        assert done == list(range(1, 61))  # each write committed once, none lost, none twice
        entry = world.get_state("stream", actor="alice")
        assert (entry.version, entry.value) == (60, {"i": 59})
        states = {s.address: s.state for s in runtime.pdp_replicas()}
        assert victim.address is not None and states[victim.address.grpc] == "down"
    finally:
        _revive(runtime)


def test_a_replica_back_after_a_death_is_used_again(runtime: Runtime) -> None:
    _kill(runtime.managed_replicas[1])
    probe_epoch(runtime.pdp)  # answered by the other replica
    _revive(runtime)
    before = runtime.pdp_replicas()[1].calls
    for _ in range(10):
        probe_epoch(runtime.pdp)
    assert runtime.pdp_replicas()[1].calls > before


def test_with_every_replica_dead_a_write_fails_closed_and_changes_nothing(runtime: Runtime) -> None:
    world = runtime.world
    counts = runtime.store.read.counts_and_versions()
    for managed in runtime.managed_replicas:
        _kill(managed)
    try:
        with pytest.raises(PolicyUnavailable):
            world.compare_and_set_state("alice", "dead-pdp", 0, {"x": 1})
        with pytest.raises(PolicyUnavailable):
            probe_epoch(runtime.pdp)
        assert runtime.store.read.counts_and_versions() == counts
    finally:
        _revive(runtime)
    assert world.compare_and_set_state("alice", "dead-pdp", 0, {"x": 1}).version == 1


def test_a_bad_replica_list_is_refused_naming_the_setting() -> None:
    with pytest.raises(InvalidInput) as refused:
        load_settings(pdp_addresses="127.0.0.1:1,not an address")
    assert refused.value.field == "PMW_PDP_ADDRESSES"
    assert load_settings(pdp_address="127.0.0.1:9", pdp_addresses="127.0.0.1:8,127.0.0.1:9"
                         ).pdp_address_list() == ["127.0.0.1:9", "127.0.0.1:8"]

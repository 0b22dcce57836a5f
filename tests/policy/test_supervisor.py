"""A supervised PDP comes back: killed (or hung), it is restarted on the same ports with backoff, callers
fail closed meanwhile, the status says what is going on, and stopping leaves no process and no files."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.errors import Closed, InvalidInput, PolicyUnavailable
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.pdp_process import ManagedPdp
from engine.policy.supervisor import PdpHealth, PdpSupervisor
from engine.runtime import probe_epoch
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.procs.pids import alive, processes_mentioning, started_after_boot_s, uptime_s, wait_dead


@pytest.fixture
def managed(policy_deployment: Path, tmp_path: Path) -> Iterator[ManagedPdp]:
    pdp = ManagedPdp(policy_deployment, run_dir=tmp_path / "run")
    pdp.start()
    yield pdp
    pdp.stop()


@pytest.fixture
def client(managed: ManagedPdp) -> Iterator[CerbosPdp]:
    assert managed.address is not None
    pdp = CerbosPdp(managed.address, timeout_s=1.0)
    yield pdp
    pdp.close()


def _poll(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def _check_until_it_answers(client: CerbosPdp, deadline: float) -> str:
    """A real check through the client, retried (bounded) while the channel reconnects."""
    while True:
        try:
            return probe_epoch(client)
        except PolicyUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


#: Every kill's new PDP answers within this, however busy the machine (a hung restart still fails).
ANSWERS_WITHIN_S = 60.0


def test_ten_sigkills_each_come_back_within_5_s(managed: ManagedPdp, client: CerbosPdp,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """Each kill's new PDP is launched within 5 s (timed from the kernel's record of its start, so the
    supervisor's reaction: its poll and backoff), and answers; the median kill-to-answer time is within 5 s.
    A Cerbos boot on a busy 2-core machine was seen to take over 5 s by itself, which one slow round of ten
    cannot make a failure; a hung restart still fails (each answer within ``ANSWERS_WITHIN_S``)."""
    caplog.set_level(logging.INFO, logger="pmw.pdp")
    epoch = probe_epoch(client)
    ports = (managed.address.grpc, managed.address.http) if managed.address else None
    supervisor = PdpSupervisor(managed, interval_s=0.2, max_backoff_s=2.0)
    supervisor.start()
    seen_between: list[str] = []
    recovery: list[float] = []
    launched: list[float] = []
    try:
        assert supervisor.status().state == "up"
        for n in range(1, 11):
            old = managed.pid
            assert old is not None
            killed_after_boot = uptime_s()
            _kill(old)
            killed_at = time.monotonic()
            _poll(lambda: supervisor.status().state in ("down", "restarting"), ANSWERS_WITHIN_S,
                  f"kill {n} to show")
            seen_between.append(supervisor.status().state)
            _poll(lambda: (s := supervisor.status()).state == "up" and s.pid not in (None, old),  # noqa: B023
                  ANSWERS_WITHIN_S, f"restart {n}")
            assert _check_until_it_answers(client, killed_at + ANSWERS_WITHIN_S) == epoch
            recovery.append(time.monotonic() - killed_at)
            new = managed.pid
            assert new is not None and new != old
            launched.append(started_after_boot_s(new) - killed_after_boot)
            assert launched[-1] <= 5, f"kill {n}: the new PDP launched {launched[-1]:.2f} s after the kill"
            assert not alive(old)
        assert statistics.median(recovery) < 5, f"healthy and answering after (s): {recovery}"
        status = supervisor.status()
        assert status.restarts == 10
        assert status.last_exit_code == -signal.SIGKILL
        assert managed.address is not None and (managed.address.grpc, managed.address.http) == ports
        assert set(seen_between) <= {"down", "restarting"} and len(seen_between) == 10
        last = managed.pid
        assert last is not None
    finally:
        supervisor.stop()
    assert managed.pid is None
    assert wait_dead(last, 5), "stop() left the last PDP running"
    assert processes_mentioning(str(managed.workdir)) == [], "stop() left a PDP running"
    assert not managed.workdir.exists(), "stop() left the working directory"
    assert supervisor.status().state == "stopped"
    deaths = [r for r in caplog.records if r.name == "pmw.pdp" and "exited with" in r.getMessage()]
    restarts = [r for r in caplog.records if r.name == "pmw.pdp" and "restarted" in r.getMessage()]
    assert len(deaths) == 10 and len(restarts) == 10
    assert all("\n" not in r.getMessage() for r in caplog.records)
    assert managed.address is not None and managed.address.admin_password is not None
    assert managed.address.admin_password not in caplog.text
    print("recovery after SIGKILL (s):", " ".join(f"{r:.2f}" for r in recovery))


def test_while_down_writes_fail_closed_and_work_resumes(managed: ManagedPdp, client: CerbosPdp,
                                                        tmp_path: Path) -> None:
    world = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", client, tmp_path / "art")
    supervisor = PdpSupervisor(managed, interval_s=2.0, max_backoff_s=2.0, unhealthy_after=0)  # slow to notice
    try:
        add_agent(world, "alice", ["state.write"])
        world.compare_and_set_state("alice", "n", 0, 0)
        supervisor.start()
        proc = managed.proc
        assert proc is not None
        _kill(proc.pid)
        proc.wait(5)
        assert supervisor.status().state == "down", "the status says so as soon as the PDP is dead"
        before = book_of(world).store.read.counts_and_versions()
        with pytest.raises(PolicyUnavailable):
            world.compare_and_set_state("alice", "n", 1, 1)
        with pytest.raises(PolicyUnavailable):
            world.get_state("n", actor="alice")
        assert book_of(world).store.read.counts_and_versions() == before, "a write got through while down"
        _poll(lambda: supervisor.status().state == "up", 10, "the restart")
        deadline = time.monotonic() + 5
        while True:
            try:
                entry = world.compare_and_set_state("alice", "n", 1, 1)
                break
            except PolicyUnavailable:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert entry.version == 2
        assert supervisor.status().restarts == 1
    finally:
        supervisor.stop()
        close_world(world)


def test_a_hung_pdp_is_killed_by_pid_and_restarted(managed: ManagedPdp, client: CerbosPdp) -> None:
    supervisor = PdpSupervisor(managed, interval_s=0.1, max_backoff_s=1.0, unhealthy_after=3, health_timeout_s=0.3)
    supervisor.start()
    try:
        hung = managed.pid
        assert hung is not None
        os.kill(hung, signal.SIGSTOP)
        _poll(lambda: supervisor.status().restarts == 1 and supervisor.status().state == "up", 10,
              "the hung PDP to be replaced")
        assert wait_dead(hung, 5), "the hung PDP was not killed"
        assert supervisor.status().last_exit_code == -signal.SIGKILL
        assert managed.pid != hung
        assert _check_until_it_answers(client, time.monotonic() + 5)
    finally:
        supervisor.stop()


def test_restarts_back_off_while_the_pdp_cannot_start_and_recover_when_it_can(
        policy_deployment: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pmw.pdp")
    policies = tmp_path / "policies"
    shutil.copytree(policy_deployment, policies)
    state_policy = policies / "resources" / "state.yaml"
    good = state_policy.read_text()
    managed = ManagedPdp(policies, run_dir=tmp_path / "run")
    managed.start()
    supervisor = PdpSupervisor(managed, interval_s=0.1, max_backoff_s=0.8)
    supervisor.start()
    try:
        state_policy.write_text("resourcePolicy: [this is not a policy")
        assert managed.pid is not None
        _kill(managed.pid)
        _poll(lambda: len(_failed(caplog)) >= 5, 20, "five failed restarts")
        status = supervisor.status()
        assert status.state in ("down", "restarting") and status.restarts == 0
        assert status.last_error is not None and "cerbos exited" in status.last_error
        assert "\n" not in status.last_error
        times = [r.created for r in _failed(caplog)]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps[-1] > gaps[0] and gaps[-1] >= 0.8, f"no backoff up to max_backoff_s between attempts: {gaps}"
        state_policy.write_text(good)
        _poll(lambda: supervisor.status().state == "up", 10, "the restart once the policies are good again")
        assert supervisor.status().restarts == 1
    finally:
        supervisor.stop()
    assert processes_mentioning(str(managed.workdir)) == []
    assert not managed.workdir.exists()


def _failed(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "pmw.pdp" and "restart failed" in r.getMessage()]


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
def test_stop_during_a_restart_leaves_nothing_and_is_safe_from_two_threads(
        managed: ManagedPdp, delay: float) -> None:
    supervisor = PdpSupervisor(managed, interval_s=0.05, max_backoff_s=0.5)
    supervisor.start()
    assert managed.pid is not None
    _kill(managed.pid)
    time.sleep(delay)  # somewhere in noticing, launching or waiting for the new server
    errors: list[BaseException] = []

    def stop() -> None:
        try:
            supervisor.stop()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    stoppers = [threading.Thread(target=stop) for _ in range(2)]
    for t in stoppers:
        t.start()
    for t in stoppers:
        t.join(30)
    assert errors == [] and not any(t.is_alive() for t in stoppers)
    time.sleep(0.5)  # a restart that slipped past the stop would be running by now
    assert processes_mentioning(str(managed.workdir)) == [], "a PDP was left running after stop()"
    assert not managed.workdir.exists()
    assert managed.pid is None
    assert supervisor.status().state == "stopped"
    supervisor.stop()  # idempotent
    with pytest.raises(Closed):
        supervisor.start()


def test_a_pdp_its_owner_stopped_is_not_restarted(managed: ManagedPdp) -> None:
    supervisor = PdpSupervisor(managed, interval_s=0.05)
    supervisor.start()
    try:
        managed.stop()
        time.sleep(0.5)
        status = supervisor.status()
        assert status.state == "stopped" and status.restarts == 0 and status.pid is None
        assert processes_mentioning(str(managed.workdir)) == []
    finally:
        supervisor.stop()


def test_status_is_a_json_model_and_bad_settings_are_refused(managed: ManagedPdp) -> None:
    supervisor = PdpSupervisor(managed)
    status = supervisor.status()
    assert status.state == "stopped"  # not watching yet
    supervisor.start()
    try:
        status = supervisor.status()
        assert status.state == "up" and status.pid == managed.pid and status.restarts == 0
        assert PdpHealth.model_validate_json(status.model_dump_json()) == status
    finally:
        supervisor.stop()
    with pytest.raises(InvalidInput) as bad:
        PdpSupervisor(managed, interval_s=0)
    assert bad.value.field == "interval_s"
    with pytest.raises(InvalidInput) as bad:
        PdpSupervisor(managed, interval_s=1.0, max_backoff_s=0.5)
    assert bad.value.field == "max_backoff_s"

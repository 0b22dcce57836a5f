"""The PDP's parent-death signal is the process's, not a thread's: a PDP started from a thread that then
exits keeps serving, and a SIGKILLed process still takes its PDP along (``PR_SET_PDEATHSIG`` fires when the
forking *thread* exits, so every PDP is forked by one process-lifetime launcher thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.pdp_process import ManagedPdp, pdp_healthy
from engine.runtime import probe_epoch
from tests.procs.pids import alive, kill_owner, start_pdp_owner, wait_dead


@pytest.fixture
def pdp(policy_deployment: Path, tmp_path: Path) -> Iterator[ManagedPdp]:
    managed = ManagedPdp(policy_deployment, run_dir=tmp_path / "run")
    yield managed
    managed.stop()


def _start_in_threads(action: object, n: int) -> None:
    """Run ``action`` in ``n`` short-lived threads, one after the other, each joined (it has exited)."""
    for i in range(n):
        thread = threading.Thread(target=action, name=f"short-lived-{i}")  # type: ignore[arg-type]
        thread.start()
        thread.join(60)
        assert not thread.is_alive()


def test_a_pdp_started_from_a_thread_that_exits_stays_up(pdp: ManagedPdp) -> None:
    _start_in_threads(pdp.start, 1)
    time.sleep(1.0)  # a per-thread parent-death signal fires at once when the thread exits
    pid = pdp.pid
    assert pid is not None and alive(pid), "the PDP died with the thread that started it"
    assert pdp.address is not None and pdp_healthy(pdp.address)
    client = CerbosPdp(pdp.address)
    try:
        assert probe_epoch(client), "a real check through the client"
    finally:
        client.close()


def test_a_pdp_restarted_from_another_short_lived_thread_stays_up(pdp: ManagedPdp) -> None:
    pdp.start()
    pdp.stop(keep_files=True)
    _start_in_threads(pdp.start, 1)  # the restart, from yet another thread that exits
    time.sleep(1.0)
    pid = pdp.pid
    assert pid is not None and alive(pid)
    assert pdp.address is not None and pdp_healthy(pdp.address)


def test_a_sigkilled_process_whose_pdp_a_finished_thread_started_takes_it_along(
        policy_deployment: Path, tmp_path: Path) -> None:
    child, report = start_pdp_owner(policy_deployment, "--from-thread", "--run-dir", str(tmp_path / "run"))
    pdp_pid = int(str(report["pdp_pid"]))
    try:
        assert alive(pdp_pid), "the PDP died with the thread that started it"
    finally:
        kill_owner(child)
    assert wait_dead(pdp_pid, 10), "the PDP outlived the SIGKILLed process that started it"

"""``benchmarks.cpu_time``: a process tree's CPU, its reaped children included (a PostgreSQL postmaster's
backends), and the scale benchmark's account of what the CPU allows."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks import cpu_time
from benchmarks.scale_bench import cpu_bound

pytestmark = pytest.mark.skipif(not cpu_time.available(), reason="needs Linux /proc")

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end:\n    pass\n"
# a parent that burns nothing itself: one child burns and is reaped, a second burns and stays alive
PARENT = (
    "import subprocess, sys, time\n"
    "subprocess.run([sys.executable, '-c', {burn!r}], check=True)\n"
    "live = subprocess.Popen([sys.executable, '-c', {burn!r} + 'time.sleep(30)\\n'])\n"
    "print(live.pid, flush=True)\n"
    "time.sleep(30)\n"
)


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def test_a_tree_counts_the_children_it_reaped_and_the_ones_alive() -> None:
    burn = BURN.format(s=0.4)
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(burn=burn)], stdout=subprocess.PIPE, text=True)
    live = 0
    try:
        assert parent.stdout is not None
        live = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        spent = cpu_time.tree_cpu_s([parent.pid])
        while spent < 0.8 and time.monotonic() < deadline:  # the live child is still burning its share
            time.sleep(0.05)
            spent = cpu_time.tree_cpu_s([parent.pid])
        assert spent >= 0.8  # 0.4 s reaped + 0.4 s alive; the parent's own start adds a little
        assert spent < 0.8 + 5.0
    finally:
        if live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(live, signal.SIGKILL)  # the parent's child, by its PID (the parent is killed next)
        _stop(parent)


def test_a_sleeping_process_costs_nothing_and_a_gone_one_is_skipped() -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "up"
        before = cpu_time.tree_cpu_s([sleeper.pid])
        time.sleep(0.3)
        assert cpu_time.tree_cpu_s([sleeper.pid]) - before < 0.1
    finally:
        _stop(sleeper)
    gone = cpu_time.tree_cpu_s([sleeper.pid])
    assert gone == 0.0 or os.path.exists(f"/proc/{sleeper.pid}")  # unless its PID was reused meanwhile


def _row(workers: int, rate: float, cpu: dict[str, float | None]) -> dict[str, object]:
    return {"workers": workers, "wakes_per_s": rate, "cpu_ms_per_wake": cpu}


def test_the_cpu_allows_the_cores_over_one_workers_cost() -> None:
    rows = [_row(1, 20.0, {"workers": 30.0, "postgres": 20.0, "pdps": 10.0}),  # 60 ms a wake: 1.2 cores busy
            _row(4, 30.0, {"workers": 40.0, "postgres": 20.0, "pdps": 20.0}),  # 80 ms: 2.4 (over-booked)
            _row(2, 25.0, {"workers": 30.0, "postgres": None, "pdps": 10.0})]  # a server of yours: unknown
    cpu_bound(rows, cores=2)
    assert rows[0]["cores_busy"] == 1.2 and rows[0]["cpu_speedup_ceiling"] == pytest.approx(1.67, abs=0.01)
    assert rows[1]["cores_busy"] == 2.4 and rows[1]["cpu_speedup_ceiling"] == pytest.approx(1.25)
    assert rows[2]["cores_busy"] is None and rows[2]["cpu_speedup_ceiling"] is None

"""The server's PDP is supervised: SIGKILL it ten times under a running server whose worker has work
falling due. Each time the supervisor launches a new PDP within 5 s of the kill and it answers (the median of
the ten kill-to-answer times within 5 s, each within a bound a busy machine cannot miss); while no PDP process
exists nothing is committed (the work that fell due waits, fail closed); afterwards every queued wake
completes with exactly one receipt.

The launch is timed from the kernel's own record of when the new process started (``/proc/<pid>/stat``
against ``/proc/uptime`` read at the kill), so it is the supervisor's reaction (its poll and its backoff, at
most 2 s), not how long a Cerbos server takes to boot on a 2-core machine that other tests keep busy: that
boot was seen to take over 5 s there, which one slow round of ten cannot make a failure."""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import Reader, Store
from tests.service.support import Served, wait_until

KILLS = 10
BACK_WITHIN_S = 5.0
#: Every kill's new PDP answers within this, however busy the machine (a hung restart still fails).
ANSWERS_WITHIN_S = 60.0


def started_at_us(pid: int) -> int:
    """When process ``pid`` started (µs since the epoch), from /proc (clock ticks since boot)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[19])  # field 22 of stat: starttime
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return (boot * 1_000_000) + ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")


def uptime_s() -> float:
    """Seconds since boot (``/proc/uptime``), the clock a process's start time in /proc counts on."""
    return float(Path("/proc/uptime").read_text().split()[0])


def started_after_boot_s(pid: int) -> float:
    """When process ``pid`` started, in seconds since boot (field 22 of /proc/<pid>/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def caught_up(read: Reader) -> bool:
    """The controller has stepped over everything committed but its own steps: nothing is in flight."""
    position = read.get("controller_positions", world_id="main")
    last = max((e["seq"] for e in read.events(0) if e["command"] != "controller_step"), default=0)
    return position is not None and int(position["position"]) >= last


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-pdp")
    with Served(root, serve_args=["--agent", "relay=tests.runloop.cli_agents:bob", "--poll-seconds", "0.1",
                                  "--lease-seconds", "3"]) as server:
        yield server


@pytest.fixture
def read(served: Served) -> Iterator[Reader]:
    observer = Store(served.env["PMW_DB_URL"])  # the test's own connection: reads only
    yield observer.read
    observer.close()


def test_ten_pdp_kills_under_a_running_server(served: Served, read: Reader) -> None:
    boss = served.client(served.add_agent("boss", ["wake.enqueue"]))
    served.add_agent("relay", ["state.write"])
    wake_ids: list[str] = []
    due_at: dict[str, int] = {}
    took: list[float] = []
    launched: list[float] = []
    for round_ in range(KILLS):
        for n in range(2):  # falls due while the PDP is dead: the worker must wait
            wake = boss.call("world", "enqueue_wake", (), {
                "target_agent": "relay", "cause": "count", "idempotency_key": f"r{round_}-{n}",
                "not_before_us": int(time.time() * 1_000_000) + 800_000, "actor": "boss"}).wake
            wake_ids.append(wake.wake_id)
            due_at[wake.wake_id] = wake.not_before_us
        wait_until(lambda: caught_up(read), 30, "the controller catching up")
        before = served.health()["pdp"]
        assert before["state"] == "up", before
        killed_at = int(time.time() * 1_000_000)
        # Work already due at the kill (a slow set-up on a busy machine, or an earlier round's wake still
        # queued) may have been decided under the live PDP and commit just after the kill: only its own
        # wake's records are not counted below; any other write in the window is.
        due_before_kill = {w for w, due in due_at.items() if due <= killed_at}
        killed_after_boot = uptime_s()
        os.kill(before["pid"], signal.SIGKILL)

        def back(before: dict[str, object] = before) -> bool:
            now = served.health()["pdp"]
            return bool(now["state"] == "up" and now["pid"] != before["pid"])
        took.append(wait_until(back, ANSWERS_WITHIN_S, f"the PDP back after kill {round_ + 1}"))
        new_pid = served.health()["pdp"]["pid"]
        launched.append(started_after_boot_s(new_pid) - killed_after_boot)
        assert launched[-1] <= BACK_WITHIN_S, (f"kill {round_ + 1}: the new PDP launched "
                                               f"{launched[-1]:.2f} s after the kill", launched)
        reborn = started_at_us(new_pid)
        during = [(e["seq"], e["command"], e["subject_id"]) for e in read.events(0)
                  if killed_at < e["created_at_us"] < reborn and e["subject_id"] not in due_before_kill]
        assert during == [], f"written while no PDP existed (kill {round_ + 1}): {during}"

    assert served.health()["pdp"]["restarts"] == KILLS
    print("PDP launched after SIGKILL (s):", " ".join(f"{t:.2f}" for t in launched))  # shown with pytest -s
    print("PDP answering after SIGKILL (s):", " ".join(f"{t:.2f}" for t in took))
    assert statistics.median(took) <= BACK_WITHIN_S, took

    def receipts() -> list[str]:
        return [r["wake_id"] for r in read.rows("receipts") if r["wake_id"] in set(wake_ids)]
    wait_until(lambda: set(receipts()) == set(wake_ids), 120, "every queued wake's receipt")
    assert sorted(receipts()) == sorted(wake_ids)  # exactly one receipt per wake
    assert {r["outcome"] for r in read.rows("receipts") if r["wake_id"] in set(wake_ids)} == {"acted"}
    assert served.proc is not None and served.proc.poll() is None

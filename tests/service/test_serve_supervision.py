"""The server's PDP is supervised: SIGKILL it ten times under a running server whose worker has work
falling due. Each time a new PDP answers within 5 s; while no PDP process exists nothing is committed (the
work that fell due waits, fail closed); afterwards every queued wake completes with exactly one receipt."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.support import Served, wait_until

KILLS = 10
BACK_WITHIN_S = 5.0


def started_at_us(pid: int) -> int:
    """When process ``pid`` started (µs since the epoch), from /proc (clock ticks since boot)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[19])  # field 22 of stat: starttime
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                if line.startswith("btime "))
    return (boot * 1_000_000) + ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")


def store(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-pdp")
    with Served(root, serve_args=["--agent", "relay=tests.runloop.cli_agents:bob", "--poll-seconds", "0.1",
                                  "--lease-seconds", "3"]) as server:
        yield server


def test_ten_pdp_kills_under_a_running_server(served: Served) -> None:
    boss = served.client(served.add_agent("boss", ["wake.enqueue"]))
    served.add_agent("relay", ["state.write"])
    db = served.data / "world.db"
    wake_ids: list[str] = []
    took: list[float] = []
    for round_ in range(KILLS):
        for n in range(2):  # falls due while the PDP is dead: the worker must wait
            wake = boss.call("world", "enqueue_wake", (), {
                "target_agent": "relay", "cause": "count", "idempotency_key": f"r{round_}-{n}",
                "not_before_us": int(time.time() * 1_000_000) + 800_000, "actor": "boss"}).wake
            wake_ids.append(wake.wake_id)
        with store(db) as con:  # the controller has stepped over everything committed: nothing in flight
            wait_until(lambda con=con: con.execute(
                "SELECT max(seq) FROM events WHERE command != 'controller_step'").fetchone()[0]
                <= (con.execute("SELECT max(position) FROM controller_positions").fetchone()[0] or 0),
                30, "the controller catching up")
        before = served.health()["pdp"]
        assert before["state"] == "up", before
        killed_at = int(time.time() * 1_000_000)
        os.kill(before["pid"], signal.SIGKILL)
        started = time.monotonic()

        def back(before: dict[str, object] = before) -> bool:
            now = served.health()["pdp"]
            return now["state"] == "up" and now["pid"] != before["pid"]
        took.append(wait_until(back, BACK_WITHIN_S + 5, f"the PDP back after kill {round_ + 1}"))
        assert time.monotonic() - started <= BACK_WITHIN_S, took
        reborn = started_at_us(served.health()["pdp"]["pid"])
        with store(db) as con:
            during = con.execute("SELECT seq, command FROM events WHERE created_at_us > ? AND created_at_us < ?",
                                 (killed_at, reborn)).fetchall()
        assert during == [], f"written while no PDP existed (kill {round_ + 1}): {during}"

    assert served.health()["pdp"]["restarts"] == KILLS
    with store(db) as con:
        def all_receipted(con: sqlite3.Connection = con) -> bool:
            marks = ",".join("?" * len(wake_ids))
            return con.execute(f"SELECT count(DISTINCT wake_id) FROM receipts WHERE wake_id IN ({marks})",
                               wake_ids).fetchone()[0] == len(wake_ids)
        wait_until(all_receipted, 120, "every queued wake's receipt")
        marks = ",".join("?" * len(wake_ids))
        per_wake = con.execute(f"SELECT wake_id, count(*) FROM receipts WHERE wake_id IN ({marks}) GROUP BY wake_id",
                               wake_ids).fetchall()
        outcomes = {row[0] for row in con.execute(
            f"SELECT outcome FROM receipts WHERE wake_id IN ({marks})", wake_ids).fetchall()}
    assert sorted(count for _, count in per_wake) == [1] * len(wake_ids)
    assert outcomes == {"acted"}
    assert served.proc is not None and served.proc.poll() is None

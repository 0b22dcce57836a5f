"""Crash recovery of the run loop (issue 4): 50 trials of SIGKILLing a worker process at a random point of its
cycle, then restarting it.

Each of ``WORLDS`` worlds (a SQLite file, every call decided by the real PDP) gets ``KILLS`` trials. Before each
trial the parent seeds a batch of tasks, each claimed by a worker and carried by a hand-queued wake; the
controller adds wakes of its own (task owner, topic subscribers, a two-hop cascade between observers, all
judged by the real storm rules). A child (:mod:`tests.procs.run_loop_child`, forked from a zygote that has
the engine imported) runs the controller follower and the worker until the parent SIGKILLs it, by its PID,
once it has logged a random number of steps (plus a random sleep; the child sleeps at random before each
World call, so kills land in claims, decisions, effects, acks, controller steps and in between). After each
kill the parent checks what must hold at any moment; after the last one it restarts a child that runs until
nothing is due, and checks that the world is complete:

* every wake ends with exactly one receipt (``acted``), and the wakes still open hold none;
* no effect is applied twice: each effect's operation id ``<wake>:<n>`` is in the log at most once, the
  effects of a wake are a prefix of its recorded decision and carry that decision's nonce (a re-decided
  wake would send a different request under the same id), ``mark.<wake>`` is at version 1;
* no wake is lost: a fresh controller replaying the whole log makes exactly the decisions the controller
  steps recorded, position by position, and the controller's wakes are exactly the replay's wake keys
  (none duplicated; the hand-queued wakes are all there);
* the controller's position is the last event that decided or changed anything, its stored facts equal
  the replay's, and ``fold(events) == state``.

A failure names the world and trial (``-k "loses_and_repeats_nothing and [3]"`` reruns that world: its
batches and kill targets come from ``random.Random(f"run-loop-crash/{world}")``, the exact kill instant is
wall-clock) and where the kill landed; each run's step log (``run-<trial>.jsonl``) and the world's SQLite
file stay in the test's temporary directory. ``-s`` prints where the kills landed and what they left open.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.controller.decisions import AnyDecision, DeferWake, WakeTarget
from engine.controller.facts import Fact
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.pdp_process import ManagedPdp
from engine.runloop import InProcessRunner
from engine.runloop.follower import CONTROLLER_AGENT, CONTROLLER_CAPABILITIES, ControllerLoop, DrainStats
from engine.runloop.runner import DEFAULT_RULES
from engine.sources import SystemClock
from engine.world import World
from engine.world.book import RuntimeBook
from tests.conftest import add_agent, book_of, close_world, open_pdp_world
from tests.procs import Child, kill, read_lines, spawn, wait_until
from tests.procs.run_loop_child import BOSS, OBSERVERS, WORKERS, topic

pytestmark = pytest.mark.slow

WORLDS = 10
KILLS = 5                   # WORLDS * KILLS == 50 trials
BATCH = 3                   # tasks (hand-queued wakes) seeded before each trial
LEASE_S = 0.3               # a wake killed mid-cycle is due again soon after the restart
JITTER_MS = 3.0
RECORDS_PER_WAKE = 13       # log lines of one wake's cycle (claim, decide, record, 3 effects, ack)
RUN_DEADLINE_S = 60.0
COUNTS = ("wakes", "ctl_wakes", "acked", "effects", "steps", "events")
START_TIMEOUT_S = 30.0
KILL_LABELS: Counter[str] = Counter()   # where the kills landed, over every world of the run
LEFT_OPEN: Counter[str] = Counter()     # what the kills left behind for the restart to recover


# -- the zygote: forks each run of the child ---------------------------------------------------------------


class Zygote:
    """Parent side of :func:`tests.procs.run_loop_child.zygote`: one run at a time."""

    def __init__(self, child: Child, ctl: Path) -> None:
        self.child = child
        self.ctl = ctl
        self.log = ctl / "zygote.jsonl"
        self.n = 0
        self.pid: int | None = None  # the run in progress

    def _lines(self) -> list[dict[str, Any]]:
        if self.child.proc.poll() is not None:
            raise AssertionError("the zygote died:\n" + self.child.describe())
        return read_lines(self.log)

    def start(self, args: list[str]) -> int:
        assert self.pid is None
        tmp = self.ctl / f".cmd-{self.n}.tmp"
        tmp.write_text(json.dumps(args))
        tmp.rename(self.ctl / f"cmd-{self.n}.json")
        n = self.n
        wait_until(lambda: any(r.get("n") == n for r in self._lines()), START_TIMEOUT_S, f"run {n} to fork")
        self.pid = next(int(r["pid"]) for r in self._lines() if r.get("n") == n)
        return self.pid

    def exit_code(self) -> int | None:
        """The run's exit code once the zygote reaped it (``None`` while it runs)."""
        found = [r["exit"] for r in self._lines() if r.get("n") == self.n and "exit" in r]
        return int(found[0]) if found else None

    def wait(self, timeout: float) -> int:
        wait_until(lambda: self.exit_code() is not None, timeout, f"run {self.n} (pid {self.pid}) to exit",
                   interval=0.005)
        code = self.exit_code()
        assert code is not None
        self.n += 1
        self.pid = None
        return code

    def kill(self) -> int:
        """SIGKILL the run in progress by its PID; its exit code (as reaped by the zygote)."""
        assert self.pid is not None
        if self.exit_code() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        return self.wait(30)

    def stop(self) -> None:
        if self.pid is not None:
            with contextlib.suppress(Exception):
                self.kill()
        if self.child.proc.poll() is None:
            (self.ctl / f"cmd-{self.n}.json").write_text(json.dumps("stop"))
            with contextlib.suppress(Exception):
                self.child.proc.wait(timeout=5)
        kill(self.child)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    ctl = tmp_path_factory.mktemp("run-loop-zygote")
    z = Zygote(spawn("run_loop_child", "zygote", str(ctl), name="zygote", workdir=ctl), ctl)
    try:
        wait_until(lambda: any(r.get("ready") for r in z._lines()), START_TIMEOUT_S, "the zygote")
        ready = next(r for r in z._lines() if r.get("ready"))
        assert ready["threads"] == 1
        yield z
    finally:
        z.stop()
        print(f"\nkill points over {sum(KILL_LABELS.values())} trials: {dict(sorted(KILL_LABELS.items()))}\n"
              f"left for the restart: {dict(sorted(LEFT_OPEN.items()))}")


# -- the replay: a fresh controller over the whole log, committing nothing ---------------------------------


class Replay(ControllerLoop):
    """Observes the log like the follower, from position 0, but records each step instead of committing it."""

    def __init__(self, book: RuntimeBook) -> None:
        super().__init__(book, DEFAULT_RULES, world_id="main")
        self.controller.load()
        self._loaded = True
        self.steps: dict[int, list[dict[str, Any]]] = {}
        self.wake_keys: dict[str, int] = {}  # idempotency key -> position that decided it

    def _commit(self, row: Mapping[str, Any], chain: str, decisions: tuple[AnyDecision, ...],
                upserted: tuple[Fact, ...], retracted: tuple[str, ...], stats: DrainStats) -> None:
        seq = int(row["seq"])
        records: list[dict[str, Any]] = []
        for d in decisions:
            record: dict[str, Any] = {"kind": d.kind, "rule": d.rule, **d.signature()}
            record.pop("world", None)
            if isinstance(d, WakeTarget) or (isinstance(d, DeferWake) and d.joins is None):  # a deferred wake too
                assert d.idempotency_key not in self.wake_keys, d
                self.wake_keys[d.idempotency_key] = seq
            records.append(record)
        self.steps[seq] = json.loads(json.dumps(records))
        for fact_id in retracted:
            self._facts.pop(fact_id, None)
        for f in upserted:
            self._facts[f["id"]] = f

    def start(self) -> None:
        """Rebuild from the replay's own facts (the follower rebuilds from SQL after an engine failure)."""
        self.controller.rebuild(list(self._facts.values()), position=self._seen)


# -- the world ---------------------------------------------------------------------------------------------


def build_world(url: str, pdp: CerbosPdp, tmp: Path, seed: int) -> World:
    world = open_pdp_world(url, pdp, tmp / "artifacts", clock=SystemClock(), seed=seed)  # type: ignore[arg-type]
    add_agent(world, BOSS, ["task.create", "wake.enqueue", "state.write"])
    for w in WORKERS:
        add_agent(world, w, ["state.write", "task.work"])
    for i, o in enumerate(OBSERVERS):
        add_agent(world, o, ["state.write"])
        world.subscribe(o, topic(i))        # topic i is followed by observers i and i + 1
        world.subscribe(o, topic(i - 1))
    return world


def seed_batch(world: World, rng: random.Random, trial: int) -> None:
    for k in range(BATCH):
        worker = rng.choice(WORKERS)
        task = world.create_task(BOSS, f"job {trial}.{k}")
        world.claim_task(worker, task.task_id)
        world.enqueue_wake(BOSS, worker, "job", f"hand:{task.task_id}", payload={"task": task.task_id})


def open_wakes(world: World) -> int:
    return len(book_of(world).store.read.rows("wakes", {"status": ["pending", "claimed"]}))


def run_args(world_url: str, pdp: ManagedPdp, tmp: Path, log: Path, mode: str, seed: str) -> list[str]:
    assert pdp.address is not None
    return [world_url, pdp.address.grpc, pdp.address.http, str(tmp / "artifacts"), str(log), mode, seed, str(LEASE_S),
            str(JITTER_MS), str(RUN_DEADLINE_S)]


def kill_label(records: list[dict[str, Any]]) -> str:
    """Where the run was when it died: inside the last call it started, or after the last call it finished."""
    steps = [r for r in records if "p" in r]
    if not steps:
        return "starting"
    last = steps[-1]
    if last["at"] == "after":
        return f"after {last['p']}" + (" (nothing due)" if last.get("none") and last["p"] == "claim_wake" else "")
    return f"{'in' if last['at'] == 'before' else 'in adapter'} {last['p']}"


# -- the checks --------------------------------------------------------------------------------------------


def check_world(world: World, replay: Replay, *, final: bool, where: str) -> dict[str, int]:
    """What must hold after any kill; with ``final``, also that all work is done. Returns a few counts."""
    book = book_of(world)
    read = book.store.read
    assert book.rebuild_state(from_snapshot=False) == book.state_image(), where
    events = read.events(0)
    wakes = {w["wake_id"]: w for w in read.rows("wakes")}
    receipts = read.rows("receipts")
    by_op = Counter(str(e["op_id"]) for e in events if e["op_id"])

    # exactly one receipt per finished wake, none for an open one
    receipt_of = Counter(r["wake_id"] for r in receipts if r["wake_id"])
    assert all(n == 1 for n in receipt_of.values()), (where, receipt_of.most_common(3))
    for wid, w in wakes.items():
        finished = w["status"] in ("acked", "cancelled")
        assert receipt_of[wid] == (1 if finished else 0), (where, w)
    outcomes = Counter(r["outcome"] for r in receipts if r["wake_id"])
    assert set(outcomes) <= {"acted"}, (where, outcomes)

    # every effect at most once, a prefix of the recorded decision, carrying its nonce
    marks = {e["subject_id"]: e for e in events if e["event_type"] == "state.set"
             and str(e["subject_id"]).startswith("mark.")}
    effects_done = 0
    left: Counter[str] = Counter()
    for wid, w in wakes.items():
        recorded = book.recorded_decision(wid)
        applied = [by_op[f"{wid}:{i}"] for i in range(8)]
        assert all(n <= 1 for n in applied), (where, wid, applied)
        if recorded is None:
            assert sum(applied) == 0 and w["status"] != "acked", (where, w)
            continue
        effects = recorded.decision["effects"]
        n = sum(applied)
        assert applied == [1] * n + [0] * (8 - n) and n <= len(effects), (where, wid, applied)
        if w["status"] == "acked":
            assert n == len(effects), (where, wid, applied, effects)
        else:
            left["decided, no effect" if n == 0 else "effects done, no ack" if n == len(effects)
                 else "some effects done"] += 1
        nonce = effects[0]["value"]["nonce"]
        if n:
            mark = marks[f"mark.{wid}"]
            written = [c["values"]["value"] for c in mark["changes"] if c["table"] == "state_entries"]
            assert (mark["op_id"], written, mark["resulting_version"]) == (f"{wid}:0", [effects[0]["value"]], 1), \
                (where, mark)
            state = read.get("state_entries", key=f"mark.{wid}")
            assert state is not None and (state["version"], state["value"]["nonce"]) == (1, nonce), (where, state)
        task = w["payload"].get("task")
        if task is not None:
            row = read.get("tasks", task_id=task)
            assert row is not None
            assert (row["status"] == "completed") == (n >= 2), (where, row)
            if n >= 2:
                assert row["result"] == {"wake": wid, "nonce": nonce}, (where, row)
        effects_done += n
    assert len(marks) == sum(1 for wid in wakes if by_op[f"{wid}:0"]), where

    # no wake lost, none duplicated: the controller's steps and wakes are what a fresh replay decides
    replay.drain()
    pos = book.controller_position("main")
    position = pos.position if pos else 0
    steps = [e for e in events if e["event_type"] == "controller.step"]
    positions = [int(e["payload"]["position"]) for e in steps]
    assert len(positions) == len(set(positions)), (where, Counter(positions).most_common(3))
    assert positions == sorted(positions) and (pos is None or pos.steps == len(steps)), where
    expected = {p for p in replay.steps if p <= position}
    assert set(positions) == expected, (where, sorted(expected ^ set(positions))[:5])
    for e in steps:
        p = int(e["payload"]["position"])
        assert e["payload"]["decisions"] == replay.steps[p], (where, p, e["payload"]["decisions"], replay.steps[p])
        assert e["payload"]["skipped_keys"] == [], (where, e["payload"])
    keys = [w["idempotency_key"] for w in wakes.values()]
    assert len(keys) == len(set(keys)), where
    ctl_keys = {k for k in keys if k.startswith("ctl:main:")}
    assert ctl_keys == {k for k, p in replay.wake_keys.items() if p <= position}, \
        (where, sorted(ctl_keys ^ {k for k, p in replay.wake_keys.items() if p <= position})[:5])
    hand = [w for w in wakes.values() if w["idempotency_key"].startswith("hand:")]
    assert {w["payload"]["task"] for w in hand} == {t["task_id"] for t in read.rows("tasks")}, where

    if final:
        assert all(w["status"] == "acked" for w in wakes.values()), \
            (where, Counter(w["status"] for w in wakes.values()))
        assert position == max(replay.steps) and replay.position == read.last_seq(), where
        stored = sorted(book.controller_facts("main"), key=lambda f: str(f["id"]))
        assert stored == sorted(replay._facts.values(), key=lambda f: str(f["id"])), where
        assert len(marks) == len(wakes) and all(t["status"] == "completed" for t in read.rows("tasks")), where
    left["claimed, not decided"] = sum(1 for wid, w in wakes.items() if w["status"] == "claimed"
                                       and book.recorded_decision(wid) is None)
    left["events after the controller position"] = int(read.last_seq() > position)
    return {"wakes": len(wakes), "ctl_wakes": len(ctl_keys), "acked": sum(outcomes.values()),
            "effects": effects_done, "steps": len(steps), "events": len(events), **left}


# -- the trials --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("world_no", range(WORLDS))
def test_sigkilled_run_loop_loses_and_repeats_nothing(
        world_no: int, zygote: Zygote, managed_pdp: ManagedPdp, pdp_client: CerbosPdp, tmp_path: Path) -> None:
    rng = random.Random(f"run-loop-crash/{world_no}")
    url = f"sqlite:///{tmp_path / 'world.db'}"
    world = build_world(url, pdp_client, tmp_path, world_no)
    replay = Replay(book_of(world))
    labels: list[str] = []
    try:
        for trial in range(KILLS):
            where = f"world {world_no}, trial {trial} (seed {world_no * KILLS + trial}; logs in {tmp_path})"
            seed_batch(world, rng, trial)
            target = rng.randint(1, max(1, int(0.8 * RECORDS_PER_WAKE * open_wakes(world))))
            log = tmp_path / f"run-{trial}.jsonl"
            zygote.start(run_args(url, managed_pdp, tmp_path, log, "serve", f"{world_no}/{trial}"))

            def reached(log: Path = log, target: int = target, where: str = where) -> bool:
                if zygote.exit_code() is not None:
                    raise AssertionError(f"{where}: the run exited before it was killed:\n"
                                         + zygote.child.describe())
                records = read_lines(log)
                ready = next((i for i, r in enumerate(records) if r.get("ready")), None)
                return ready is not None and sum(1 for r in records[ready:] if "p" in r) >= target
            wait_until(reached, RUN_DEADLINE_S, f"{where}: {target} steps")
            time.sleep(rng.uniform(0, 0.004))
            assert zygote.kill() == -signal.SIGKILL, where
            labels.append(kill_label(read_lines(log)))
            found = check_world(world, replay, final=False, where=f"{where}, killed {labels[-1]}")
            LEFT_OPEN.update({k: v for k, v in found.items() if k not in COUNTS})

        where = f"world {world_no}, final run (logs in {tmp_path})"
        log = tmp_path / "run-final.jsonl"
        zygote.start(run_args(url, managed_pdp, tmp_path, log, "quiet", f"{world_no}/final"))
        code = zygote.wait(RUN_DEADLINE_S + 10)
        summary = read_lines(log)[-1]
        assert code == 0 and summary.get("quiet"), (where, code, summary, zygote.child.describe())
        assert summary["position"] == summary["last_seq"], (where, summary)
        counts = check_world(world, replay, final=True, where=where)
        assert counts["wakes"] == counts["acked"] >= KILLS * BATCH and counts["ctl_wakes"] > 0, counts
        KILL_LABELS.update(labels)
        print(f"world {world_no}: kills {labels}; {counts}")
    finally:
        if zygote.pid is not None:
            zygote.kill()
        replay.close()
        close_world(world)


# -- a runtime bug found on the way (kept reproducible; see the issue-4 report) ---------------------------


def test_a_run_loop_killed_while_registering_its_controller_gets_its_grants_on_restart(
        pworld: World, monkeypatch: pytest.MonkeyPatch) -> None:
    first = InProcessRunner(book_of(pworld), adapters={})

    def killed(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("killed between registering the controller agent and granting it")
    monkeypatch.setattr(pworld, "grant", killed)
    with pytest.raises(SystemExit):
        first.start()
    monkeypatch.undo()
    first.close()
    again = InProcessRunner(book_of(pworld), adapters={})
    again.start()
    try:
        agent = pworld.get_agent(CONTROLLER_AGENT, actor="gov")
        assert set(CONTROLLER_CAPABILITIES) <= set(agent.capability_profile.get("capabilities", []))
    finally:
        again.close()

"""A small end-to-end demo of the shared world (``pmw demo``), every call decided by the Cerbos PDP.

A governor is bootstrapped and grants three agents (planner, worker, reviewer, on three terminals) the
capabilities their part needs; an agent without a capability is denied (and the denial is in the log);
an agent asks what it may do to the task (``allowed_actions``). Then: a task is created, claimed and
handed off; a stale write is refused with a version conflict; a wake delivered ten times exists once and
ends in one receipt; private memory is proposed and promoted by a reviewer while other private memory
stays invisible; an artifact is versioned and read back with its checksum verified. At the end the event
log is folded and compared with the state tables (``fold == state``) and a snapshot is taken.

:func:`run_demo` narrates each step through ``echo`` and returns a :class:`DemoSummary`; every check it
makes is recorded in ``checks`` and ``ok`` is true only if all passed. Ids and times are deterministic
(:func:`demo_sources`), so two runs on fresh databases print the same story.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from engine.errors import InvalidInput, PolicyDenied, VersionConflict
from engine.models.common import Model, canonical_json
from engine.sources import ManualClock, SeededIds
from engine.world.book import RuntimeBook

DEMO_SEED = 2026
DEMO_DB_NAME = "world.db"
TASK_ID = "demo-task"
STATE_KEY = "demo/plan"
WAKE_KEY = "demo-task:claimed"
GOVERNOR = ("governor", "Governor", "term-0")
AGENTS = (("planner", "Planner", "planner", "term-1"), ("worker", "Worker", "worker", "term-2"),
          ("reviewer", "Reviewer", "reviewer", "term-3"))
# What the governor grants each agent: exactly the capabilities its part of the story needs
# (docs/policy-contract.md); every agent gets clearance 1.
GRANTS: dict[str, tuple[str, ...]] = {
    "planner": ("state.write", "task.assign", "task.create", "wake.enqueue"),
    "worker": ("artifact.write", "handoff.create", "memory.write", "state.write", "task.work"),
    "reviewer": ("memory.review", "state.write", "task.work"),
}
CLEARANCE = 1

Echo = Callable[[str], None]


class DemoSummary(Model):
    """What the demo left in the world, and whether every check held."""

    db_url: str
    events: int
    tasks: int
    wakes: int
    receipts: int
    snapshot_id: str
    snapshot_at_seq: int
    fold_equals_state: bool
    checks: dict[str, bool]
    ok: bool


def demo_sources() -> tuple[ManualClock, SeededIds]:
    """The demo's clock (starts 2026-01-01, moves one second per step) and seeded id source."""
    return ManualClock(), SeededIds(DEMO_SEED)


def prepare_demo_db(out: Path) -> str:
    """Create ``out`` if needed and remove a previous demo database there; returns its SQLite URL.

    Only ``world.db`` and its WAL/SHM files are removed (artifact content beside it is content-addressed
    and is simply reused)."""
    out.mkdir(parents=True, exist_ok=True)
    db = out / DEMO_DB_NAME
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)
    return f"sqlite:///{db.resolve()}"


def run_demo(book: RuntimeBook, echo: Echo) -> DemoSummary:
    """Run the scenario on an empty, PDP-decided world (``book.world``; else ``InvalidInput``); narrate through
    ``echo``. The book bootstraps the governor and checks the fold at the end.

    Empty means: nothing in the log but the runtime's record of the policy epoch it activated."""
    events = [e for e in book.store.read.events(0, 1000) if e["event_type"] != "policy.activated"]
    if events:
        raise InvalidInput("--db", f"the demo needs an empty database; this one has {len(events)} events")
    demo = _Demo(book, echo)
    for step in (demo.governance, demo.agents, demo.denied, demo.task_and_state, demo.allowed, demo.stale_write,
                 demo.wakes, demo.memory, demo.artifact, demo.handoff):
        step()
    return demo.finish()


class _Demo:
    """The scenario, one method per step; ``check`` records each expectation."""

    def __init__(self, book: RuntimeBook, echo: Echo) -> None:
        self.book = book
        self.w = book.world
        self.echo = echo
        self.checks: dict[str, bool] = {}
        self.step_no = 0
        self.artifact_id = ""
        self.shared_memory = ""

    def say(self, text: str) -> None:
        self.step_no += 1
        if isinstance(self.w.clock, ManualClock):
            self.w.clock.advance(1)
        self.echo(f"[{self.step_no:2}] {text}")

    def check(self, name: str, ok: bool) -> None:
        self.checks[name] = ok
        if not ok:
            self.echo(f"     CHECK FAILED: {name}")

    def governance(self) -> None:
        gov, name, term = GOVERNOR
        reg = self.book.bootstrap_governor(gov, name, term)
        self.say(f"{gov} bootstrapped as the world's first governor on {term} (role {reg.agent.role_id}); "
                 f"policy epoch {self.epoch()}")

    def epoch(self) -> str:
        current = self.w.current_policy_epoch()
        return current.epoch if current else "-"

    def agents(self) -> None:
        for agent_id, name, role, term in AGENTS:
            reg = self.w.register_agent(agent_id, name, role, term, actor=GOVERNOR[0])  # roles are granted
            session = self.w.activate_session(f"session:{reg.session.session_id}")
            self.say(f"{agent_id} registered on {term}; session {session.session_id} is {session.status}")
            agent = self.w.grant(GOVERNOR[0], agent_id, capabilities=list(GRANTS[agent_id]), clearance=CLEARANCE)
            self.say(f"governor granted {agent_id}: {', '.join(agent.capability_profile['capabilities'])} "
                     f"(clearance {agent.permission_profile['clearance']})")
        self.check("three active agents", len(self.w.list_agents(status="active", actor="planner")) == 3)

    def denied(self) -> None:
        try:
            self.w.create_task("reviewer", "A task nobody asked for", task_id="demo-unwanted")
        except PolicyDenied as exc:
            last = self.w.events(0, 1, newest=True, actor=GOVERNOR[0])
            recorded = bool(last) and last[0].event_type == "policy.denied" and last[0].actor_id == "reviewer"
            self.say(f"reviewer (no task.create) tried to create a task -> {exc.code}: {exc.action} {exc.kind} "
                     f"denied under epoch {exc.policy_epoch}; the denial is event {last[0].seq if last else '-'} "
                     f"({last[0].event_type if last else '-'})")
            self.check("a write without the capability is denied and recorded", recorded)
            return
        self.say("reviewer created a task without the capability")
        self.check("a write without the capability is denied and recorded", False)

    def allowed(self) -> None:
        task, state = self.w.allowed_actions_batch("worker", [("task", TASK_ID), ("state", STATE_KEY)])
        self.say(f"worker asked what it may do (one batch call): task {TASK_ID} allows {', '.join(task.allowed)}, "
                 f"denies {', '.join(task.denied)}; state {STATE_KEY} allows {', '.join(state.allowed)}")
        self.check("the assignee may complete but not abort the task",
                   "complete" in task.allowed and "abort" in task.denied and "write" in state.allowed)

    def task_and_state(self) -> None:
        task = self.w.create_task("planner", "Write the quarterly report", task_id=TASK_ID)
        self.say(f"planner created task {task.task_id} ({task.status})")
        entry = self.w.compare_and_set_state("planner", STATE_KEY, 0, {"phase": "planning", "task": TASK_ID})
        self.say(f"planner set {STATE_KEY} = {canonical_json(entry.value)} (version {entry.version})")
        task = self.w.claim_task("worker", TASK_ID)
        self.say(f"worker claimed {task.task_id}: {task.status}, assignee {task.assignee}")
        entry = self.w.compare_and_set_state("worker", STATE_KEY, entry.version, {"phase": "drafting",
                                                                                  "task": TASK_ID})
        self.say(f"worker set {STATE_KEY} = {canonical_json(entry.value)} (version {entry.version})")
        self.check("task claimed by worker", task.assignee == "worker")

    def stale_write(self) -> None:
        try:
            self.w.compare_and_set_state("reviewer", STATE_KEY, 1, {"phase": "review"})
        except VersionConflict as exc:
            self.say(f"reviewer wrote with stale version 1 -> {exc.code}: expected {exc.expected}, "
                     f"current {exc.current}; nothing was written")
            self.check("stale write refused with a version conflict", exc.current == 2)
            return
        self.say("reviewer's stale write was accepted")
        self.check("stale write refused with a version conflict", False)

    def wakes(self) -> None:
        results = [self.w.enqueue_wake("planner", "worker", "task.claimed", WAKE_KEY, payload={"task": TASK_ID})
                   for _ in range(10)]
        wakes = self.w.list_wakes(target_agent="worker", actor="worker")
        self.say(f"planner enqueued a wake for worker 10 times with key {WAKE_KEY!r} -> "
                 f"{sum(r.created for r in results)} created, {len(wakes)} wake in the queue")
        self.check("ten enqueues, one wake", len(wakes) == 1 and sum(r.created for r in results) == 1)
        wake = self.w.claim_wake("worker", agent_id="worker")
        if wake is None:
            self.check("worker claims the wake", False)
            return
        self.say(f"worker claimed wake {wake.wake_id} (lease until {wake.lease_until_us})")
        receipt = self.w.ack_wake("worker", wake.wake_id, "no_action", reason="already working on it")
        self.say(f"worker acked it: decision {receipt.decision}, outcome {receipt.outcome}, "
                 f"receipt {receipt.receipt_id}")
        self.check("one receipt for the wake", self.w.receipt_for_wake(wake.wake_id, actor="worker") == receipt)

    def memory(self) -> None:
        fact = self.w.store_memory("worker", "The report needs a risk section", "inference")
        note = self.w.store_memory("worker", "My draft numbers are not verified yet", "hypothesis")
        self.say(f"worker stored private memory {fact.memory_id} and {note.memory_id}")
        self.check("private memory invisible to the reviewer",
                   fact.memory_id not in self.w.project_world("reviewer").memory_ids())
        self.w.propose_memory("worker", fact.memory_id)
        promoted = self.w.promote_memory("reviewer", fact.memory_id)
        self.shared_memory = promoted.memory_id
        self.say(f"worker proposed {fact.memory_id}; reviewer promoted it: {promoted.status}")
        planner = self.w.project_world("planner")
        seen = {m.memory_id for m in planner.shared_facts}
        self.say(f"planner's view: shared facts {sorted(seen)}; "
                 f"worker's private note visible: {note.memory_id in planner.memory_ids()}")
        self.check("promoted memory is a shared fact for others", fact.memory_id in seen)
        self.check("private memory invisible to others", note.memory_id not in planner.memory_ids())
        self.check("private memory visible to its owner", note.memory_id in self.w.project_world("worker")
                   .memory_ids())

    def artifact(self) -> None:
        v1, v2 = b"# Quarterly report\n\ndraft 1\n", b"# Quarterly report\n\ndraft 2, with risks\n"
        art = self.w.register_artifact("worker", "report", v1, task_id=TASK_ID)
        art = self.w.new_artifact_version("worker", art.artifact_id, v2)
        self.artifact_id = art.artifact_id
        head = self.w.read_artifact(art.artifact_id, actor="planner")
        first = self.w.read_artifact(art.artifact_id, 1, actor="planner")
        self.say(f"worker registered artifact {art.artifact_id} and committed version {art.version}; "
                 f"read back sha256 {head.artifact.checksum[:12]}... verified")
        self.check("artifact content round-trips with its checksum",
                   head.content == v2 and first.content == v1
                   and hashlib.sha256(head.content).hexdigest() == art.checksum)

    def handoff(self) -> None:
        h = self.w.create_handoff("worker", "reviewer", TASK_ID, "Review the draft report",
                                  artifact_refs=[self.artifact_id], evidence_refs=[self.shared_memory],
                                  expected_output="approve or request changes", return_route="planner")
        self.say(f"worker handed {TASK_ID} to reviewer: handoff {h.handoff_id} ({h.status})")
        h = self.w.accept_handoff("reviewer", h.handoff_id)
        task = self.w.get_task(TASK_ID, actor="planner")
        self.say(f"reviewer accepted: task {task.task_id} is {task.status} by {task.assignee}")
        h = self.w.complete_handoff("reviewer", h.handoff_id, {"verdict": "approved"})
        task = self.w.complete_task("reviewer", TASK_ID, {"verdict": "approved"})
        self.say(f"reviewer completed the handoff ({h.status}) and the task ({task.status})")
        self.check("task moved to the reviewer and completed",
                   task.assignee == "reviewer" and task.status == "completed")

    def finish(self) -> DemoSummary:
        folded = self.book.rebuild_state(from_snapshot=False) == self.book.state_image()
        self.check("fold(events) == state", folded)
        snap = self.book.take_snapshot("planner")
        self.check("snapshot + tail == state",
                   self.book.rebuild_state(from_snapshot=True) == self.book.state_image())
        self.say(f"snapshot {snap.snapshot_id} taken at event {snap.at_seq}")
        read = self.book.store.read
        summary = DemoSummary(
            db_url=_masked(self.book.store.url), events=read.count("events"), tasks=read.count("tasks"),
            wakes=read.count("wakes"), receipts=read.count("receipts"), snapshot_id=snap.snapshot_id,
            snapshot_at_seq=snap.at_seq, fold_equals_state=folded, checks=self.checks,
            ok=all(self.checks.values()))
        self.echo(f"summary: {summary.events} events, {summary.tasks} tasks, {summary.wakes} wakes, "
                  f"{summary.receipts} receipts")
        self.echo(f"fold == state: {folded}")
        self.echo(f"checks: {sum(self.checks.values())}/{len(self.checks)} passed")
        return summary


def _masked(url: str) -> str:
    """``url`` with any password replaced by ``***``."""
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


__all__ = ["DEMO_SEED", "GRANTS", "DemoSummary", "demo_sources", "prepare_demo_db", "run_demo"]

"""Run a scenario on the real runtime: a real store, the real PDP, the controller and a worker.

:func:`simulate` opens a :class:`~engine.runtime.Runtime` (its own Cerbos PDP, or the one the settings
name) on a fresh world (a SQLite file in the output folder by default, or ``db_url``) with a
:class:`~engine.sources.ManualClock` starting at the scenario's clock and :class:`~engine.sources.SeededIds`
from its seed, so the same file and seed give the same event log. :func:`run_scenario` does the work on a
world it is given:

1. **setup** at virtual time 0: the governor is bootstrapped; each agent is registered, activated and
   granted its capabilities and clearance; tasks are created (by their owner) and claimed (by their
   assignee); state, rooms, subscriptions and topology edges are written; every call is decided by the PDP;
2. **timeline**: entries are applied in time order (a repeated wake is expanded first, its jitter drawn
   from the seed). Between two entries an :class:`~engine.runloop.InProcessRunner` runs the world until it
   is quiet: the controller observes each new event and commits its steps (wakes, suppressions, rooms,
   topology), the worker runs each due wake through the agent's behaviour; the clock jumps to the next
   due wake or lease end while that is before the next entry;
3. **stop** at ``stop.at_s`` (or earlier, with ``all_tasks_done``, once every declared task is done and no
   wake is queued), or when ``stop.max_rounds`` rounds have run. If the registry holds artifacts, the
   governor then reads every version of each back through it (``World.read_artifact`` verifies the
   checksum) and records what it read as one ``sim.artifacts_read`` event.

Every fault is recorded in the log as a ``sim.fault`` event (``subject_kind`` ``simulation``) written by the
governor before it is injected, and its observed result as ``sim.fault_result`` afterwards, so the metrics
are computed from the store alone.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.controller.errors import RuleFileError
from engine.errors import ArtifactCorrupted, InvalidInput, PolicyRejected, PolicyUnavailable, VersionConflict
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.policy.pdp_process import ManagedPdp
from engine.protocol.adapters import AgentAdapter, AgentDecision
from engine.runloop import InProcessRunner, RunStats
from engine.runloop.worker import CheckingAdapter, WakeCheck
from engine.runtime import Runtime
from engine.settings import Settings, load_settings, sqlite_file
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView
from simulations.behaviours import TaskPlan, build_behaviour
from simulations.plugins import AdapterSource, is_plugin_path, kind_of, load_plugin, new_conversation
from simulations.rules import prepare_rules
from simulations.scenario import (
    BEHAVIOURS,
    ClaimEntry,
    ConversationReplacement,
    DuplicateDelivery,
    Entry,
    EventEntry,
    GrantEntry,
    ModelReplacement,
    OpenRoomEntry,
    PdpOutage,
    PolicyChange,
    ResolveEntry,
    RuleChange,
    Scenario,
    StaleWrite,
    StateWriteEntry,
    WakeEntry,
    WorkerCrash,
)

WORKER_ID = "sim-worker"
WORLD_ID = "main"
GOVERNOR_CAPABILITIES = ("state.write", "task.create", "task.assign", "wake.enqueue", "room.open", "topology.write",
                         "memory.review")
Progress = Callable[[float], None]


@dataclass(frozen=True)
class Planned:
    """One timeline entry at one virtual time (a repeated wake becomes several)."""

    at_us: int
    index: int
    repeat: int
    entry: Entry | None  # None: the end of a PDP outage


@dataclass
class Hooks:
    """What some faults need from the runtime: the managed PDP (an outage stops and restarts it) and the
    policy reload (a policy change)."""

    managed_pdp: ManagedPdp | None = None
    reload_policies: Callable[[Path], object] | None = None


@dataclass
class SimulationRun:
    """A finished run: the scenario, the world it ran on (still open), the virtual start and stop."""

    scenario: Scenario
    world: World
    start_us: int
    stop_us: int
    totals: RunStats = field(default_factory=RunStats)


def expand_timeline(s: Scenario, start_us: int) -> list[Planned]:
    """The timeline as dated entries, in order; repeated wakes and events are expanded with jitter from the
    seed."""
    rng = random.Random(s.seed)
    stop_us = start_us + _us(s.stop.at_s)
    planned: list[Planned] = []
    for index, entry in enumerate(s.timeline):
        repeated = entry if isinstance(entry, WakeEntry | EventEntry) else None
        repeats = repeated.count if repeated is not None and repeated.every_s else 1
        for n in range(repeats):
            offset = n * (repeated.every_s or 0.0) if repeated is not None else 0.0
            jitter = rng.uniform(0, repeated.jitter_s) if repeated is not None and repeated.jitter_s else 0.0
            planned.append(Planned(min(stop_us, start_us + _us(entry.at + offset + jitter)), index, n, entry))
        if isinstance(entry, PdpOutage):
            planned.append(Planned(start_us + _us(entry.at + entry.duration_s), index, 1, None))
    return sorted(planned, key=lambda p: (p.at_us, p.index, p.repeat))


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


class Thinking:
    """An agent that takes ``seconds`` of virtual time to decide: the clock moves between what it observed
    and what it commits, as it does for a real model."""

    def __init__(self, inner: AgentAdapter, clock: ManualClock, seconds: float) -> None:
        self.inner = inner
        self.clock = clock
        self.seconds = seconds

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        if self.seconds:
            self.clock.advance(self.seconds)
        return self.inner.run(agent_state, world_view, event)


class ThinkingChecker(Thinking):
    """A :class:`Thinking` agent whose inner adapter has the layered wake's lightweight check: the check is
    cheap (no virtual time passes) and answered by the inner adapter."""

    def check(self, agent_state: Agent, event: Wake) -> WakeCheck | bool:
        inner = self.inner
        assert isinstance(inner, CheckingAdapter)  # only built around one
        return inner.check(agent_state, event)


#: read plans an agent's cycle asks for: the projection's six kinds, and room for the lists of other calls
PLANS_PER_AGENT = 8


def _fit_plan_memo(book: RuntimeBook, principals: int) -> None:
    """Let the policy's plan memo (``engine.policy.plan_memo``, an exact-key LRU) hold every principal's read
    plans at once: the timeline wakes every agent in turn, so a memo smaller than agents x kinds forgets
    each plan just before it is asked again (4,096 entries against 1,000 agents x 6 kinds: every plan a
    miss, one PDP PlanResources round trip per projection). Only its size changes; what it remembers, and
    under which key, does not."""
    memo = getattr(book.policy, "plan_memo", None)
    if memo is not None and isinstance(getattr(memo, "capacity", None), int):
        memo.capacity = max(memo.capacity, PLANS_PER_AGENT * principals)


class ScenarioDriver:
    """Sets up a scenario's world and plays its timeline on it through an in-process runner."""

    def __init__(self, scenario: Scenario, book: RuntimeBook, hooks: Hooks | None = None, *, work_dir: Path,
                 progress: Progress | None = None, behaviours: Mapping[str, AdapterSource] | None = None) -> None:
        world = book.world
        if not isinstance(world.clock, ManualClock):
            raise TypeError("a simulation needs the world's clock to be a ManualClock")
        self.s = scenario
        self.book = book
        self.world = world
        self.clock: ManualClock = world.clock
        self.hooks = hooks or Hooks()
        self.progress = progress
        self.gov = scenario.governor
        _fit_plan_memo(book, len(scenario.agents) + 1)
        self.plan = TaskPlan({t.id: t.steps for t in scenario.world.tasks})
        self.sources = resolve_behaviours(scenario, behaviours)
        adapters = {a.id: self._adapter(a.id) for a in scenario.agents}
        self.work_dir = work_dir
        rule_dir = prepare_rules(scenario.resolve_path(scenario.rules.dir), scenario.rules.constants,
                                 work_dir / "rules")
        self.runner = InProcessRunner(book, adapters=adapters, rule_dir=rule_dir, governor=self.gov,
                                      worker_id=WORKER_ID, world_id=WORLD_ID)
        self.start_us = self.clock.now_us()
        self.stop_us = self.start_us + _us(scenario.stop.at_s)
        self.totals = RunStats()
        self._faults = 0
        self._outage = False
        self._deferred: list[Planned] = []

    def _adapter(self, agent_id: str, *, behaviour: str | None = None, model: str | None = None
                 ) -> AgentAdapter:
        """A new conversation of the agent: its own behaviour (from Python, or ``MODULE:ATTR``) or the
        library's; ``behaviour`` (a model replacement's) is used for this conversation instead (a later
        conversation replacement returns to the agent's own, as with library behaviours)."""
        name = behaviour or str(self.s.agent(agent_id).behaviour)
        source = self.sources.get(agent_id) if behaviour is None else None
        if source is None and is_plugin_path(name):
            source = load_plugin(name, field="timeline.behaviour")
        if source is not None:
            index = next(i for i, a in enumerate(self.s.agents) if a.id == agent_id)
            inner = new_conversation(source, name, field=f"agents.{index}.behaviour")
        else:
            inner = build_behaviour(self.s.agent(agent_id), self.plan, behaviour=behaviour, model=model)
        wrapper = ThinkingChecker if isinstance(inner, CheckingAdapter) else Thinking
        return wrapper(inner, self.clock, self.s.clock.think_s)

    # -- setup ----------------------------------------------------------------------------------------

    def setup(self) -> None:
        w, gov = self.world, self.gov
        self.book.bootstrap_governor(gov, "Governor", f"term-{gov}")
        w.activate_session(f"term:term-{gov}")
        w.grant(gov, gov, capabilities=list(GOVERNOR_CAPABILITIES))
        for a in self.s.agents:
            w.register_agent(a.id, a.id, a.role, f"term-{a.id}", actor=gov)  # a role is the governor's to give
            w.activate_session(f"term:term-{a.id}")
            w.grant(gov, a.id, capabilities=a.capabilities, clearance=a.authority.clearance)
        for t in self.s.world.tasks:
            w.create_task(t.owner, t.goal, task_id=t.id)
            if t.assignee is not None:
                w.claim_task(t.assignee, t.id)
        for key, value in sorted(self.s.world.state.items()):
            w.compare_and_set_state(gov, key, 0, value)
        for r in self.s.world.rooms:
            w.create_room(r.opener, r.goal, members=[m for m in r.members if m != r.opener], room_id=r.id)
        for m in self.s.world.memories:
            w.store_memory(m.owner, m.content, m.epistemic_type, scope=m.scope, room_id=m.room,
                           permission_scope={"sensitivity": m.sensitivity} if m.sensitivity else None)
        for sub in self.s.world.subscriptions:
            w.subscribe(gov, sub.subject, agent_id=sub.agent)
        for e in self.s.world.edges:
            w.set_topology_edge(gov, e.src, e.dst, e.edge_type)
        self.runner.start()

    # -- the timeline ---------------------------------------------------------------------------------

    def run(self) -> SimulationRun:
        """Set up, play the timeline, stop; returns the run (the world stays open)."""
        self.setup()
        return self.play()

    def play(self) -> SimulationRun:
        """Play the timeline on a world :meth:`setup` prepared, until the stop."""
        planned = expand_timeline(self.s, self.start_us)
        i = 0
        while self.totals.rounds < self.s.stop.max_rounds:
            while i < len(planned) and planned[i].at_us <= self.clock.now_us():
                try:
                    self._apply(planned[i])
                except PolicyUnavailable:
                    if not self._outage:
                        raise
                    self._deferred.append(planned[i])  # refused (fail closed): retried once the PDP is back
                i += 1
            horizon = planned[i].at_us if i < len(planned) else self.stop_us
            self._run_until_quiet(horizon)
            self._report_progress()
            if self._done(i == len(planned)):
                break
            now = self.clock.now_us()
            self.clock.advance(max(0, horizon - now) / 1_000_000)
        if not self._outage:
            self.read_back_artifacts()
        if self.progress is not None:
            self.progress(1.0)
        return SimulationRun(self.s, self.world, self.start_us, self.clock.now_us(), self.totals)

    def read_back_artifacts(self) -> None:
        """Read every version of every registered artifact back through the registry as the governor
        (``World.read_artifact`` verifies each against its registered checksum) and record the result, one
        ``sim.artifacts_read`` event, so that "nothing lost" is in the log. Nothing is written when the
        registry is empty."""
        ids = [str(r["artifact_id"]) for r in self.book.store.read.rows("artifacts", order_by=("artifact_id",))]
        if not ids:
            return
        read: list[dict[str, Any]] = []
        heads: dict[str, int] = {}
        for aid in ids:
            heads[aid] = self.world.get_artifact(aid, actor=self.gov).version
            for ver in self.world.artifact_versions(aid, actor=self.gov):
                entry: dict[str, Any] = {"artifact": aid, "version": ver.version, "checksum": ver.checksum,
                                         "created_by": ver.created_by}
                try:
                    content = self.world.read_artifact(aid, ver.version, actor=self.gov)
                except ArtifactCorrupted as exc:
                    read.append({**entry, "ok": False, "reason": exc.message[:200]})
                    continue
                read.append({**entry, "ok": content.artifact.checksum == ver.checksum, "size": len(content.content)})
        self.world.append_event(self.gov, "sim.artifacts_read", {"heads": heads, "versions": read},
                                subject_kind="simulation", subject_id="artifacts")

    def _run_until_quiet(self, horizon_us: int) -> None:
        budget = self.s.stop.max_rounds - self.totals.rounds
        stats = self.runner.run_until_quiet(max_rounds=max(1, budget), advance_clock=True, horizon_us=horizon_us)
        self.totals.add(stats)

    def _done(self, timeline_over: bool) -> bool:
        if self.clock.now_us() >= self.stop_us:
            return True
        if not (self.s.stop.all_tasks_done and timeline_over):
            return False
        tasks = self.book.store.read.rows("tasks", {"task_id": [t.id for t in self.s.world.tasks]})
        queued = self.book.store.read.rows("wakes", {"status": ["pending", "claimed"]}, limit=1)
        return all(t["status"] in ("completed", "failed", "aborted") for t in tasks) and not queued

    def _report_progress(self) -> None:
        if self.progress is not None:
            span = max(1, self.stop_us - self.start_us)
            self.progress(min(1.0, (self.clock.now_us() - self.start_us) / span))

    # -- entries --------------------------------------------------------------------------------------

    def _apply(self, p: Planned) -> None:
        e = p.entry
        if e is None:
            self._end_outage(p.index)
            return
        if isinstance(e, WakeEntry):
            self._wake(e, p)
        elif isinstance(e, EventEntry):
            self.world.append_event(e.agent, e.type, dict(e.payload), subject_kind=e.subject_kind,
                                    subject_id=e.subject)
        elif isinstance(e, ClaimEntry):
            self.world.append_event(e.agent, "claim.asserted", {"term": e.term, "claim": f"{e.agent}:{e.term}",
                                                                "value": e.value}, subject_id=e.term)
        elif isinstance(e, ResolveEntry):
            self.world.append_event(e.agent, "conflict.resolved", {"term": e.term, "decision": e.value},
                                    subject_kind="room", subject_id=f"conflict-{e.term}")
        elif isinstance(e, OpenRoomEntry):
            opener = e.opener or self.gov
            self.world.create_room(opener, e.goal, members=[m for m in e.members if m != opener], room_id=e.room)
            if opener not in e.members:
                self.world.leave_room(opener, e.room)  # it convenes; it does not answer
        elif isinstance(e, StateWriteEntry):
            current = self.book.store.read.get("state_entries", key=e.key)
            self.world.compare_and_set_state(e.agent, e.key, int(current["version"]) if current else 0, e.value)
        elif isinstance(e, GrantEntry):
            self.world.grant(self.gov, e.agent, capabilities=e.capabilities)
        else:
            self._fault(e, p)

    def _wake(self, e: WakeEntry, p: Planned) -> None:
        key = e.key or f"sim:{p.index}:{p.repeat}"
        if e.key is not None and e.every_s is not None:
            key = f"{e.key}:{p.repeat}"
        payload: dict[str, Any] = {"task": e.task} if e.task else {}
        for _ in range(e.deliveries):
            self.world.enqueue_wake(self.gov, e.target, e.cause, key, payload=payload)

    def _record(self, kind: str, index: int, **payload: Any) -> None:
        self._faults += 1
        self.world.append_event(self.gov, "sim.fault", {"kind": kind, "entry": index, **payload},
                                subject_kind="simulation", subject_id=f"fault-{index}")

    def _result(self, kind: str, index: int, result: str, **payload: Any) -> None:
        self.world.append_event(self.gov, "sim.fault_result", {"kind": kind, "entry": index, "result": result,
                                                               **payload},
                                subject_kind="simulation", subject_id=f"fault-{index}")

    def _fault(self, e: Entry, p: Planned) -> None:
        i = p.index
        if isinstance(e, WorkerCrash):
            self._record("worker_crash", i)
            self.runner.crash_worker_mid_cycle()
        elif isinstance(e, DuplicateDelivery):
            self._record("duplicate_delivery", i, target=e.target, key=e.key, deliveries=e.deliveries)
            payload: dict[str, Any] = {"task": e.task} if e.task else {}
            created = sum(self.world.enqueue_wake(self.gov, e.target, "duplicate_delivery", e.key,
                                                  payload=payload).created for _ in range(e.deliveries))
            self._result("duplicate_delivery", i, "delivered", key=e.key, created=created)
        elif isinstance(e, StaleWrite):
            self._stale_write(e, i)
        elif isinstance(e, PdpOutage):
            self._start_outage(e, i)
        elif isinstance(e, PolicyChange):
            self._policy_change(e, i)
        elif isinstance(e, RuleChange):
            self._rule_change(e, i)
        elif isinstance(e, ModelReplacement):
            self._record("model_replacement", i, agent=e.agent, model=e.model, behaviour=e.behaviour)
            self.runner.adapters[e.agent] = self._adapter(e.agent, behaviour=e.behaviour, model=e.model)
        elif isinstance(e, ConversationReplacement):
            self._record("conversation_replacement", i, agent=e.agent)
            self.runner.adapters[e.agent] = self._adapter(e.agent)

    def _stale_write(self, e: StaleWrite, i: int) -> None:
        current = self.book.store.read.get("state_entries", key=e.key)
        version = int(current["version"]) if current else 0
        expected = version - e.behind if version >= e.behind else version + e.behind
        self._record("stale_write", i, agent=e.agent, key=e.key, expected=expected, current=version)
        try:
            self.world.compare_and_set_state(e.agent, e.key, expected, {"stale": True, "from": e.agent})
        except VersionConflict as exc:
            self._result("stale_write", i, "version_conflict", key=e.key, current=exc.current)
            return
        self._result("stale_write", i, "overwrote", key=e.key)

    def _start_outage(self, e: PdpOutage, i: int) -> None:
        if self.hooks.managed_pdp is None:
            raise PolicyUnavailable("a pdp_outage needs the runtime's own PDP (not an external PDP address)")
        self._record("pdp_outage", i, duration_s=e.duration_s)
        self.hooks.managed_pdp.stop(keep_files=True)
        self._outage = True

    def _end_outage(self, i: int) -> None:
        """Restart the PDP, record the result, then apply the entries the outage refused (the scenario's
        own calls fail closed like everyone's, and are retried once, in order)."""
        assert self.hooks.managed_pdp is not None
        self.hooks.managed_pdp.start()
        self._outage = False
        deferred, self._deferred = self._deferred, []
        self._result("pdp_outage", i, "restored", refused_so_far=self.totals.unavailable,
                     deferred_entries=len(deferred))
        for p in deferred:
            self._apply(p)

    def _policy_change(self, e: PolicyChange, i: int) -> None:
        if self.hooks.reload_policies is None:
            raise PolicyUnavailable("a policy_change needs a runtime that can reload its PDP's policies")
        self._record("policy_change", i, policy_dir=e.policy_dir, overlay=e.overlay)
        source = self.s.resolve_path(e.policy_dir)
        if e.overlay is not None:  # a copy of the policy set with the overlay's files laid over it
            target = self.work_dir / f"policies-{i}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target)
            shutil.copytree(self.s.resolve_path(e.overlay), target, dirs_exist_ok=True)
            source = target
        try:
            self.hooks.reload_policies(source)
        except PolicyRejected as exc:
            self._result("policy_change", i, "rejected", reason=exc.reason[:500])
            return
        epoch = self.world.current_policy_epoch()
        self._result("policy_change", i, "activated", epoch=epoch.epoch if epoch else None)

    def _rule_change(self, e: RuleChange, i: int) -> None:
        self._record("rule_change", i, rule_dir=e.rule_dir)
        try:
            self.runner.reload_rules(prepare_rules(self.s.resolve_path(e.rule_dir), self.s.rules.constants,
                                                   self.work_dir / f"rules-{i}", strict=False))
        except RuleFileError as exc:
            self._result("rule_change", i, "rejected", reason=exc.message[:500])
            return
        self._result("rule_change", i, "reloaded")


def resolve_behaviours(scenario: Scenario, behaviours: Mapping[str, AdapterSource] | None = None
                       ) -> dict[str, AdapterSource]:
    """Each agent's own behaviour, by agent id: ``behaviours`` given from Python (for agents the scenario
    declares: ``InvalidInput`` otherwise), else a ``MODULE:ATTR`` behaviour loaded (and each kind checked)
    now, before anything is written. Agents on a library behaviour are absent.
    Raises ``BehaviourUnavailable`` or ``BehaviourInvalid`` (:mod:`simulations.plugins`)."""
    declared = {a.id: i for i, a in enumerate(scenario.agents)}
    given = dict(behaviours or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InvalidInput("behaviours", f"names agents the scenario does not declare: {', '.join(unknown)}")
    found: dict[str, AdapterSource] = {}
    for agent in scenario.agents:
        field_name = f"agents.{declared[agent.id]}.behaviour"
        if agent.id in given:
            kind_name = f"behaviours[{agent.id!r}]"
            kind_of(given[agent.id], kind_name, field_name)
            found[agent.id] = given[agent.id]
        elif agent.behaviour not in BEHAVIOURS:
            found[agent.id] = load_plugin(str(agent.behaviour), field=field_name)
    for entry in scenario.timeline:
        named = getattr(entry, "behaviour", None)
        if isinstance(named, str) and named not in BEHAVIOURS:
            load_plugin(named, field="timeline.behaviour")  # a replacement's behaviour fails now, not mid-run
    return found


def run_scenario(scenario: Scenario, book: RuntimeBook, *, work_dir: Path, hooks: Hooks | None = None,
                 progress: Progress | None = None, behaviours: Mapping[str, AdapterSource] | None = None
                 ) -> SimulationRun:
    """Run ``scenario`` on ``book.world`` (empty but for the runtime's policy epoch; its clock a ManualClock at
    the scenario's start). Rule files, with the scenario's constants applied, are written under ``work_dir``.
    ``behaviours`` gives agents their own behaviour by agent id (:mod:`simulations.plugins`)."""
    driver = ScenarioDriver(scenario, book, hooks, work_dir=work_dir, progress=progress, behaviours=behaviours)
    try:
        return driver.run()
    finally:
        driver.runner.close()


def fresh_sqlite_url(out: Path) -> str:
    """A new SQLite world in ``out`` (a previous ``world.db`` and its WAL/SHM files are removed)."""
    out.mkdir(parents=True, exist_ok=True)
    db = out / "world.db"
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)
    return f"sqlite:///{db.resolve()}"


def open_runtime(scenario: Scenario, out: Path, *, db_url: str | None = None,
                 settings: Settings | None = None) -> Runtime:
    """A runtime for ``scenario``: its clock at the scenario's start, ids from its seed, a fresh SQLite
    world in ``out`` unless ``db_url`` names another (which must be empty: ``InvalidInput`` otherwise)."""
    url = db_url or fresh_sqlite_url(out)
    base = settings or load_settings()
    data_dir = {"policy_deploy_root": out / "policy-deploys"} if sqlite_file(url) is None else {}
    chosen = base.model_copy(update={"db_url": url, "artifact_dir": out / "artifacts", **data_dir})
    # the scenario owns its PDP's faults (a pdp_outage stops it for a span of simulated time): no supervisor
    runtime = Runtime.open(chosen, clock=ManualClock(scenario.clock.start_us()), ids=SeededIds(scenario.seed),
                           supervise=False)
    events = [e for e in runtime.store.read.events(0, 10) if e["event_type"] != "policy.activated"]
    if events:
        runtime.close()
        raise InvalidInput("--db", f"a simulation needs an empty world; this one has {len(events)}+ events")
    return runtime


def simulate(scenario: Scenario, out: Path, *, db_url: str | None = None, settings: Settings | None = None,
             progress: Progress | None = None, behaviours: Mapping[str, AdapterSource] | None = None
             ) -> tuple[SimulationRun, Runtime]:
    """Open a runtime for ``scenario`` and run it; the caller closes the returned runtime (after
    reading the metrics). A failure closes it and re-raises. Agents' own behaviours (``behaviours`` by
    agent id, and ``MODULE:ATTR`` ones) are resolved before the runtime opens: a bad one opens nothing."""
    resolve_behaviours(scenario, behaviours)
    runtime = open_runtime(scenario, out, db_url=db_url, settings=settings)
    try:
        hooks = Hooks(managed_pdp=runtime.managed, reload_policies=runtime.reload_policies)
        run = run_scenario(scenario, runtime.book, work_dir=out / "work", hooks=hooks, progress=progress,
                           behaviours=behaviours)
    except BaseException:
        runtime.close()
        raise
    return run, runtime


__all__ = ["Hooks", "Planned", "ScenarioDriver", "SimulationRun", "expand_timeline", "fresh_sqlite_url",
           "open_runtime", "resolve_behaviours", "run_scenario", "simulate"]


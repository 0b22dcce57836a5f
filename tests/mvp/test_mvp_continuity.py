"""MVP tests 1, 2, 12 and 13 (seed 000 §103-117) end to end: workers, the controller on ``rules/`` and the
real PDP. Work continues from the world across conversations, handoffs, model swaps and restarts; never
from a transcript."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ArtifactCorrupted
from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import PdpAuthorizer
from engine.protocol.adapters import (
    AcceptHandoff,
    AgentDecision,
    CallableAdapter,
    CompleteHandoff,
    CompleteTask,
    Handoff,
    RuleAgent,
    SetState,
    StoreMemory,
)
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView
from store import Store
from tests.conftest import add_agent, book_of, close_world, kept
from tests.mvp.support import (
    GOV,
    act,
    assert_every_wake_has_one_receipt,
    clock,
    events_of,
    runner_for,
    wakes_of,
)

SECTIONS = ["intro", "figures", "summary"]


def nudge(world: World, task_id: str, note: str) -> None:
    """The governor comments on a task (a World call); the controller wakes the task's owner."""
    clock(world).advance(5)  # past the storm rules' per-agent cooldown
    world.append_event(GOV, "task.commented", {"note": note}, subject_kind="task", subject_id=task_id)


def my_task(view: WorldView, agent: str) -> Any:
    return next((t for t in view.tasks if t.assignee == agent and t.status.value == "claimed"), None)


def progress(view: WorldView, key: str) -> tuple[int, list[str]]:
    entry = next((s for s in view.state if s.key == key), None)
    return (entry.version, list(entry.value["done"])) if entry else (0, [])


# -- MVP 1 ------------------------------------------------------------------------------------------------

class Conversation:
    """One conversation's agent: a fresh object (no memory carried over) that decides from the world."""

    def __init__(self, name: str, sections_per_wake: int) -> None:
        self.name = name
        self.per_wake = sections_per_wake
        self.seen: list[tuple[str, list[str]]] = []  # what this conversation found in the world
        self.adapter = RuleAgent([self.rule])

    def rule(self, agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        task = my_task(view, agent.agent_id)
        if task is None:
            return None
        key = f"report:{task.task_id}"
        version, done = progress(view, key)
        self.seen.append((wake.wake_id, done))
        todo = [s for s in SECTIONS if s not in done][: self.per_wake]
        effects: list[Any] = [SetState(key=key, expected_version=version,
                                       value={"done": done + todo, "by": self.name})]
        if not done:
            effects.append(StoreMemory(content="the figures come from the Q3 sheet", epistemic_type="observation"))
        if len(done) + len(todo) == len(SECTIONS):
            source = next(m.content for m in view.working_memory if m.owner == agent.agent_id)
            effects.append(CompleteTask(task_id=task.task_id, result={"sections": SECTIONS, "source": source}))
        return act(*effects)


def test_mvp01_a_task_resumes_in_a_new_conversation_from_the_world(pworld: World) -> None:
    """MVP test 1 (cross-conversation resume): Alice starts a task in one conversation (session on terminal
    t-alice), which then ends (the session is detached: Alice is offline; nothing durable is lost). A new
    conversation (a new session on another terminal, a new agent object with no memory of the first)
    resumes the same task from the world: the task ledger, the state the first wrote and Alice's private
    memory. Nothing is redone and no transcript is passed."""
    add_agent(pworld, "alice", ["state.write", "task.create", "task.work", "memory.write"])
    task = pworld.create_task("alice", "write the quarterly report", constraints={"sections": SECTIONS})
    pworld.claim_task("alice", task.task_id)
    first = Conversation("conversation-1", sections_per_wake=1)
    runner = runner_for(pworld, {"alice": first.adapter})
    nudge(pworld, task.task_id, "please start")
    runner.run_until_quiet(max_rounds=20)
    assert first.seen[0][1] == []
    (old,) = pworld.resolve_target("alice", actor="alice")
    pworld.detach_session(f"session:{old.session_id}")  # the conversation ends
    assert pworld.get_agent("alice", actor=GOV).status.value == "offline"

    reg = pworld.register_agent("alice", "Alice", "worker", "t-alice-2")  # a new conversation, same identity
    pworld.activate_session(f"session:{reg.session.session_id}")
    second = Conversation("conversation-2", sections_per_wake=2)
    runner.adapters["alice"] = second.adapter
    nudge(pworld, task.task_id, "please finish")
    runner.run_until_quiet(max_rounds=20)

    assert [done for _, done in second.seen] == [["intro"]]        # resumed where the first stopped
    entry = pworld.get_state(f"report:{task.task_id}", actor=GOV)
    assert (entry.version, entry.value) == (2, {"done": SECTIONS, "by": "conversation-2"})
    done = pworld.get_task(task.task_id, actor=GOV)
    assert (done.status.value, done.assignee) == ("completed", "alice")
    assert done.result == {"sections": SECTIONS, "source": "the figures come from the Q3 sheet"}
    sessions = {s.session_id: s.status.value for s in pworld.resolve_target("alice", actor="alice")}
    assert sessions == {old.session_id: "offline", reg.session.session_id: "active"}
    assert reg.agent.capability_profile == {"capabilities": ["memory.write", "state.write", "task.create",
                                                             "task.work"]}
    wakes = wakes_of(pworld, "alice")
    assert len(wakes) == 2 and {w.cause for w in wakes} <= {"task_owner", "subscriber"}  # owner and assignee
    assert all(set(w.payload) <= {"depth", "chain", "origin_us", "rule"} for w in wakes)  # no transcript
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert [receipts[w.wake_id].outcome for w in wakes] == [Outcome.ACTED, Outcome.ACTED]
    assert [pworld.get_trace(w.wake_id, actor=GOV).agent_id for w in wakes] == ["alice", "alice"]
    runner.close()


def test_mvp01_a_wake_for_an_agent_between_conversations_waits_and_blocks_nobody(pworld: World) -> None:
    """MVP test 1, the pause between conversations (P7: sleep is not terminal): a wake that falls due while
    the agent has no live session must not stop the run loop; other agents' wakes run, and the waiting
    wake runs (or ends in one receipt) once the agent is back in a new session."""
    add_agent(pworld, "alice", ["state.write"])
    add_agent(pworld, "bob", ["state.write"])
    pworld.detach_session("term:t-alice")
    runner = runner_for(pworld, {"alice": RuleAgent([]), "bob": RuleAgent([])})
    pworld.enqueue_wake(GOV, "alice", "resume", "resume-alice", priority=1)  # first in the claim order
    for n in range(3):
        pworld.enqueue_wake(GOV, "bob", "work", f"work-bob-{n}")
    runner.run_until_quiet(max_rounds=10)                  # raises PolicyDenied today
    assert [pworld.get_wake(w.wake_id, actor=GOV).status.value for w in wakes_of(pworld, "bob")] == ["acked"] * 3
    assert pworld.get_wake(wakes_of(pworld, "alice")[0].wake_id, actor=GOV).status.value == "pending"
    reg = pworld.register_agent("alice", "Alice", "worker", "t-alice-2")
    pworld.activate_session(f"session:{reg.session.session_id}")
    runner.run_until_quiet(max_rounds=10)
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 2 ------------------------------------------------------------------------------------------------

class OnlyAgentViewWake:
    """Wraps an adapter and records exactly what it is given."""

    def __init__(self, inner: RuleAgent) -> None:
        self.inner = inner
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def run(self, *args: Any, **kwargs: Any) -> AgentDecision:
        self.calls.append((args, kwargs))
        return self.inner.run(*args, **kwargs)


def finish_from_packet(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
    """The target's whole method: the handoff packet and the world it points at."""
    h = next((h for h in view.handoffs if h.status.value == "pending" and h.target_agent == agent.agent_id), None)
    if h is None:
        return None
    key = (h.current_state_ref or "").removeprefix("state:")
    entry = next(s for s in view.state if s.key == key)
    final = {**entry.value, "status": "final", "reviewed_by": agent.agent_id}
    result = {"output": h.expected_output, "state": f"state:{key}@{entry.version + 1}",
              "artifacts": h.artifact_refs, "max_words": h.constraints["max_words"]}
    return act(AcceptHandoff(handoff_id=h.handoff_id),
               SetState(key=key, expected_version=entry.version, value=final),
               CompleteTask(task_id=h.task_id, result=result),
               CompleteHandoff(handoff_id=h.handoff_id, result={"route": h.return_route, **result}))


def test_mvp02_a_handoff_is_finished_from_the_packet_and_the_world_alone(pworld: World) -> None:
    """MVP test 2 (handoff without transcript): the source hands a half-done task to the target with a packet
    (goal, current state ref, evidence and artifact refs, constraints, authority scope, expected output,
    return route). The controller wakes the target (``handoff_target``); the target's adapter is given only
    (agent, view, wake), never the source's transcript or private memory, and finishes the task from the
    packet and the world. The task's completion wakes the source (its owner: the return route)."""
    add_agent(pworld, "src", ["task.create", "task.work", "state.write", "handoff.create", "memory.write",
                              "artifact.write"])
    add_agent(pworld, "dst", ["task.work", "state.write"])
    task = pworld.create_task("src", "publish the incident summary")
    pworld.claim_task("src", task.task_id)
    draft = pworld.compare_and_set_state("src", "incident-summary", 0,
                                         {"text": "outage 10:02-10:40", "status": "draft"})
    transcript = pworld.store_memory("src", "chat: user said ... I tried ... then I ...", "observation")
    art = pworld.register_artifact("src", "log", b"10:02 db failover\n10:40 recovered\n", task_id=task.task_id)
    packet: dict[str, Any] = {
        "current_state_ref": f"state:{draft.key}", "evidence_refs": ["event:db-failover"],
        "artifact_refs": [art.artifact_id], "constraints": {"max_words": 200, "audience": "customers"},
        "authority_scope": {"capabilities": ["state.write", "task.work"]},
        "expected_output": "the summary, final, under 200 words", "return_route": "src"}
    source_saw: list[str] = []

    def source(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        source_saw.extend(f"{t.task_id}:{t.status.value}" for t in view.tasks)
        return None
    spy = OnlyAgentViewWake(RuleAgent([finish_from_packet]))
    runner = runner_for(pworld, {"src": RuleAgent([source]), "dst": spy})
    h = pworld.create_handoff("src", "dst", task.task_id, "finish and publish the incident summary", **packet)
    runner.run_until_quiet(max_rounds=20)

    stored = pworld.get_handoff(h.handoff_id, actor=GOV)
    assert stored.goal == "finish and publish the incident summary"
    assert (stored.current_state_ref, stored.evidence_refs, stored.artifact_refs) == (
        "state:incident-summary", ["event:db-failover"], [art.artifact_id])
    assert stored.constraints == {"max_words": 200, "audience": "customers"}
    assert stored.authority_scope == {"capabilities": ["state.write", "task.work"]}
    assert (stored.expected_output, stored.return_route) == ("the summary, final, under 200 words", "src")
    assert stored.status.value == "completed" and stored.result is not None and stored.result["route"] == "src"

    (call,) = spy.calls                                        # one run, given only agent, view and wake
    args, kwargs = call
    assert kwargs == {} and [type(a) for a in args] == [Agent, WorldView, Wake]
    agent_arg, view_arg, wake_arg = args
    assert agent_arg.agent_id == "dst" and wake_arg.cause == "handoff_target"
    assert transcript.memory_id not in view_arg.memory_ids()   # the source's transcript is not shown
    assert set(wake_arg.payload) <= {"depth", "chain", "origin_us", "rule"}
    entry = pworld.get_state("incident-summary", actor=GOV)
    assert (entry.version, entry.value["status"], entry.updated_by) == (2, "final", "dst")
    done = pworld.get_task(task.task_id, actor=GOV)
    assert (done.status.value, done.assignee, done.owner_agent) == ("completed", "dst", "src")
    assert done.result is not None and done.result["artifacts"] == [art.artifact_id]
    assert source_saw == [f"{task.task_id}:completed"]          # the return route: the source is told
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert sorted((r.agent_id, r.outcome.value) for r in receipts.values()) == [("dst", "acted"),
                                                                                 ("src", "no_action")]
    runner.close()


def test_mvp02_an_agent_hands_off_a_full_packet_through_its_worker(pworld: World) -> None:
    """MVP test 2, the source side: an agent's worker hands off with the whole packet (state ref, evidence
    and artifact refs, constraints, authority scope, expected output, return route) and the target is woken
    by the controller with the packet in the world."""
    add_agent(pworld, "src", ["task.create", "task.work", "handoff.create", "state.write"])
    add_agent(pworld, "dst", ["task.work"])
    pworld.create_task("src", "write the summary", task_id="t-sum")
    pworld.claim_task("src", "t-sum")
    pworld.compare_and_set_state("src", "sum-draft", 0, {"words": 120})
    packet = {"current_state_ref": "state:sum-draft", "evidence_refs": ["e1"], "artifact_refs": ["a1"],
              "constraints": {"max_words": 200}, "authority_scope": {"capabilities": ["task.work"]},
              "expected_output": "the summary", "return_route": "src"}
    pworld.enqueue_wake(GOV, "src", "hand it over", "k-src")
    seen: list[str] = []

    def source(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        if wake.cause != "hand it over":
            return None
        return act(Handoff(target_agent="dst", task_id="t-sum", goal="finish the summary", **packet))

    def target(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        seen.extend(h.handoff_id for h in view.handoffs)
        return None

    runner = runner_for(pworld, {"src": RuleAgent([source]), "dst": RuleAgent([target])})
    runner.run_until_quiet(max_rounds=50)
    (handoff,) = book_of(pworld).store.read.rows("handoffs", {"task_id": "t-sum"})
    assert {k: handoff[k] for k in packet if k != "authority_scope"} == {
        k: v for k, v in packet.items() if k != "authority_scope"}
    assert handoff["authority_scope"]["capabilities"] == ["task.work"]
    assert seen == [handoff["handoff_id"]]          # the target was woken and shown the handoff
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 12 -----------------------------------------------------------------------------------------------

def test_mvp12_a_model_swapped_mid_task_continues_from_the_world(pworld: World) -> None:
    """MVP test 12 (model replacement): the worker's adapter for ``w`` (its model) is replaced between two
    wakes of the same task. Model A (scripted rules) writes the first section; model B (a JSON-in, JSON-out
    callable, as an LLM would be) is given only {agent, view, wake} and continues from the world: it writes
    the remaining sections, never one twice, and completes the task."""
    add_agent(pworld, "w", ["state.write", "task.create", "task.work", "memory.write"])
    task = pworld.create_task("w", "write the report")
    pworld.claim_task("w", task.task_id)
    key = f"report:{task.task_id}"
    model_a = Conversation("model-a", sections_per_wake=1)
    contexts: list[Mapping[str, Any]] = []

    def model_b(ctx: Mapping[str, Any]) -> dict[str, Any]:
        contexts.append(ctx)
        entry = next(s for s in ctx["view"]["state"] if s["key"] == key)
        done = entry["value"]["done"]
        todo = [s for s in SECTIONS if s not in done][:1]
        effects: list[dict[str, Any]] = [{"effect": "set_state", "key": key, "expected_version": entry["version"],
                                          "value": {"done": done + todo, "by": "model-b"}}]
        if len(done) + len(todo) == len(SECTIONS):
            effects.append({"effect": "complete_task", "task_id": task.task_id, "result": {"sections": SECTIONS}})
        return {"decision": "act", "effects": effects}
    runner = runner_for(pworld, {"w": model_a.adapter})
    nudge(pworld, task.task_id, "start")
    runner.run_until_quiet(max_rounds=20)
    runner.adapters["w"] = CallableAdapter(model_b)               # the model is replaced mid-task
    for note in ("continue", "finish"):
        nudge(pworld, task.task_id, note)
        runner.run_until_quiet(max_rounds=20)

    assert [done for _, done in model_a.seen] == [[]]
    assert [sorted(c) for c in contexts] == [["agent", "view", "wake"]] * 2
    assert [c["wake"]["target_agent"] for c in contexts] == ["w", "w"]
    history = [(e.result["version"], e.result["value"]["done"], e.result["value"]["by"])
               for e in events_of(pworld, "state.set", actor="w") if e.subject_id == key]
    assert history == [(1, ["intro"], "model-a"), (2, ["intro", "figures"], "model-b"), (3, SECTIONS, "model-b")]
    entry = pworld.get_state(key, actor=GOV)
    assert (entry.version, entry.value) == (3, {"done": SECTIONS, "by": "model-b"})
    assert pworld.get_task(task.task_id, actor=GOV).status.value == "completed"
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert [receipts[w.wake_id].outcome for w in wakes_of(pworld, "w")] == [Outcome.ACTED] * 3
    runner.close()


# -- MVP 13 -----------------------------------------------------------------------------------------------

def test_mvp13_an_artifact_is_recovered_from_the_registry_alone(pworld: World, tmp_path: Path,
                                                                pdp_client: CerbosPdp) -> None:
    """MVP test 13 (artifact recovery from the registry alone): the producer registers two versions of a
    report and completes its task pointing at the artifact, then goes offline and every process is gone. A
    fresh world on the same database and artifact directory, with a fresh runner, wakes a reviewer that
    finds the artifact by the task's result; its content (both versions) is recovered from the registry
    alone and verified against the registered checksums (a damaged copy is detected, never served)."""
    add_agent(pworld, "prod", ["task.create", "task.work", "artifact.write", "state.write"])
    add_agent(pworld, "rev", ["state.write"])
    task = pworld.create_task("prod", "produce the report")
    pworld.claim_task("prod", task.task_id)
    v1, v2 = b"report v1: draft\n", b"report v2: final figures\n"
    art = pworld.register_artifact("prod", "report", v1, task_id=task.task_id)
    art = pworld.new_artifact_version("prod", art.artifact_id, v2, expected_version=1)

    def produce(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        t = my_task(view, agent.agent_id)
        if t is None:
            return None
        return act(CompleteTask(task_id=t.task_id, result={"artifact_id": art.artifact_id, "version": 2}))
    runner = runner_for(pworld, {"prod": RuleAgent([produce]), "rev": RuleAgent([])})
    nudge(pworld, task.task_id, "ship it")
    runner.run_until_quiet(max_rounds=20)
    pworld.detach_session("term:t-prod")
    runner.close()
    now = clock(pworld).now_us()
    book_of(pworld).close()                                    # every process of the first run is gone

    store = Store(f"sqlite:///{tmp_path / 'world.db'}")        # a new process: same database and directory
    world = kept(RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=ManualClock(now),
                             ids=SeededIds(8), artifact_dir=tmp_path / "artifacts"))
    found: list[dict[str, Any]] = []

    def recover(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        t = next(t for t in view.tasks if t.task_id == task.task_id)
        found.append(dict(t.result or {}))
        return act(SetState(key="review-input", expected_version=0, value=t.result))
    fresh = runner_for(world, {"rev": RuleAgent([recover])})
    clock(world).advance(10)
    world.enqueue_wake(GOV, "rev", "review the report", "review-1")
    fresh.run_until_quiet(max_rounds=20)

    assert found == [{"artifact_id": art.artifact_id, "version": 2}]
    registry = world.list_artifacts(task_id=task.task_id, actor="rev")
    assert [(a.artifact_id, a.version, a.owner) for a in registry] == [(art.artifact_id, 2, "prod")]
    versions = world.artifact_versions(art.artifact_id, actor="rev")
    assert [(v.version, v.checksum) for v in versions] == [(1, hashlib.sha256(v1).hexdigest()),
                                                            (2, hashlib.sha256(v2).hexdigest())]
    assert world.read_artifact(art.artifact_id, actor="rev").content == v2
    assert world.read_artifact(art.artifact_id, 1, actor="rev").content == v1
    (tmp_path / "artifacts" / versions[0].location).write_bytes(b"tampered")
    with pytest.raises(ArtifactCorrupted):
        world.read_artifact(art.artifact_id, 1, actor="rev")
    assert world.get_agent("prod", actor=GOV).status.value == "offline"
    receipts = assert_every_wake_has_one_receipt(world)
    assert {(r.agent_id, r.outcome.value) for r in receipts.values()} == {("prod", "acted"), ("rev", "acted")}
    fresh.close()
    close_world(world)

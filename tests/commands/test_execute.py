"""``world.execute`` is the named call: on the real PDP, a run of commands through ``execute`` gives the same
results and the same event log (ids, payloads, request hashes, policy epochs) as the same run through the
named World methods; an operation id is one identity whichever path used it; a denial is the same denial;
nothing but a registered command gets through. The worker carries effects out this way, and ``pmw exec``
runs a command as the named CLI command would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cli.output import to_jsonable
from engine.commands import COMMANDS, parse
from engine.commands.state import CompareAndSetState
from engine.errors import InvalidInput, OperationConflict, PolicyDenied
from engine.models.agents import Agent
from engine.models.common import Model
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.protocol import adapters
from engine.protocol.adapters import AgentDecision, CallableAdapter, RuleAgent
from engine.protocol.worker import Worker
from engine.world import Cause, World
from engine.world.projection import WorldView
from tests.cli_support import Pdp, Pmw, assert_one_denial, counts, pdp_fixture
from tests.commands.support import world_execute, world_kwargs
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

pdp = pdp_fixture
__all__ = ["world_execute"]  # the fixture, used by name

CAPABILITIES = ["artifact.write", "memory.write", "message.send", "room.open", "state.write", "task.create",
                "task.work", "wake.enqueue"]
RUN: list[tuple[str, dict[str, Any]]] = [
    ("compare_and_set_state", {"key": "plan", "expected_version": 0, "value": {"step": 1}}),
    ("create_task", {"goal": "write the report", "task_id": "t1"}),
    ("claim_task", {"task_id": "t1"}),
    ("store_memory", {"content": "the figures come from Q3", "epistemic_type": "observation", "memory_id": "m1"}),
    ("create_room", {"goal": "agree on the figures", "room_id": "r1", "members": ["bob"]}),
    ("discuss", {"room_id": "r1", "body": "Q3 it is"}),
    ("register_artifact", {"artifact_type": "report", "content": "draft é", "artifact_id": "a1", "task_id": "t1"}),
    ("new_artifact_version", {"artifact_id": "a1", "content": "final", "expected_version": 1}),
    ("subscribe", {"subject_id": "t1"}),
    ("append_event", {"event_type": "note.added", "payload": {"x": 1}, "subject_kind": "task", "subject_id": "t1"}),
    ("complete_task", {"task_id": "t1", "result": {"ok": True}}),
    ("send_message", {"channel": "general", "recipient_kind": "agent", "recipient": "bob", "body": "done"}),
]


def _team(root: Path, pdp_client: CerbosPdp) -> World:
    root.mkdir()
    world = open_pdp_world(f"sqlite:///{root / 'world.db'}", pdp_client, root / "artifacts")
    add_agent(world, "alice", CAPABILITIES)
    add_agent(world, "bob", ["state.write"])
    return world


@pytest.fixture
def twins(tmp_path: Path, pdp_client: CerbosPdp, world_execute: None) -> Any:
    """Two worlds set up identically (same clock, same id seed)."""
    named, executed = _team(tmp_path / "named", pdp_client), _team(tmp_path / "executed", pdp_client)
    yield named, executed
    close_world(named)
    close_world(executed)


def _log(world: World) -> list[dict[str, Any]]:
    return book_of(world).store.read.events(0, 10_000)


def test_execute_gives_the_named_call_result_and_log(twins: tuple[World, World]) -> None:
    named, executed = twins
    for name, body in RUN:
        seen = len(_log(named))
        by_name = getattr(named, name)(**world_kwargs(named, name, "alice", body))
        by_command = executed.execute("alice", parse(name, body))
        assert to_jsonable(by_command) == to_jsonable(by_name), name
        written = {e["event_type"] for e in _log(named)[seen:]}
        declared = {body["event_type"] if t == "<event_type>" else t for t in COMMANDS[name].events}
        assert written and written <= declared, (name, written)  # the command's events say what it writes
    assert _log(executed) == _log(named)
    assert not [e for e in _log(named) if e["event_type"] == "policy.denied"]
    assert executed.read_artifact("a1", actor="alice").content == named.read_artifact("a1", actor="alice").content


def test_one_operation_identity_whichever_path(pworld: World, world_execute: None) -> None:
    add_agent(pworld, "alice", CAPABILITIES)
    first = pworld.compare_and_set_state("alice", "k", 0, {"v": 1}, op_id="op-1")
    seen = len(_log(pworld))
    again = pworld.execute("alice", CompareAndSetState(key="k", expected_version=0, value={"v": 1}), op_id="op-1")
    assert again == first and len(_log(pworld)) == seen
    with pytest.raises(OperationConflict):
        pworld.execute("alice", CompareAndSetState(key="k", expected_version=0, value={"v": 2}), op_id="op-1")
    assert len(_log(pworld)) == seen


def test_a_denial_through_execute_is_the_named_call_denial(pworld: World, world_execute: None) -> None:
    add_agent(pworld, "carol", [])
    with pytest.raises(PolicyDenied):
        pworld.execute("carol", parse("compare_and_set_state", {"key": "k", "expected_version": 0, "value": 1}))
    denial = _log(pworld)[-1]
    assert (denial["event_type"], denial["actor_id"], denial["payload"]["command"]) == (
        "policy.denied", "carol", "compare_and_set_state")


def test_only_registered_commands_get_through(pworld: World, world_execute: None) -> None:
    class Sneaky(CompareAndSetState):
        name = "record_decision"

    class NotACommand(Model):
        key: str

    add_agent(pworld, "alice", CAPABILITIES)
    seen = len(_log(pworld))
    for bad in (Sneaky(key="k", expected_version=0, value=1), NotACommand(key="k"), "compare_and_set_state"):
        with pytest.raises(InvalidInput) as refused:
            pworld.execute("alice", bad)  # type: ignore[arg-type]
        assert refused.value.field == "command"
    with pytest.raises(InvalidInput):
        pworld.execute("alice", parse("close_stale_rooms", {}), cause=None, op_id="op-x")
    with pytest.raises(InvalidInput):
        pworld.execute("alice", parse("close_stale_rooms", {}), cause=Cause(causation_id="e1"))
    assert len(_log(pworld)) == seen
    effect = adapters.SetState(key="k", expected_version=0, value=1)  # an effect runs as its command
    assert pworld.execute("alice", effect).key == "k"


def test_the_worker_carries_effects_out_through_execute(pworld: World, world_execute: None) -> None:
    add_agent(pworld, "alice", CAPABILITIES)
    CreateTask, ClaimTask, RegisterArtifact = (adapters.EFFECTS[n] for n in  # noqa: N806
                                               ("create_task", "claim_task", "register_artifact"))

    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        return AgentDecision(decision="act", effects=[
            CreateTask(goal="from a wake", task_id="t9"), ClaimTask(task_id="t9"),
            adapters.SetState(key="a/b", expected_version=0, value=1),
            RegisterArtifact(artifact_type="note", content="text", artifact_id="a9", task_id="t9")])
    pworld.enqueue_wake("alice", "alice", "go", "k-1")
    cycle = Worker(book_of(pworld), "worker-1", {"alice": RuleAgent([rule])}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED, cycle and cycle.receipt
    wake = cycle.wake.wake_id
    assert cycle.receipt.action_refs == ["t9", "t9", f"{wake}:2", "a9"]  # a key with "/" is named by its op
    assert pworld.get_task("t9", actor="alice").assignee == "alice"
    assert pworld.read_artifact("a9", actor="alice").content == b"text"

    def legacy(context: Any) -> dict[str, Any]:  # an LLM adapter still speaking the old effect names
        return {"decision": "act", "effects": [{"effect": "set_state", "key": "old", "expected_version": 0,
                                                "value": context["wake"]["cause"]}]}
    pworld.enqueue_wake("alice", "alice", "legacy", "k-2")
    cycle = Worker(book_of(pworld), "worker-1", {"alice": CallableAdapter(legacy)}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED
    assert pworld.get_state("old", actor="alice").value == "legacy"


def test_pmw_exec_runs_a_command(tmp_path: Path, pdp: Pdp, world_execute: None) -> None:
    p = Pmw(f"sqlite:///{tmp_path / 'world.db'}", pdp)
    p.init()
    p.agents("alice")
    body = json.dumps({"key": "plan", "expected_version": 0, "value": {"step": 1}})
    entry = p.js("exec", "compare_and_set_state", "--json", body, "--op-id", "op-1", actor="alice")
    assert (entry["key"], entry["version"], entry["value"]) == ("plan", 1, {"step": 1})
    before = counts(p.db_url)
    assert p.js("exec", "compare_and_set_state", "--json", body, "--op-id", "op-1", actor="alice") == entry
    assert counts(p.db_url) == before  # a retry writes nothing
    read = p.js("state", "get", "plan", actor="alice")
    assert read.pop("read_token")  # a read says what it observed
    assert read == entry
    task = p.js("exec", "create_task", "--json", '{"goal": "g", "task_id": "t1"}', actor="alice")
    assert task == p.js("tasks", "show", "t1", actor="alice")
    before = counts(p.db_url)
    assert p.fails(6, "exec", "grant", "--json", '{"agent_id": "alice", "capabilities": []}', actor="alice")[
        "code"] == "policy_denied"
    assert_one_denial(before, p.db_url, "alice")  # the named command's denial: its audit record, nothing else
    before = counts(p.db_url)
    for args in (("exec", "record_decision"), ("exec", "claim_task", "--json", "[]"),
                 ("exec", "claim_task", "--json", "{not json"),
                 ("exec", "claim_task", "--json", '{"task_id": "t1", "actor": "gov"}')):
        assert p.fails(3, *args, actor="alice")["code"] == "invalid_input"
    assert p.fails(3, "exec", "claim_task", "--json", '{"task_id": "t1"}')["field"] == "--as"
    assert counts(p.db_url) == before

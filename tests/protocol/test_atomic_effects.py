"""The effects of one decision commit all or nothing, in one transaction with the ack, the receipt and the
trace; a refused effect commits no effect and the receipt (and trace) lists every effect with its verdict.
An adapter that records first (``record_first=True``) has its decision recorded in its own transaction: a crash
between it and the commit replays it once. A rule agent's (``record_first=False``) is recorded in the commit
of its effects and ack: a crash before that commit leaves nothing, and the retry decides again. The refusal
tests run both ways. Through the real PDP, the real gateway and a SQLite file (``pworld``); the gateway's
batch on every backend."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from engine.errors import NotFound, UndecidedWrite, VersionConflict
from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.protocol.adapters import EFFECTS, AgentDecision, ProposeMemory, RuleAgent, SetState
from engine.protocol.worker import SimulatedCrash, Worker
from engine.world import World
from engine.world.projection import WorldView
from store import BatchRefused
from tests.conftest import add_agent, book_of

CreateTask = EFFECTS["create_task"]


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "boss", ["wake.enqueue"])
    add_agent(pworld, "w", ["state.write"])  # no task.create: a CreateTask effect is denied
    return pworld


def decides(*effects: Any, calls: list[str] | None = None, record_first: bool = True) -> RuleAgent:
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        if calls is not None:
            calls.append(wake.wake_id)
        return AgentDecision(decision="act", effects=list(effects), reason="two effects")
    return RuleAgent([rule], record_first=record_first)


def _absent(world: World, key: str) -> bool:
    try:
        world.get_state(key, actor="gov")
    except NotFound:
        return True
    return False


def _state_events(world: World) -> list[str]:
    return [e.subject_id for e in world.events(actor="gov", limit=10_000) if e.event_type == "state.set"]


@pytest.mark.parametrize("record_first", [True, False], ids=["record-first", "at-once"])
def test_a_denied_second_effect_commits_no_effect_and_the_receipt_lists_both(
        team: World, record_first: bool) -> None:
    wake = team.enqueue_wake("boss", "w", "go", "k1").wake
    create = CreateTask.model_validate({"goal": "not mine to create"})
    cycle = Worker(book_of(team), "worker-1", {"w": decides(SetState(key="one", expected_version=0, value=1),
                                                            create,
                                                            record_first=record_first)}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.DENIED
    assert _absent(team, "one") and _state_events(team) == []          # effect 1 was not committed
    assert team.list_tasks(actor="gov") == []
    listed = cycle.receipt.payload["effects"]
    assert [(v["effect"], v["verdict"]) for v in listed] == [("compare_and_set_state", "not_committed"),
                                                             ("create_task", "denied")]
    assert "create" in listed[1]["reason"] and "effect 1 (create_task) was denied" in listed[0]["reason"]
    assert cycle.receipt.reason is not None and cycle.receipt.reason.endswith("[effect 1 (create_task)]")
    assert cycle.receipt.action_refs == []
    trace = team.get_trace(wake.wake_id, actor="gov")
    assert trace.decisions[0]["verdicts"] == listed and trace.commits == []
    stored = team.receipt_for_wake(wake.wake_id, actor="gov")
    assert stored == cycle.receipt and team.get_wake(wake.wake_id, actor="gov").status.value == "acked"
    recorded = book_of(team).recorded_decision(wake.wake_id)  # at once: committed with the refusal's ack
    assert recorded is not None and len(recorded.decision["effects"]) == 2
    denials = [e for e in team.events(actor="gov", limit=10_000) if e.event_type == "policy.denied"]
    assert len(denials) == 1  # the denial is audited once, as a single write's is


@pytest.mark.parametrize("record_first", [True, False], ids=["record-first", "at-once"])
def test_a_conflicting_second_effect_commits_no_effect_and_the_receipt_lists_both(
        team: World, record_first: bool) -> None:
    team.compare_and_set_state("w", "two", 0, "v1")
    team.enqueue_wake("boss", "w", "go", "k2")
    cycle = Worker(book_of(team), "worker-1", {"w": decides(SetState(key="one", expected_version=0, value=1),
                                                            SetState(key="two", expected_version=0, value=2),
                                                            record_first=record_first)}
                   ).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.CONFLICT
    assert _absent(team, "one") and team.get_state("two", actor="gov").value == "v1"
    listed = cycle.receipt.payload["effects"]
    assert [(v["effect"], v["verdict"]) for v in listed] == [("compare_and_set_state", "not_committed"),
                                                             ("compare_and_set_state", "conflict")]
    assert "'two'" in listed[1]["reason"] and "effect 1" in listed[0]["reason"]


@pytest.mark.parametrize("record_first", [True, False], ids=["record-first", "at-once"])
def test_allowed_effects_commit_together_with_the_ack(
        team: World, record_first: bool) -> None:
    wake = team.enqueue_wake("boss", "w", "go", "k3").wake
    cycle = Worker(book_of(team), "worker-1", {"w": decides(SetState(key="one", expected_version=0, value=1),
                                                            SetState(key="one", expected_version=1, value=2),
                                                            record_first=record_first)}
                   ).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED  # the second is planned on the first
    assert team.get_state("one", actor="gov").version == 2
    assert [v["verdict"] for v in cycle.receipt.payload["effects"]] == ["committed", "committed"]
    events = team.events(actor="gov", limit=10_000)
    ours = [e for e in events if e.op_id is not None and e.op_id.startswith(wake.wake_id)]
    assert [e.op_id for e in ours] == [f"{wake.wake_id}:decide", f"{wake.wake_id}:0", f"{wake.wake_id}:1",
                                       f"{wake.wake_id}:ack"]
    assert [e.seq for e in ours[1:]] == list(range(ours[1].seq, ours[1].seq + 3))  # one transaction, in order
    assert len({e.policy_epoch for e in ours[1:]}) == 1 and ours[1].policy_epoch is not None


def test_a_crash_between_the_decision_and_the_commit_replays_it_once(team: World) -> None:
    wake = team.enqueue_wake("boss", "w", "go", "k4").wake
    calls: list[str] = []
    adapter = decides(SetState(key="one", expected_version=0, value=1),
                      SetState(key="two", expected_version=0, value=2), calls=calls)
    first = Worker(book_of(team), "worker-1", {"w": adapter}, lease_seconds=5)
    first.crash_before_commit = 1
    with pytest.raises(SimulatedCrash):
        first.run_once()
    assert book_of(team).recorded_decision(wake.wake_id) is not None      # the decision was recorded first
    assert _absent(team, "one") and _absent(team, "two")                   # nothing of the effects
    assert team.get_wake(wake.wake_id, actor="gov").status.value == "claimed"
    with pytest.raises(NotFound):
        team.receipt_for_wake(wake.wake_id, actor="gov")
    team.clock.advance(6)  # type: ignore[attr-defined]
    cycles = Worker(book_of(team), "worker-2", {"w": adapter}).run_until_idle()
    assert len(cycles) == 1 and cycles[0].receipt.outcome is Outcome.ACTED
    assert calls == [wake.wake_id]                                          # decided once, replayed
    assert (team.get_state("one", actor="gov").value, team.get_state("two", actor="gov").value) == (1, 2)
    assert sorted(_state_events(team)) == ["one", "two"]                   # applied once each
    assert len(team.list_receipts(actor="gov")) == 1


def test_a_crash_before_a_rule_agents_commit_leaves_nothing_and_the_retry_decides_again(team: World) -> None:
    """At once (``record_first=False``): the decision's record commits with its effects, so a crash before that
    commit leaves no record and no effect; the retry asks the agent again and everything commits once."""
    wake = team.enqueue_wake("boss", "w", "go", "k6").wake
    calls: list[str] = []
    adapter = decides(SetState(key="one", expected_version=0, value=1),
                      SetState(key="two", expected_version=0, value=2), calls=calls, record_first=False)
    first = Worker(book_of(team), "worker-1", {"w": adapter}, lease_seconds=5)
    first.crash_before_commit = 1
    with pytest.raises(SimulatedCrash):
        first.run_once()
    assert book_of(team).recorded_decision(wake.wake_id) is None          # nothing of the decision
    assert _absent(team, "one") and _absent(team, "two")
    assert team.get_wake(wake.wake_id, actor="gov").status.value == "claimed"
    team.clock.advance(6)  # type: ignore[attr-defined]
    cycles = Worker(book_of(team), "worker-2", {"w": adapter}).run_until_idle()
    assert len(cycles) == 1 and cycles[0].receipt.outcome is Outcome.ACTED
    assert calls == [wake.wake_id, wake.wake_id]                           # decided again
    assert (team.get_state("one", actor="gov").value, team.get_state("two", actor="gov").value) == (1, 2)
    assert sorted(_state_events(team)) == ["one", "two"]                   # applied once each
    ours = [e for e in team.events(actor="gov", limit=10_000) if (e.op_id or "").startswith(f"{wake.wake_id}:")]
    assert [e.op_id.rpartition(":")[2] for e in ours if e.op_id] == ["decide", "0", "1", "ack"]
    assert [e.seq for e in ours] == list(range(ours[0].seq, ours[0].seq + 4))  # one transaction, in order
    recorded = book_of(team).recorded_decision(wake.wake_id)
    assert recorded is not None and recorded.decision == cycles[0].decision.model_dump(mode="json")  # type: ignore[union-attr]


def test_a_decision_another_worker_recorded_meanwhile_stands(team: World) -> None:
    """At once, a worker that finds no record, decides, and meets another worker's record of this wake at its
    commit (that worker's lease had expired; it recorded before it stopped) carries out the recorded
    decision, not its own: one decision per wake, whoever recorded it first."""
    wake = team.enqueue_wake("boss", "w", "go", "k7").wake
    book = book_of(team)
    theirs = AgentDecision(decision="act", effects=[SetState(key="theirs", expected_version=0, value=1)])

    def rule(agent: Agent, view: WorldView, w: Wake) -> AgentDecision | None:
        other = threading.Thread(target=book.record_decision,  # another worker, on its own connection
                                 args=("worker-0", w.wake_id, agent.agent_id, theirs.model_dump(mode="json")))
        other.start()
        other.join(30)
        return AgentDecision(decision="act", effects=[SetState(key="mine", expected_version=0, value=1)])

    cycle = Worker(book, "worker-1", {"w": RuleAgent([rule])}).run_once()
    assert cycle is not None and cycle.receipt.outcome is Outcome.ACTED
    assert cycle.decision == theirs
    assert team.get_state("theirs", actor="gov").value == 1 and _absent(team, "mine")
    recorded = book.recorded_decision(wake.wake_id)
    assert recorded is not None and recorded.decision == theirs.model_dump(mode="json")
    assert len(team.list_receipts(actor="gov")) == 1


def test_the_agent_facing_world_cannot_commit_undecided_writes_in_a_batch(team: World) -> None:
    """Only the runtime's door takes the runtime's own (undecided) writes in a batch: the World's own door
    refuses them before anything is read or written, and even the runtime's door exempts only the leading
    writes it was told of (a later undecided write is ``UndecidedWrite``, nothing written)."""
    book = book_of(team)
    wake = team.enqueue_wake("boss", "w", "go", "k8").wake
    record = book.plan_decision("worker-1", wake.wake_id, "w", {"decision": "no_action"})
    seq = book.store.read.last_seq()
    with team.reading(), team.planning() as batch:
        team.compare_and_set_state("w", "one", 0, 1)
    with pytest.raises(RuntimeError, match="runtime's door"):
        team._commit_batch(batch, team._door, [record])
    undecided = dataclasses.replace(batch._writes[0].request, policy_epoch=None)
    with pytest.raises(BatchRefused) as refused:
        book._door.commit_many([record, undecided], runtime_writes=1)
    assert refused.value.index == 1 and isinstance(refused.value.error, UndecidedWrite)
    assert book.store.read.last_seq() == seq and book.recorded_decision(wake.wake_id) is None
    assert _absent(team, "one")


def test_the_gateway_commits_a_batch_all_or_nothing(world: World) -> None:
    """``commit_many`` on every backend: a write refused at commit (its row moved after it was planned)
    rolls back the writes before it; the batch names the refused write and its error."""
    world.compare_and_set_state("a", "k2", 0, "v1")
    with world.planning() as batch:
        world.compare_and_set_state("a", "k1", 0, "new")
        world.compare_and_set_state("a", "k2", 1, "planned on v1")
    world.compare_and_set_state("a", "k2", 1, "v2")                        # moved after the plan
    with pytest.raises(BatchRefused) as refused:
        world.commit_planned(batch)
    assert refused.value.index == 1 and isinstance(refused.value.error, VersionConflict)
    with pytest.raises(NotFound):
        world.get_state("k1")
    assert world.get_state("k2").value == "v2"
    with world.planning() as again:
        world.compare_and_set_state("a", "k1", 0, "new", op_id="op-k1")
        world.compare_and_set_state("a", "k2", 2, "v3", op_id="op-k2")
    outcomes = world.commit_planned(again)
    assert [o.replayed for o in outcomes] == [False, False]
    assert (world.get_state("k1").value, world.get_state("k2").value) == ("new", "v3")
    assert world.compare_and_set_state("a", "k1", 0, "new", op_id="op-k1").value == "new"  # ledger entries


@pytest.mark.parametrize("record_first", [True, False], ids=["record-first", "at-once"])
def test_an_effect_refused_while_it_is_planned_commits_no_effect_and_the_wake_is_acked(
        team: World, record_first: bool) -> None:
    """A refusal raised by the second effect's own plan (its memory does not exist): the first is dropped
    with the batch, and the wake is acked alone (``failed``, naming the effect)."""
    wake = team.enqueue_wake("boss", "w", "go", "k5").wake
    cycle = Worker(book_of(team), "worker-1", {"w": decides(SetState(key="one", expected_version=0, value=1),
                                                            ProposeMemory(memory_id="mem_missing"),
                                                            record_first=record_first)}).run_once()
    assert cycle is not None and cycle.receipt.outcome in (Outcome.FAILED, Outcome.DENIED)
    assert _absent(team, "one") and _state_events(team) == []
    assert [v["verdict"] for v in cycle.receipt.payload["effects"]] == ["not_committed",
                                                                        cycle.receipt.outcome.value]
    assert team.get_wake(wake.wake_id, actor="gov").status.value == "acked"

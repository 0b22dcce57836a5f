"""Pull for external agents through the real PDP and gateway: an external agent claims, reads and acks only
its own wakes, with receipts and traces of the in-process worker's shape; a lost lease refuses its decide;
a retried decide replays and never applies an effect twice; the controller's storm rules hold unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import InvalidInput, OperationConflict, WakeNotLeased
from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake, WakeStatus
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.pull import ExternalAgents, Pulled, pull_worker_id
from engine.protocol.worker import SimulatedCrash, Worker
from engine.runloop import InProcessRunner
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of
from tests.runloop.support import relay


def bump_decision(view: WorldView, key: str) -> AgentDecision:
    """What the external agent decides: increment ``key`` once (as the in-process ``bump`` does)."""
    entry = next((s for s in view.state if s.key == key), None)
    version, value = (entry.version, entry.value) if entry else (0, 0)
    return AgentDecision(decision="act", effects=[SetState(key=key, expected_version=version, value=value + 1)])


def bump(key: str) -> RuleAgent:
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        return bump_decision(view, key)
    return RuleAgent([rule])


def unchanged(world: World) -> dict[str, Any]:
    return book_of(world).store.read.counts_and_versions()


def shape(value: Any) -> Any:
    """The keys of a JSON value, recursively, and the types of its leaves (a list: the shapes of its
    objects, a list of anything else: "list"): what two runs must share, whatever they saw or wrote."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        objects = [shape(v) for v in value if isinstance(v, dict)]
        return objects if objects else "list"
    return type(value).__name__


def steps(world: World, wake_id: str) -> list[str]:
    """The commands of the wake's run, in log order (its claim, decision, effects and ack)."""
    return [e.command for e in world.events(actor="gov", limit=10_000)
            if e.op_id.startswith(f"{wake_id}:") or (e.subject_id == wake_id and e.command != "enqueue_wake")]


@pytest.fixture
def team(pworld: World) -> World:
    add_agent(pworld, "boss", ["wake.enqueue"])
    add_agent(pworld, "w", ["state.write"])  # run in process
    add_agent(pworld, "x", ["state.write"])  # external: pulls its own wakes
    return pworld


def test_an_external_agent_acks_its_wake_while_a_worker_runs_another_agent_with_the_same_shape(team: World) -> None:
    inside = team.enqueue_wake("boss", "w", "count", "k-w").wake
    outside = team.enqueue_wake("boss", "x", "count", "k-x", priority=5).wake  # more urgent: the worker skips it
    worker = Worker(book_of(team), "worker-1", {"w": bump("n-w")})
    cycles = worker.run_until_idle()
    assert [c.wake.wake_id for c in cycles] == [inside.wake_id]
    assert team.get_wake(outside.wake_id, actor="gov").status is WakeStatus.PENDING  # waits for its agent

    agents = ExternalAgents(book_of(team))
    pulled = agents.pull("x")
    assert isinstance(pulled, Pulled) and pulled.wake.wake_id == outside.wake_id
    assert (pulled.agent.agent_id, pulled.wake.lease_owner) == ("x", pull_worker_id("x"))
    assert pulled.lease_until_us == pulled.wake.lease_until_us and pulled.view.agent.agent_id == "x"
    receipt = agents.decide("x", outside.wake_id, bump_decision(pulled.view, "n-x"))
    assert receipt.outcome is Outcome.ACTED and team.get_state("n-x", actor="x").value == 1

    mine, theirs = cycles[0].receipt, receipt
    assert shape(mine.model_dump(mode="json")) == shape(theirs.model_dump(mode="json"))
    t_in, t_out = team.get_trace(inside.wake_id, actor="gov"), team.get_trace(outside.wake_id, actor="gov")
    assert shape(t_in.model_dump(mode="json")) == shape(t_out.model_dump(mode="json"))
    assert (t_in.worker_id, t_out.worker_id) == ("worker-1", "pull:x")
    assert (t_in.tools, t_out.tools) == (["compare_and_set_state"], ["compare_and_set_state"])
    assert t_out.cost["context_items"] == len(t_out.retrieved_refs) and int(t_out.cost["context_bytes"] or 0) > 0
    assert steps(team, inside.wake_id) == steps(team, outside.wake_id) == [
        "claim_wake", "record_decision", "compare_and_set_state", "ack_wake"]
    effect = next(e for e in team.events(actor="gov", limit=10_000) if e.op_id == f"{outside.wake_id}:0")
    assert (effect.actor_id, effect.correlation_id) == ("x", outside.wake_id)  # as the agent, in the wake's chain
    assert agents.pull("x") is None


def test_a_worker_with_adapters_for_some_agents_never_claims_the_others_wakes(team: World) -> None:
    other = team.enqueue_wake("boss", "x", "count", "k-x", priority=9).wake
    before = unchanged(team)
    assert Worker(book_of(team), "worker-1", {}).run_until_idle() == []
    assert Worker(book_of(team), "worker-1", {"w": bump("n")}).run_until_idle() == []
    assert Worker(book_of(team), "worker-1", {"w": bump("n")}).run_once("x") is None
    assert unchanged(team) == before  # nothing claimed, no "no adapter" receipt
    team.enqueue_wake("boss", "w", "count", "k-w")
    cycles = Worker(book_of(team), "worker-1", {"w": bump("n")}).run_until_idle()
    assert [c.wake.target_agent for c in cycles] == ["w"]
    assert team.get_wake(other.wake_id, actor="gov").status is WakeStatus.PENDING
    assert [r.agent_id for r in team.list_receipts(actor="gov")] == ["w"]


def test_an_agent_can_neither_pull_nor_decide_another_agents_wake(team: World) -> None:
    theirs = team.enqueue_wake("boss", "x", "count", "k-x").wake
    agents = ExternalAgents(book_of(team))
    before = unchanged(team)
    assert agents.pull("w") is None
    with pytest.raises(WakeNotLeased) as pending:
        agents.decide("w", theirs.wake_id, AgentDecision(decision="no_action"))
    assert unchanged(team) == before
    pulled = agents.pull("x")
    assert pulled is not None
    before = unchanged(team)
    with pytest.raises(WakeNotLeased) as leased:
        agents.decide("w", theirs.wake_id, bump_decision(pulled.view, "n"))
    with pytest.raises(WakeNotLeased) as missing:
        agents.decide("w", "wak_nobody", AgentDecision(decision="no_action"))
    assert pending.value.reason == leased.value.reason == missing.value.reason == "not a wake of w"  # no oracle
    assert leased.value.code == "wake_not_leased" and leased.value.details()["agent_id"] == "w"
    assert unchanged(team) == before
    assert agents.decide("x", theirs.wake_id, bump_decision(pulled.view, "n")).outcome is Outcome.ACTED


def test_a_decide_after_the_lease_was_lost_is_refused(team: World) -> None:
    wake = team.enqueue_wake("boss", "x", "count", "k-x").wake
    agents = ExternalAgents(book_of(team))
    pulled = agents.pull("x", lease_seconds=5)
    assert pulled is not None
    team.clock.advance(6)  # type: ignore[attr-defined]
    before = unchanged(team)
    with pytest.raises(WakeNotLeased, match="the lease expired"):
        agents.decide("x", wake.wake_id, bump_decision(pulled.view, "n"))
    assert unchanged(team) == before
    taken = Worker(book_of(team), "worker-9", {"x": RuleAgent([])}, lease_seconds=60)
    assert team.claim_wake(taken.worker_id, agent_ids=["x"]) is not None  # a worker that runs x took it over
    before = unchanged(team)
    with pytest.raises(WakeNotLeased, match="leased to another worker"):
        agents.decide("x", wake.wake_id, bump_decision(pulled.view, "n"))
    assert unchanged(team) == before
    with pytest.raises(Exception, match="not found"):
        team.get_state("n", actor="x")


def test_a_retried_decide_replays_and_applies_nothing_twice(team: World) -> None:
    wake = team.enqueue_wake("boss", "x", "count", "k-x").wake
    agents = ExternalAgents(book_of(team))
    pulled = agents.pull("x")
    assert pulled is not None
    decided = bump_decision(pulled.view, "n")
    agents.protocol("x").crash_before_ack = 1  # the server dies after the effect, before the ack
    with pytest.raises(SimulatedCrash):
        agents.decide("x", wake.wake_id, decided)
    assert team.get_state("n", actor="x").value == 1
    receipt = agents.decide("x", wake.wake_id, decided.model_dump(mode="json"))  # the agent retries (as JSON)
    assert receipt.outcome is Outcome.ACTED
    before = unchanged(team)
    assert agents.decide("x", wake.wake_id, decided) == receipt  # the response was lost: asked again
    with pytest.raises(OperationConflict):
        agents.decide("x", wake.wake_id, AgentDecision(decision="no_action"))
    assert unchanged(team) == before
    assert team.get_state("n", actor="x").value == 1  # not 2
    assert [r.receipt_id for r in team.list_receipts(actor="gov")] == [receipt.receipt_id]


def test_a_decided_wake_whose_lease_ran_out_is_finished_by_the_next_pull_as_decided(team: World) -> None:
    first = team.enqueue_wake("boss", "x", "count", "k-1", priority=5).wake
    agents = ExternalAgents(book_of(team))
    pulled = agents.pull("x", lease_seconds=5)
    assert pulled is not None and pulled.wake.wake_id == first.wake_id
    decided = bump_decision(pulled.view, "n")
    agents.protocol("x").crash_before_ack = 1
    with pytest.raises(SimulatedCrash):
        agents.decide("x", first.wake_id, decided)
    team.clock.advance(6)  # type: ignore[attr-defined]
    second = team.enqueue_wake("boss", "x", "count", "k-2").wake
    nxt = agents.pull("x")  # finishes the first as recorded, then shows the second
    assert nxt is not None and nxt.wake.wake_id == second.wake_id
    done = team.receipt_for_wake(first.wake_id, actor="gov")
    assert done.outcome is Outcome.ACTED and team.get_state("n", actor="x").value == 1
    assert agents.decide("x", first.wake_id, decided) == done  # the agent's late retry: the one receipt


def test_bad_input_is_a_typed_error_and_changes_nothing(team: World) -> None:
    wake = team.enqueue_wake("boss", "x", "count", "k-x").wake
    agents = ExternalAgents(book_of(team))
    before = unchanged(team)
    with pytest.raises(InvalidInput):
        agents.pull("x", lease_seconds=0)
    with pytest.raises(InvalidInput):
        agents.pull("not an id")
    assert unchanged(team) == before
    assert agents.pull("x") is not None
    before = unchanged(team)
    bad: list[Any] = [{"decision": "act", "effects": [{"effect": "grant", "subject": "x"}]},  # not an effect
                      {"decision": "maybe"}, {"decision": "act", "effects": [{"effect": "claim_task"}]}, [1], "act",
                      {"decision": "act", "reads": ["not shown"], "effects": []},  # not a state key
                      {"decision": "act", "reads": ["never-shown"],  # a key the pull did not show
                       "effects": [{"effect": "compare_and_set_state", "key": "n", "expected_version": 0, "value": 1}]}]
    for decision in bad:
        with pytest.raises(InvalidInput) as refused:
            agents.decide("x", wake.wake_id, decision)
        assert refused.value.field.startswith("decision")
    with pytest.raises(InvalidInput):
        agents.decide("x", "bad id!", AgentDecision(decision="no_action"))
    assert unchanged(team) == before
    assert agents.decide("x", wake.wake_id, {"decision": "no_action"}).outcome is Outcome.NO_ACTION


def test_the_storm_rules_stop_a_ring_with_an_external_agent_at_the_same_depth(pworld: World) -> None:
    """The ring a -> b -> c -> a of tests/runloop/test_storm.py, with b external: the same wakes, the same
    suppression, one chain."""
    names = ["a", "b", "c"]
    for name in names:
        add_agent(pworld, name, ["state.write"])
    for i, name in enumerate(names):
        pworld.subscribe(name, f"{names[i - 1]}-out")
    runner = InProcessRunner(book_of(pworld), adapters={n: relay(f"{n}-out") for n in ("a", "c")})
    runner.start()
    external = ExternalAgents(book_of(pworld))
    pworld.compare_and_set_state("a", "a-out", 0, 1)
    for _ in range(20):  # the runner (controller, a and c) until quiet, then b pulls; until neither has work
        stats = runner.run_until_quiet(max_rounds=50)
        pulled = external.pull("b")
        if pulled is not None:
            decided = relay("b-out").run(pulled.agent, pulled.view, pulled.wake)  # b's own model, elsewhere
            assert external.decide("b", pulled.wake.wake_id, decided).outcome is Outcome.ACTED
        elif stats.events == 0 and stats.cycles == 0:
            break
    wakes = pworld.list_wakes(actor="gov")
    assert sorted((w.payload["depth"], w.target_agent) for w in wakes) == [(0, "b"), (1, "c"), (2, "a")]
    steps_ = [e for e in pworld.events(limit=1000, actor="gov") if e.event_type == "controller.step"]
    suppressed = [d for e in steps_ for d in e.payload["decisions"] if d["kind"] == "suppress"]
    assert [(d["agent"], d["reason"], d["depth"]) for d in suppressed] == [("b", "depth", 3)]
    for w in wakes:
        assert pworld.receipt_for_wake(w.wake_id, actor="gov").outcome is Outcome.ACTED
    assert len({w.payload["chain"] for w in wakes}) == 1
    assert pworld.get_trace(next(w.wake_id for w in wakes if w.target_agent == "b"), actor="gov").worker_id == "pull:b"
    runner.close()

"""MVP tests 3, 11, 14 and 15 (seed 000 §103-117) end to end: workers, the controller on ``rules/`` and the
real PDP. Wakes: duplicates, crashes, storms and silence."""

from __future__ import annotations

from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, CompleteTask, RuleAgent, SetState
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of
from tests.mvp.support import (
    GOV,
    act,
    assert_every_wake_has_one_receipt,
    controller_decisions,
    events_of,
    runner_for,
    wakes_of,
)


def bump(key: str, calls: list[str] | None = None) -> RuleAgent:
    """Whenever woken, increment ``key`` (read from the agent's view, never from memory of its own)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        if calls is not None:
            calls.append(wake.wake_id)
        entry = next((s for s in view.state if s.key == key), None)
        version, value = (entry.version, entry.value) if entry else (0, 0)
        return act(SetState(key=key, expected_version=version, value=int(value) + 1))
    return RuleAgent([rule])


# -- MVP 3 ------------------------------------------------------------------------------------------------

def test_mvp03_the_same_wake_delivered_ten_times_runs_once_with_one_effect(pworld: World) -> None:
    """MVP test 3 (duplicate wake x10 -> 1 wake): a wake delivered ten times with one idempotency key, some
    deliveries before the run and some after it, is one wake, one run, one effect and one receipt."""
    add_agent(pworld, "boss", ["wake.enqueue"])
    add_agent(pworld, "w", ["state.write"])
    calls: list[str] = []
    runner = runner_for(pworld, {"w": bump("counter", calls)})
    created = [pworld.enqueue_wake("boss", "w", "recount", "dup-key-1").created for _ in range(5)]
    stats = runner.run_until_quiet(max_rounds=20)
    created += [pworld.enqueue_wake("boss", "w", "recount", "dup-key-1").created for _ in range(5)]
    stats2 = runner.run_until_quiet(max_rounds=20)

    assert created == [True] + [False] * 9
    wakes = wakes_of(pworld, "w")
    assert len(wakes) == 1 and len(events_of(pworld, "wake.issued")) == 1
    assert (stats.cycles, stats2.cycles, len(calls)) == (1, 0, 1)          # one run, one decision
    assert len(events_of(pworld, "state.set", actor="w")) == 1             # one effect
    entry = pworld.get_state("counter", actor="w")
    assert (entry.version, entry.value) == (1, 1)
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert receipts[wakes[0].wake_id].outcome is Outcome.ACTED
    assert pworld.get_trace(wakes[0].wake_id, actor=GOV).commits == ["counter"]
    runner.close()


def test_mvp03_an_event_observed_by_a_restarted_controller_wakes_its_subscriber_once(pworld: World) -> None:
    """MVP test 3, controller side: the controller's wake for an event is keyed ``ctl:<world>:<seq>:<agent>``;
    a second controller replaying the same log (a duplicate delivery of every event) wakes nobody again."""
    add_agent(pworld, "w", ["state.write"])
    add_agent(pworld, "src", ["state.write"])
    pworld.subscribe("w", "feed")
    runner = runner_for(pworld, {"w": bump("counter"), "src": RuleAgent([])})
    pworld.compare_and_set_state("src", "feed", 0, "news")
    runner.run_until_quiet(max_rounds=20)
    for _ in range(3):  # the same log seen by fresh controllers (position rebuilt from SQL)
        again = runner_for(pworld, {"w": bump("counter"), "src": RuleAgent([])})
        assert again.run_until_quiet(max_rounds=20).wakes == 0
        again.close()
    wakes = wakes_of(pworld, "w")
    assert len(wakes) == 1 and wakes[0].idempotency_key.startswith("ctl:main:")
    assert pworld.get_state("counter", actor="w").value == 1
    assert_every_wake_has_one_receipt(pworld)
    runner.close()


# -- MVP 11 -----------------------------------------------------------------------------------------------

def test_mvp11_a_worker_crash_after_the_commit_never_repeats_it(pworld: World) -> None:
    """MVP test 11 (crash recovery without repeating a completed commit): the worker completes the task and
    writes its state, then dies before the ack. The wake stays leased; once the lease expires it is run
    again from the recorded decision (the agent is not asked again), the effects' operation ids return their
    stored results, and the wake ends in exactly one receipt. The task was completed once, the state written
    once."""
    add_agent(pworld, "owner", ["task.create", "task.assign"])
    add_agent(pworld, "w", ["state.write", "task.work"])
    task = pworld.create_task("owner", "compile the figures")
    pworld.assign_task("owner", task.task_id, "w")
    pworld.claim_task("w", task.task_id)  # w holds the task; the controller wakes it for the assignment
    decided: list[str] = []

    def finish(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        mine = [t for t in view.tasks if t.assignee == "w" and t.status.value == "claimed"]
        if not mine:
            return None
        decided.append(wake.wake_id)
        return act(SetState(key="figures", expected_version=0, value={"rows": 42}),
                   CompleteTask(task_id=mine[0].task_id, result={"rows": 42}))

    runner = runner_for(pworld, {"w": RuleAgent([finish]), "owner": RuleAgent([])},
                        lease_seconds=10)
    runner.crash_worker_mid_cycle()
    first = runner.run_until_quiet(max_rounds=20)
    assert first.crashes == 1
    (wake,) = wakes_of(pworld, "w")
    assert pworld.get_wake(wake.wake_id, actor=GOV).status.value == "claimed"    # leased, no receipt
    assert pworld.get_task(task.task_id, actor=GOV).status.value == "completed"  # the commit happened
    second = runner.run_until_quiet(max_rounds=50, advance_clock=True)           # lease expiry, re-run

    assert second.crashes == 0 and second.outcomes["acted"] == 1
    assert decided == [wake.wake_id]                                             # decided once, replayed
    assert pworld.get_wake(wake.wake_id, actor=GOV).attempts == 2
    assert len(events_of(pworld, "task.complete")) == 1
    assert len(events_of(pworld, "state.set", actor="w")) == 1
    entry = pworld.get_state("figures", actor="w")
    assert (entry.version, entry.value) == (1, {"rows": 42})
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert receipts[wake.wake_id].outcome is Outcome.ACTED
    assert pworld.get_trace(wake.wake_id, actor=GOV).commits == ["figures", task.task_id]
    runner.close()


# -- MVP 14 -----------------------------------------------------------------------------------------------

def test_mvp14_a_wake_storm_a_b_c_a_is_suppressed_at_the_depth_limit_with_its_reason(pworld: World) -> None:
    """MVP test 14 (wake storm A -> B -> C -> A suppressed): three agents, each following the previous one's
    output and bumping its own. A acts once; the controller wakes B (depth 0), C (1), A (2) and suppresses
    the fourth hop (depth 3) with the reason ``depth`` and its detail; no wake is issued for it."""
    names = ["a", "b", "c"]
    for name in names:
        add_agent(pworld, name, ["state.write"])
    for i, name in enumerate(names):
        pworld.subscribe(name, f"{names[i - 1]}-out")
    runner = runner_for(pworld, {n: bump(f"{n}-out") for n in names})
    pworld.compare_and_set_state("a", "a-out", 0, 1)
    stats = runner.run_until_quiet(max_rounds=50)

    wakes = wakes_of(pworld)
    assert sorted((w.payload["depth"], w.target_agent) for w in wakes) == [(0, "b"), (1, "c"), (2, "a")]
    assert len({w.payload["chain"] for w in wakes}) == 1
    suppressed = controller_decisions(pworld, "suppress")
    assert [(d["agent"], d["reason"], d["depth"], d["rule"]) for d in suppressed] == [
        ("b", "depth", 3, "wake_storm/storm_depth")]
    assert suppressed[0]["detail"] == "cascade depth 3 reached the limit of 3"
    assert (stats.suppressed, stats.cycles) == (1, 3)
    assert [pworld.get_state(f"{n}-out", actor=GOV).value for n in names] == [2, 1, 1]  # nothing ran on
    receipts = assert_every_wake_has_one_receipt(pworld)
    assert {r.outcome for r in receipts.values()} == {Outcome.ACTED}
    runner.close()


# -- MVP 15 -----------------------------------------------------------------------------------------------

def test_mvp15_an_agent_with_nothing_to_do_leaves_a_no_action_receipt(pworld: World) -> None:
    """MVP test 15 (NO_ACTION receipt exists): an agent woken by the controller (it follows a key another
    agent wrote) decides to do nothing; its wake still ends in exactly one receipt, outcome and decision
    ``no_action``, with the reason, and a trace of the run (what it was shown, no effects)."""
    add_agent(pworld, "writer", ["state.write"])
    add_agent(pworld, "watcher", ["state.write"])
    pworld.subscribe("watcher", "weather")
    quiet = RuleAgent([lambda agent, view, wake: AgentDecision(decision="no_action", reason="nothing changed")])
    runner = runner_for(pworld, {"watcher": quiet, "idle": RuleAgent([])})
    add_agent(pworld, "idle", [])
    pworld.subscribe("idle", "weather")
    pworld.compare_and_set_state("writer", "weather", 0, "sunny")
    stats = runner.run_until_quiet(max_rounds=20)

    assert stats.outcomes == {"no_action": 2}
    receipts = assert_every_wake_has_one_receipt(pworld)
    by_agent = {r.agent_id: r for r in receipts.values()}
    for agent, reason in (("watcher", "nothing changed"), ("idle", "no rule matched")):
        r = by_agent[agent]
        assert (r.decision.value, r.outcome, r.reason, r.action_refs) == ("no_action", Outcome.NO_ACTION, reason, [])
        trace = pworld.get_trace(r.wake_id or "", actor=GOV)
        assert (trace.decision, trace.commits, trace.tools) == ("no_action", [], [])
        assert "state:weather" in trace.retrieved_refs
        assert book_of(pworld).recorded_decision(r.wake_id or "") is not None
    assert events_of(pworld, "state.set", actor="watcher") == []
    runner.close()

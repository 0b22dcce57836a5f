"""Rules hot-reload in a running loop, and the human-proxy and callable adapters through the worker."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.controller import RuleFileError
from engine.protocol.adapters import AgentDecision, CallableAdapter, HumanProxy, SetState
from engine.runloop import DEFAULT_RULES, InProcessRunner
from engine.world import World
from tests.conftest import add_agent, book_of
from tests.runloop.support import relay


def test_a_bad_rule_change_keeps_the_rules_in_force_and_a_good_one_applies(pworld: World, tmp_path: Path) -> None:
    for name in ("a", "b"):
        add_agent(pworld, name, ["state.write"])
    pworld.subscribe("b", "a-out")
    runner = InProcessRunner(book_of(pworld), adapters={"b": relay("b-out")})
    runner.start()
    bad = tmp_path / "bad"
    shutil.copytree(DEFAULT_RULES, bad)
    (bad / "wake_targeting.yaml").write_text((bad / "wake_targeting.yaml").read_text().replace(
        "action: propose_wake", "action: propose_wakes", 1))
    with pytest.raises(RuleFileError, match=r"wake_targeting\.yaml:.*propose_wakes"):
        runner.reload_rules(bad)
    pworld.compare_and_set_state("a", "a-out", 0, 1)
    runner.run_until_quiet(max_rounds=20)
    assert [w.cause for w in pworld.list_wakes(actor="gov")] == ["subscriber"]  # the rules in force woke b
    quiet = tmp_path / "quiet"                      # a good change: subscribers are no longer woken
    shutil.copytree(DEFAULT_RULES, quiet)
    text = (quiet / "wake_targeting.yaml").read_text()
    start = text.index("  - name: wake_subscribers")
    end = text.index("  - name: wake_room_members")
    (quiet / "wake_targeting.yaml").write_text(text[:start] + text[end:])
    runner.reload_rules(quiet)
    pworld.clock.advance(10)  # type: ignore[attr-defined]
    pworld.compare_and_set_state("a", "a-out", 1, 2)
    runner.run_until_quiet(max_rounds=20)
    assert len(pworld.list_wakes(actor="gov")) == 1  # the second write woke nobody
    runner.close()


def test_a_human_proxy_acts_on_what_the_human_decided_and_asks_otherwise(pworld: World) -> None:
    add_agent(pworld, "human", ["state.write"])
    add_agent(pworld, "boss", ["wake.enqueue"])
    queued: list[AgentDecision] = [AgentDecision(decision="act", reason="approved by the human", effects=[
        SetState(key="approved", expected_version=0, value=True)])]
    proxy = HumanProxy(lambda agent_id: queued.pop(0) if queued else None)
    runner = InProcessRunner(book_of(pworld), adapters={"human": proxy}, controller=False)
    pworld.enqueue_wake("boss", "human", "approve the plan", "k1")
    pworld.enqueue_wake("boss", "human", "anything else?", "k2")
    stats = runner.run_until_quiet(max_rounds=10)
    assert dict(stats.outcomes) == {"acted": 1, "no_action": 1}
    receipts = sorted((r.decision.value, r.reason) for r in pworld.list_receipts(actor="gov"))
    assert receipts == [("act", "approved by the human"), ("request", "waiting for human to decide")]
    assert pworld.get_state("approved", actor="gov").value is True


def test_a_callable_adapter_gets_json_and_never_a_transcript(pworld: World) -> None:
    add_agent(pworld, "llm", ["state.write"])
    add_agent(pworld, "boss", ["wake.enqueue"])
    seen: list[dict[str, Any]] = []

    def model(context: dict[str, Any]) -> dict[str, Any]:
        seen.append(context)
        return {"decision": "act", "effects": [{"effect": "set_state", "key": "out", "expected_version": 0,
                                                "value": context["wake"]["cause"]}]}
    runner = InProcessRunner(book_of(pworld), adapters={"llm": CallableAdapter(model)}, controller=False)
    pworld.enqueue_wake("boss", "llm", "summarise", "k1")
    runner.run_until_quiet(max_rounds=10)
    assert pworld.get_state("out", actor="gov").value == "summarise"
    assert set(seen[0]) == {"agent", "view", "wake"}

"""A handoff mid-task through the real PDP: the receiver reads the continuity checkpoint (frontier, pending
actions, authority epoch, last confirmed effect) and resumes from it without redoing a done step, or
repeating an effect whose answer was lost before the handoff."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.contracts import AttemptStatus, EffectOutcome, EffectTimeout, run_action
from engine.errors import NotPermitted, PolicyDenied
from engine.policy.cerbos_adapter import CerbosPdp
from engine.world import World
from engine.world.checkpoints import step_key
from tests.conftest import add_agent, close_world, open_pdp_world
from tests.contracts.effects import FlakyMailbox

TOOLS = ["tool:send_message", "tool:label_thread", "task.create", "task.work", "handoff.create"]
STEPS: list[dict[str, Any]] = [{"id": "notify", "action": "send_message"},
         {"id": "remind", "action": "send_message", "after": ["notify"]},
         {"id": "label", "action": "label_thread", "after": ["remind"]}]
INPUTS: dict[str, dict[str, Any]] = {"notify": {"to": "carol@example.org", "body": "we start monday"},
          "remind": {"to": "carol@example.org", "body": "reminder: monday"},
          "label": {"thread": "carol", "label": "scheduled"}}


@pytest.fixture
def cworld(tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    world = open_pdp_world(f"sqlite:///{tmp_path / 'world.db'}", pdp_client, tmp_path / "artifacts")
    add_agent(world, "ann", TOOLS)
    add_agent(world, "bob", TOOLS)
    add_agent(world, "eve", TOOLS)
    yield world
    close_world(world)


class LosingMailbox(FlakyMailbox):
    """Every answer to a send is lost once ``lose`` is set (the effect still happens)."""

    def __init__(self) -> None:
        super().__init__(seed=0, lose_answer=0.0, lose_status=0.0, fail_before=0.0)
        self.lose = False

    def perform(self, action: str, key: str, input: dict[str, Any], timeout_s: float) -> EffectOutcome:
        outcome = super().perform(action, key, input, timeout_s)
        if self.lose:
            raise EffectTimeout("the answer was lost")
        return outcome

    def status(self, action: str, key: str, timeout_s: float) -> EffectOutcome | None:
        if self.lose:
            raise EffectTimeout("the status query was lost too")
        return super().status(action, key, timeout_s)


def _step(world: World, actor: str, task_id: str, step: str, mailbox: FlakyMailbox) -> AttemptStatus:
    action = next(s["action"] for s in STEPS if s["id"] == step)
    return run_action(world, actor, str(action), INPUTS[step], step_key(task_id, step), mailbox,
                      task_id=task_id, step=step).status


def test_receiver_resumes_from_the_frontier_without_redoing_a_done_step(cworld: World) -> None:
    task = cworld.create_task("ann", "schedule carol", constraints={"steps": STEPS})
    cworld.claim_task("ann", task.task_id)
    mailbox = LosingMailbox()
    assert _step(cworld, "ann", task.task_id, "notify", mailbox) is AttemptStatus.DONE
    mailbox.lose = True  # the reminder is sent, but ann never learns it: then ann hands the task over
    assert _step(cworld, "ann", task.task_id, "remind", mailbox) is AttemptStatus.PENDING
    handoff = cworld.create_handoff("ann", "bob", task.task_id, "finish scheduling carol")

    checkpoint = cworld.handoff_checkpoint("bob", handoff.handoff_id)
    assert checkpoint.frontier.model_dump() == {"done": ["notify"], "running": ["remind"], "failed": [],
                                                "ready": [], "blocked": ["label"]}
    assert checkpoint.pending_actions == [step_key(task.task_id, "remind")]
    assert checkpoint.last_confirmed_effect is not None
    assert checkpoint.last_confirmed_effect.step == "notify"
    assert checkpoint.authority_epoch is not None and "capabilities" in checkpoint.authority_scope

    mailbox.lose = False
    cworld.accept_handoff("bob", handoff.handoff_id)
    resumed = cworld.handoff_checkpoint("bob", handoff.handoff_id)
    for step in [*resumed.frontier.done, *resumed.frontier.running]:  # what a receiver does: resume each
        assert _step(cworld, "bob", task.task_id, step, mailbox) is AttemptStatus.DONE
    after = cworld.task_checkpoint("bob", task.task_id)
    assert after.frontier.ready == ["label"]
    assert _step(cworld, "bob", task.task_id, "label", mailbox) is AttemptStatus.DONE

    assert dict(mailbox.effects) == {step_key(task.task_id, s): 1 for s in ("notify", "remind", "label")}
    final = cworld.task_checkpoint("bob", task.task_id)
    assert final.frontier.done == ["notify", "remind", "label"] and final.pending_actions == []


def test_only_the_parties_read_a_handoffs_checkpoint(cworld: World) -> None:
    task = cworld.create_task("ann", "private work", constraints={"steps": STEPS})
    cworld.claim_task("ann", task.task_id)
    handoff = cworld.create_handoff("ann", "bob", task.task_id, "take over")
    assert cworld.handoff_checkpoint("ann", handoff.handoff_id).frontier.ready == ["notify"]
    with pytest.raises((NotPermitted, PolicyDenied)):
        cworld.handoff_checkpoint("eve", handoff.handoff_id)
    with pytest.raises((NotPermitted, PolicyDenied)):
        cworld.task_checkpoint("eve", task.task_id)
    assert cworld.task_checkpoint("gov", task.task_id).holder == "ann"


def test_a_stranger_may_not_continue_a_step(cworld: World) -> None:
    task = cworld.create_task("ann", "steps", constraints={"steps": STEPS})
    cworld.claim_task("ann", task.task_id)
    mailbox = LosingMailbox()
    mailbox.lose = True
    _step(cworld, "ann", task.task_id, "notify", mailbox)
    with pytest.raises(NotPermitted):
        _step(cworld, "eve", task.task_id, "notify", mailbox)
    assert mailbox.effects[step_key(task.task_id, "notify")] == 1

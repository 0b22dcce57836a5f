"""The behaviour library: rule-based agents (:class:`~engine.protocol.adapters.RuleAgent`) for scenarios.

An agent decides from what the protocol shows it (its agent row, its projection of the world, the wake),
never from a transcript; the worker carries its effects out through the PDP and the gateway. Everything
durable an agent knows is read from the world (progress of a task is the state entry
``progress:<task>``, a claim already made is ``claimed:<term>:<agent>``, an answer already committed is
``answered:<room>:<agent>``), so a new conversation or a new model continues where the old one stopped.

| behaviour              | what it does on a wake                                                           |
| ---------------------- | -------------------------------------------------------------------------------- |
| `worker`               | answers in a conflict room it sits in (any room, with `answer`); joins `join`;     |
|                        | stores its `note` (private) and proposes it (`note.propose`); else advances its   |
|                        | task by                                                                           |
|                        | `steps_per_wake` steps (compare-and-set on the progress entry), posts a delta     |
|                        | (relevance 0.9) when `forward_to` is set, hands the task over after `handoff`     |
|                        | steps, completes it on the last step and then asserts its `claim`; with           |
|                        | `follows`, never past the committed step of that task (nothing new: no action);   |
|                        | with `artifact`, each step also registers the task's artifact, or revises the     |
|                        | head version its view shows (found in the registry, never remembered)             |
| `reviewer`             | reviews a candidate memory routed to it first: promotes it (``promote_memory``,   |
|                        | on the version its view shows); asserts its `claim` once a task it follows has   |
|                        | progress; answers in a room                                                       |
| `disagreeing_reviewer` | the same, but rejects a routed candidate (``reject_memory``, with the reason) and |
|                        | claims a value that contradicts (its `claim.value`)                               |
| `flaky`                | a worker whose every `fail_every`-th wake acts on a stale read (a conflict)       |
| `human_governor`       | resolves the conflict of a conflict room once every member has answered         |

The model name (``AgentSpec.model``) is recorded with each decision's reason: a model replacement swaps
the adapter; the world, not the model, carries the work.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.models.agents import Agent
from engine.models.receipts import Decision
from engine.models.tasks import TaskStatus
from engine.models.wakes import Wake
from engine.protocol.adapters import (
    EFFECTS,
    AcceptHandoff,
    AgentAdapter,
    AgentDecision,
    AppendEvent,
    CommitAnswer,
    CompleteTask,
    Effect,
    Handoff,
    JoinRoom,
    ProposeMemory,
    RegisterArtifact,
    ReviseArtifact,
    RuleAgent,
    SetState,
    StoreMemory,
)
from engine.runloop.worker import WakeCheck
from engine.world.projection import WorldView
from simulations.scenario import AgentSpec, ArtifactSpec, Behaviour, BehaviourParams, CheckSpec, ClaimSpec

CONFLICT_ROOM_PREFIX = "conflict-"
DELTA_RELEVANCE = 0.9


def progress_key(task_id: str) -> str:
    return f"progress:{task_id}"


def claimed_key(term: str, agent_id: str) -> str:
    return f"claimed:{term}:{agent_id}"


def answered_key(room_id: str, agent_id: str) -> str:
    return f"answered:{room_id}:{agent_id}"


@dataclass
class Conversation:
    """What an agent's conversation holds between wakes: only a count of wakes seen (for ``flaky``)
    and the model it runs on. A conversation replacement starts a new one."""

    model: str
    wakes_seen: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TaskPlan:
    """How many steps each task needs (from the scenario); unknown tasks take one step."""

    steps: dict[str, int]

    def of(self, task_id: str) -> int:
        return self.steps.get(task_id, 1)


def _state(view: WorldView, key: str) -> tuple[int, dict[str, object] | None]:
    for entry in view.state:
        if entry.key == key:
            value = entry.value if isinstance(entry.value, dict) else None
            return entry.version, value
    return 0, None


def _step(view: WorldView, task_id: str) -> tuple[int, int]:
    """The task's committed step and the progress entry's version (0, 0 when it has none)."""
    version, value = _state(view, progress_key(task_id))
    step = value.get("step") if value else 0
    return (step if isinstance(step, int) else 0), version


def _my_task(agent: Agent, view: WorldView, wake: Wake) -> str | None:
    wanted = wake.payload.get("task")
    live = [t for t in view.tasks if t.status not in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.ABORTED)]
    if isinstance(wanted, str):
        return wanted if any(t.task_id == wanted for t in live) else None
    mine = sorted(t.task_id for t in live if t.assignee == agent.agent_id
                  or (t.assignee is None and t.owner_agent == agent.agent_id))
    return mine[0] if mine else None


def _conflict_room(agent: Agent, view: WorldView, *, any_room: bool = False) -> str | None:
    """An open room I sit in and have not answered in: a conflict room, or (``any_room``: I have an answer
    to give) any room."""
    rooms = sorted(r.room_id for r in view.rooms if (any_room or r.room_id.startswith(CONFLICT_ROOM_PREFIX))
                   and r.status.value == "open")
    for room_id in rooms:
        version, _ = _state(view, answered_key(room_id, agent.agent_id))
        if version == 0:
            return room_id
    return None


def _decided(effects: list[Effect], reason: str, convo: Conversation, decision: Decision = Decision.ACT
             ) -> AgentDecision:
    convo.notes.append(reason)  # the conversation's transcript: what this conversation decided, in order
    return AgentDecision(decision=decision, effects=effects, reason=f"[{convo.model}] {reason}")


# -- rules -------------------------------------------------------------------------------------------

Rule = Callable[[Agent, WorldView, Wake], AgentDecision | None]


def answer_in_room(params: BehaviourParams, convo: Conversation) -> Rule:
    """In an open conflict room without my answer: commit it blind (and remember that I did)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        room_id = _conflict_room(agent, view, any_room=params.answer is not None)
        if room_id is None:
            return None
        content = params.answer or (f"{params.claim.term}={params.claim.value}" if params.claim else "no view")
        # a disagreeing reviewer's answer is the value it claimed (read back from the world)
        claimed = [e.value for e in view.state if e.key.startswith("claimed:") and e.key.endswith(f":{agent.agent_id}")]
        if params.answer is None and claimed and isinstance(claimed[0], dict):
            content = f"{params.claim.term if params.claim else 'term'}={claimed[0].get('value')}"
        effects: list[Effect] = [
            CommitAnswer(room_id=room_id, content=content),
            SetState(key=answered_key(room_id, agent.agent_id), expected_version=0, value={"answer": content})]
        return _decided(effects, f"blind answer in {room_id}", convo, Decision.JOIN)
    return rule


def advance_task(params: BehaviourParams, plan: TaskPlan, convo: Conversation, *, stale: bool = False) -> Rule:
    """Advance my task from its committed step (``stale``: from one step behind, as a flaky agent does)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        task_id = _my_task(agent, view, wake)
        if task_id is None:
            return None
        step, version = _step(view, task_id)
        total = plan.of(task_id)
        bound = _step(view, params.follows)[0] if params.follows is not None else total
        if step >= min(total, bound):
            return None  # done, or (following another task) nothing new to go on
        if stale and version > 0:
            version -= 1
        new = min(total, bound, step + params.steps_per_wake)
        effects: list[Effect] = [SetState(key=progress_key(task_id), expected_version=version,
                                          value={"step": new, "of": total, "by": agent.agent_id})]
        reason = f"{task_id}: step {step} -> {new} of {total}"
        if params.artifact is not None:
            effect, written = artifact_effect(view, params.artifact, agent.agent_id, task_id, new, total)
            effects.append(effect)
            reason += f"; {written}"
        if params.forward_to is not None:
            effects.append(AppendEvent(event_type="delta.posted", subject_kind="task", subject_id=task_id,
                                       payload={"relevance": DELTA_RELEVANCE, "step": new, "to": params.forward_to}))
        handoff = params.handoff
        if handoff is not None and step < handoff.after_steps <= new < total:
            effects.append(Handoff(target_agent=handoff.to, task_id=task_id,
                                   goal=handoff_context(handoff.representation, convo, task_id, new, total)))
        elif new == total:
            effects.append(CompleteTask(task_id=task_id, result={"steps": total}))
            if params.claim is not None and _state(view, claimed_key(params.claim.term, agent.agent_id))[0] == 0:
                effects += _claim_effects(agent.agent_id, params.claim)
        return _decided(effects, reason, convo)
    return rule


def artifact_effect(view: WorldView, spec: ArtifactSpec, agent_id: str, task_id: str, step: int, total: int
                    ) -> tuple[Effect, str]:
    """The step's write of the task's ``spec.type`` artifact, and what it does (for the decision's reason):
    register it for the task when the view's registry entries show none, else revise the head version the
    view shows (``expected_version``: a version committed since is a conflict, never a lost update)."""
    content = f"{spec.type} of {task_id}: step {step} of {total}, by {agent_id}"
    found = sorted((a for a in view.artifacts if a.task_id == task_id and a.artifact_type == spec.type
                    and a.status.value == "active"), key=lambda a: a.artifact_id)
    if not found:
        return RegisterArtifact(artifact_type=spec.type, content=content, task_id=task_id), f"registers {spec.type}"
    head = found[0]
    return (ReviseArtifact(artifact_id=head.artifact_id, content=content, expected_version=head.version),
            f"revises {head.artifact_id} v{head.version} -> v{head.version + 1}")


def handoff_context(representation: str, convo: Conversation, task_id: str, step: int, total: int) -> str:
    """What the receiving agent is shown about the work so far (H2: the handoff's representation).

    ``transcript``: every decision of the sender's conversation; ``summary``: the last three and a count;
    ``structured``: the task's state as JSON; ``pointers``: where the state is in the shared world."""
    if representation == "transcript":
        return "\n".join([f"continue {task_id}; transcript:", *convo.notes, f"now at step {step} of {total}"])
    if representation == "summary":
        return (f"continue {task_id}: {len(convo.notes)} decisions so far, at step {step} of {total}; last: "
                + "; ".join(convo.notes[-3:]))
    if representation == "structured":
        return json.dumps({"task": task_id, "step": step, "of": total, "state": progress_key(task_id)},
                          sort_keys=True)
    return f"continue {task_id}; see {progress_key(task_id)}"


def _claim_effects(agent_id: str, claim: ClaimSpec) -> list[Effect]:
    """The claim as an event the controller reads, and its record in the world (so it is made once)."""
    return [AppendEvent(event_type="claim.asserted", subject_kind="world", subject_id=claim.term,
                        payload={"term": claim.term, "claim": f"{agent_id}:{claim.term}", "value": claim.value}),
            SetState(key=claimed_key(claim.term, agent_id), expected_version=0, value={"value": claim.value})]


def assert_claim(params: BehaviourParams, convo: Conversation, *, needs_progress: bool,
                 contradict: bool = False) -> Rule:
    """Assert my claim once (the ``claimed:<term>:<me>`` entry is the record that I did); ``contradict``
    asserts the opposite of the configured value (``not <value>``)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        spec = params.claim
        if spec is None or _state(view, claimed_key(spec.term, agent.agent_id))[0] > 0:
            return None
        if needs_progress and not any(e.key.startswith("progress:") for e in view.state):
            return None
        claim = ClaimSpec(term=spec.term, value=f"not {spec.value}") if contradict else spec
        effects = _claim_effects(agent.agent_id, claim)
        return _decided(effects, f"claims {claim.term}={claim.value}", convo, Decision.SHARE)
    return rule


def join_room(params: BehaviourParams, convo: Conversation) -> Rule:
    """Join ``params.join`` if I do not sit in it yet (my authority is unchanged by the join)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        room = params.join
        if room is None or any(r.room_id == room for r in view.rooms):
            return None
        return _decided([JoinRoom(room_id=room)], f"joins {room}", convo, Decision.JOIN)
    return rule


def keep_note(params: BehaviourParams, convo: Conversation) -> Rule:
    """Store ``params.note`` as a private memory (once: my own memory with that content is the record); with
    ``propose``, propose it for review on a later wake (it becomes a candidate, not a shared fact)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        note = params.note
        if note is None:
            return None
        mine = [m for m in (*view.working_memory, *view.shared_facts)
                if m.owner == agent.agent_id and m.content == note.content]
        if not mine:
            return _decided([StoreMemory(content=note.content, epistemic_type=note.epistemic_type)],
                            "stores a private note", convo)
        if note.propose and mine[0].status.value == "private":
            return _decided([ProposeMemory(memory_id=mine[0].memory_id)], f"proposes {mine[0].memory_id}", convo,
                            Decision.SHARE)
        return None
    return rule


def accept_handoff(convo: Conversation) -> Rule:
    """A handoff waiting for me is accepted first (the task becomes mine; its state is in the world)."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        waiting = sorted(h.handoff_id for h in view.handoffs
                         if h.target_agent == agent.agent_id and h.status.value == "pending")
        if not waiting:
            return None
        return _decided([AcceptHandoff(handoff_id=waiting[0])], f"accepts handoff {waiting[0]}", convo,
                        Decision.HANDOFF)
    return rule


def resolve_conflict(convo: Conversation) -> Rule:
    """A conflict room whose answers (two or more ``answered:<room>:<agent>`` records) are all in is resolved:
    the term is the room's suffix; the decision is the first answer in order (a human's call, scripted).
    A governor outside the room sees the records, not the room itself."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        answers: dict[str, list[str]] = {}
        for e in view.state:
            parts = e.key.split(":")
            if len(parts) == 3 and parts[0] == "answered" and parts[1].startswith(CONFLICT_ROOM_PREFIX):
                value = e.value.get("answer") if isinstance(e.value, dict) else e.value
                answers.setdefault(parts[1], []).append(str(value))
        for room_id, given in sorted(answers.items()):
            term = room_id[len(CONFLICT_ROOM_PREFIX):]
            if len(given) < 2 or _state(view, f"resolved:{term}")[0] > 0:
                continue
            chosen = sorted(given)[0]
            effects: list[Effect] = [
                SetState(key=f"resolved:{term}", expected_version=0, value={"answer": chosen}),
                AppendEvent(event_type="conflict.resolved", subject_kind="room", subject_id=room_id,
                            payload={"term": term, "decision": chosen})]
            return _decided(effects, f"resolved {term}", convo, Decision.VERIFY)
        return None
    return rule


REJECTION_REASON = "contradicts what I know; rejected in review"


def review_candidate(convo: Conversation, *, promote: bool) -> Rule:
    """A candidate memory in my view that was routed to me, not my own: promote it or reject it with
    :data:`REJECTION_REASON`, on the version my view shows (a memory changed since is a conflict, never a
    lost review). Routed to me: its ``reviewer`` is me (the controller's ``route_review`` records the
    reviewer it routes a candidate to on the memory, in its step), or the candidate names no reviewer and
    the wake names it (``payload.memory``). The PDP shows candidates only to reviewers. One verdict per
    wake; the rest wait for the next. A candidate another reviewer holds is left alone, and so is one
    routed to nobody: a review wake alone never makes a candidate mine."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        woken_for = wake.payload.get("memory")
        routed = sorted((m for m in (*view.working_memory, *view.shared_facts)
                         if m.status.value == "candidate" and m.owner != agent.agent_id
                         and (m.reviewer == agent.agent_id or (m.reviewer is None and m.memory_id == woken_for))),
                        key=lambda m: m.memory_id)
        if not routed:
            return None
        memory = routed[0]
        if promote:
            effect: Effect = EFFECTS["promote_memory"].model_validate(
                {"memory_id": memory.memory_id, "expected_version": memory.version})
            return _decided([effect], f"promotes {memory.memory_id}", convo, Decision.VERIFY)
        effect = EFFECTS["reject_memory"].model_validate(
            {"memory_id": memory.memory_id, "reason": REJECTION_REASON, "expected_version": memory.version})
        return _decided([effect], f"rejects {memory.memory_id}", convo, Decision.VERIFY)
    return rule


class Flaky:
    """Counts wakes in its conversation; every ``fail_every``-th one acts on a stale read."""

    def __init__(self, inner: RuleAgent, stale: RuleAgent, fail_every: int, convo: Conversation) -> None:
        self.inner = inner
        self.stale = stale
        self.fail_every = fail_every
        self.convo = convo

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        self.convo.wakes_seen += 1
        if self.fail_every and self.convo.wakes_seen % self.fail_every == 0:
            return self.stale.run(agent_state, world_view, event)
        return self.inner.run(agent_state, world_view, event)


class Checked:
    """An adapter with the lightweight check of ``spec`` (:class:`~simulations.scenario.CheckSpec`): a full run
    only for a wake whose trigger (``payload.trigger``, what the controller's rules say triggered it) has one
    of its subjects or types; a wake without a trigger is always worth a full run (nothing to judge by)."""

    def __init__(self, inner: AgentAdapter, spec: CheckSpec) -> None:
        self.inner = inner
        self.spec = spec

    def run(self, agent_state: Agent, world_view: WorldView, event: Wake) -> AgentDecision:
        return self.inner.run(agent_state, world_view, event)

    def check(self, agent_state: Agent, event: Wake) -> WakeCheck:
        trigger = event.payload.get("trigger")
        if not isinstance(trigger, dict):
            return WakeCheck(True, "no trigger to judge by")
        subject, kind = str(trigger.get("subject_id", "")), str(trigger.get("type", ""))
        if subject in self.spec.subjects or kind in self.spec.types:
            return WakeCheck(True, f"{kind} on {subject} is mine to act on")
        return WakeCheck(False, f"{kind} on {subject} is not mine to act on")


def build_behaviour(spec: AgentSpec, plan: TaskPlan, *, behaviour: Behaviour | str | None = None,
                    model: str | None = None) -> AgentAdapter:
    """A fresh adapter (a new conversation) for ``spec``, optionally with another behaviour or model; with
    the lightweight check its ``params.check`` describes (:class:`Checked`)."""
    adapter = _behaviour(spec, plan, behaviour=behaviour, model=model)
    return Checked(adapter, spec.params.check) if spec.params.check is not None else adapter


def _behaviour(spec: AgentSpec, plan: TaskPlan, *, behaviour: Behaviour | str | None, model: str | None
               ) -> AgentAdapter:
    kind = behaviour or spec.behaviour
    p = spec.params
    convo = Conversation(model=model or spec.model)
    if kind in ("worker", "flaky"):
        rules: list[Rule] = [accept_handoff(convo), answer_in_room(p, convo), join_room(p, convo), keep_note(p, convo),
                             advance_task(p, plan, convo), assert_claim(p, convo, needs_progress=True)]
        agent = RuleAgent(rules)
        if kind == "flaky":
            stale = RuleAgent([accept_handoff(convo), answer_in_room(p, convo),
                               advance_task(p, plan, convo, stale=True)])
            return Flaky(agent, stale, p.fail_every or 2, convo)
        return agent
    if kind in ("reviewer", "disagreeing_reviewer"):
        agrees = kind == "reviewer"
        return RuleAgent([review_candidate(convo, promote=agrees), answer_in_room(p, convo), join_room(p, convo),
                          keep_note(p, convo), assert_claim(p, convo, needs_progress=True, contradict=not agrees)])
    return RuleAgent([resolve_conflict(convo)])


__all__ = ["CONFLICT_ROOM_PREFIX", "REJECTION_REASON", "Checked", "Conversation", "TaskPlan", "answered_key",
           "artifact_effect", "build_behaviour", "claimed_key", "progress_key", "review_candidate"]

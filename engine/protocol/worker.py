"""A worker runs the protocol for due wakes: claim with a lease, rehydrate, observe, decide, act, receipt.

Effects go through the World (PDP, then gateway) with operation ids derived from the wake id and the
effect's position, so a worker that dies after an effect committed and before the ack never repeats it:
the wake is claimed again once its lease expires, the same operation ids replay their stored results, and
the wake ends in exactly one receipt with a typed outcome (acted, no_action, denied, conflict, failed).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConflictError, PMWError, PolicyDenied, PolicyUnavailable
from engine.models.agents import Agent
from engine.models.receipts import Decision, Outcome, Receipt
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentAdapter, AgentDecision, CompleteTask, Effect, Handoff, SetState
from engine.world import Cause, World

DEFAULT_LEASE_S = 30.0


@dataclass(frozen=True)
class Cycle:
    """One wake carried through the protocol."""

    wake: Wake
    decision: AgentDecision | None
    receipt: Receipt


class Worker:
    """Runs wakes for the agents it has adapters for. ``worker_id`` names its leases."""

    def __init__(self, world: World, worker_id: str, adapters: dict[str, AgentAdapter], *,
                 lease_seconds: float = DEFAULT_LEASE_S) -> None:
        self.world = world
        self.worker_id = worker_id
        self.adapters = adapters
        self.lease_seconds = lease_seconds

    def run_once(self, agent_id: str | None = None) -> Cycle | None:
        """Claim and run the most urgent due wake (of ``agent_id``, if given); ``None`` if none is due."""
        wake = self.world.claim_wake(self.worker_id, agent_id=agent_id, lease_seconds=self.lease_seconds)
        if wake is None:
            return None
        return self.run_wake(wake)

    def run_until_idle(self, max_cycles: int = 1000) -> list[Cycle]:
        """Run due wakes until none is due (bounded)."""
        cycles = []
        for _ in range(max_cycles):
            cycle = self.run_once()
            if cycle is None:
                break
            cycles.append(cycle)
        return cycles

    def run_wake(self, wake: Wake) -> Cycle:
        adapter = self.adapters.get(wake.target_agent)
        if adapter is None:
            return self._finish(wake, None, Outcome.FAILED, f"no adapter for {wake.target_agent}")
        try:
            agent = self.world.get_agent(wake.target_agent, actor=wake.target_agent)  # rehydrate, re-checked
            view = self.world.project_world(wake.target_agent)                        # observe
        except PolicyDenied as exc:
            return self._finish(wake, None, Outcome.DENIED, exc.message)
        recorded = self.world.recorded_decision(wake.wake_id)  # a retried wake replays its decision
        decided = (AgentDecision.model_validate(recorded.decision) if recorded is not None
                   else adapter.run(agent, view, wake))                                # decide
        self.world.record_decision(self.worker_id, wake.wake_id, agent.agent_id, decided.model_dump(mode="json"))
        return self._act(wake, agent, decided)

    def _act(self, wake: Wake, agent: Agent, decided: AgentDecision) -> Cycle:
        if decided.decision is Decision.NO_ACTION or not decided.effects:
            return self._finish(wake, decided, Outcome.NO_ACTION, decided.reason)
        refs: list[str] = []
        for index, effect in enumerate(decided.effects):
            try:
                refs.append(self._apply(agent.agent_id, effect, f"{wake.wake_id}:{index}",
                                        Cause(causation_id=wake.cause_event_id, correlation_id=wake.wake_id)))
            except PolicyDenied as exc:
                return self._finish(wake, decided, Outcome.DENIED, exc.message, refs)
            except ConflictError as exc:
                return self._finish(wake, decided, Outcome.CONFLICT, exc.message, refs)
            except PolicyUnavailable:
                raise  # fail closed: the wake stays leased and is retried after the lease
            except PMWError as exc:
                return self._finish(wake, decided, Outcome.FAILED, exc.message, refs)
        return self._finish(wake, decided, Outcome.ACTED, decided.reason, refs)

    def _apply(self, actor: str, effect: Effect, op_id: str, cause: Cause) -> str:
        w = self.world
        if isinstance(effect, SetState):
            return w.compare_and_set_state(actor, effect.key, effect.expected_version, effect.value, op_id=op_id,
                                           cause=cause).key
        if isinstance(effect, CompleteTask):
            return w.complete_task(actor, effect.task_id, effect.result, op_id=op_id, cause=cause).task_id
        if isinstance(effect, Handoff):
            return w.create_handoff(actor, effect.target_agent, effect.task_id, effect.goal, op_id=op_id,
                                    cause=cause).handoff_id
        return w.store_memory(actor, effect.content, effect.epistemic_type, op_id=op_id, cause=cause).memory_id

    def _finish(self, wake: Wake, decided: AgentDecision | None, outcome: Outcome, reason: str | None,
                refs: list[str] | None = None) -> Cycle:
        receipt = self.world.ack_wake(
            self.worker_id, wake.wake_id, (decided.decision if decided else Decision.NO_ACTION).value,
            outcome=outcome.value, reason=reason, action_refs=refs or [], op_id=f"{wake.wake_id}:ack",
            observed_state_version=wake.base_state_version)
        return Cycle(wake=wake, decision=decided, receipt=receipt)


__all__ = ["Cycle", "Worker"]

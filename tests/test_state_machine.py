"""A hypothesis state machine against a small reference model of the gateway's rules.

Random interleavings of fresh commits, stale commits, duplicate operation ids (same and different
requests) and task lifecycle transitions. Invariants after every step: no lost update (the store equals
the model), versions advance by exactly one per applied write, ``fold(events) == state``, a duplicate
never applies twice, and an illegal transition is refused and changes nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from engine.errors import (
    AlreadyExists,
    IllegalTransition,
    NotFound,
    NotPermitted,
    OperationConflict,
    PMWError,
    VersionConflict,
)
from engine.policy.enforcement import LocalScopeRules
from engine.sources import ManualClock, SeededIds
from engine.world.book import open_world
from tests.hypothesis_budget import examples

KEYS = st.sampled_from(["k1", "k2", "k3"])
OPS = st.sampled_from([f"op-{i}" for i in range(6)])
AGENTS = st.sampled_from(["a", "b"])
ACTIONS = st.sampled_from(["claim", "complete", "release", "abort"])

# The task lifecycle as the model knows it: action -> (allowed from, to)
TASK_MODEL = {"claim": ({"open"}, "claimed"), "complete": ({"claimed"}, "completed"),
              "release": ({"claimed"}, "open"), "abort": ({"open", "claimed"}, "aborted")}


class GatewayMachine(RuleBasedStateMachine):
    tasks = Bundle("tasks")

    @initialize()
    def open_world(self) -> None:
        self.book = open_world("sqlite://", policy=LocalScopeRules(), clock=ManualClock(), ids=SeededIds(0))
        self.world = self.book.world
        for agent in ("a", "b"):
            self.world.register_agent(agent, agent, "worker", f"t-{agent}")
        self.state: dict[str, tuple[int, Any]] = {}
        self.ledger: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self.task_model: dict[str, dict[str, Any]] = {}
        self.applied = 2  # the two registrations

    def teardown(self) -> None:
        self.book.close()

    def _expect_error(self, request: tuple[Any, ...], op_id: str | None) -> type[PMWError] | None:
        """The error the model predicts for a duplicate op id, or None if the op id is fresh."""
        if op_id is not None and op_id in self.ledger:
            return None if self.ledger[op_id][0] == request else OperationConflict
        return None

    @rule(key=KEYS, stale=st.booleans(), value=st.integers(-5, 5), op_id=st.none() | OPS,
          agent=AGENTS)
    def compare_and_set(self, key: str, stale: bool, value: int, op_id: str | None, agent: str) -> None:
        current = self.state.get(key, (0, None))[0]
        expected = current + 1 if stale else current
        request = ("cas", agent, key, expected, value)
        duplicate = op_id is not None and op_id in self.ledger
        try:
            result = self.world.compare_and_set_state(agent, key, expected, value, op_id=op_id)
        except OperationConflict:
            assert duplicate and self.ledger[op_id][0] != request  # type: ignore[index]
            return
        except (VersionConflict, NotFound, AlreadyExists) as exc:
            assert not duplicate and stale, f"fresh write refused: {exc!r}"
            if isinstance(exc, VersionConflict):
                assert exc.current == current
            return
        if duplicate:
            assert self.ledger[op_id][0] == request  # type: ignore[index]
            assert result.model_dump() == self.ledger[op_id][1]  # type: ignore[index]
            return
        assert not stale
        assert result.version == current + 1
        self.state[key] = (result.version, value)
        self.applied += 1
        if op_id is not None:
            self.ledger[op_id] = (request, result.model_dump())

    @rule(target=tasks, agent=AGENTS)
    def create_task(self, agent: str) -> str:
        task = self.world.create_task(agent, "work")
        self.task_model[task.task_id] = {"status": "open", "assignee": None, "version": 1, "owner": agent}
        self.applied += 1
        return task.task_id

    @rule(task_id=tasks, action=ACTIONS, agent=AGENTS)
    def transition(self, task_id: str, action: str, agent: str) -> None:
        model = self.task_model[task_id]
        sources, target = TASK_MODEL[action]
        legal = model["status"] in sources
        owner_ok = {"claim": True, "complete": model["assignee"] == agent,
                    "release": agent in (model["assignee"], model["owner"]),
                    "abort": agent == model["owner"]}[action]
        image = self.book.state_image()
        call = {"claim": lambda: self.world.claim_task(agent, task_id),
                "complete": lambda: self.world.complete_task(agent, task_id),
                "release": lambda: self.world.release_task(agent, task_id),
                "abort": lambda: self.world.abort_task(agent, task_id, "stop")}[action]
        try:
            task = call()
        except (IllegalTransition, NotPermitted) as exc:
            assert self.book.state_image() == image, "a refused transition changed the state"
            # the state machine is checked first, then who may act
            assert not legal if isinstance(exc, IllegalTransition) else (legal and not owner_ok)
            return
        assert legal and owner_ok
        assert task.version == model["version"] + 1
        model.update(status=target, version=task.version,
                     assignee=agent if action == "claim" else None if action == "release" else model["assignee"])
        self.applied += 1

    @invariant()
    def store_matches_model(self) -> None:
        for key, (version, value) in self.state.items():
            entry = self.world.get_state(key)
            assert (entry.version, entry.value) == (version, value), "lost or phantom update"
        for task_id, model in self.task_model.items():
            task = self.world.get_task(task_id)
            assert (task.status.value, task.version) == (model["status"], model["version"])

    @invariant()
    def every_applied_write_is_one_event(self) -> None:
        assert len(self.world.events(limit=100_000)) == self.applied

    @invariant()
    def log_folds_to_state(self) -> None:
        assert self.book.rebuild_state(from_snapshot=False) == self.book.state_image()


# CI draws 25 walks of 30 steps (every invariant after every step); HYPOTHESIS_PROFILE=thorough the 60 it drew
# before the suite was cut to CI's time limit (tests/hypothesis_budget.py)
GatewayMachine.TestCase.settings = settings(max_examples=examples(ci=25, thorough=60), stateful_step_count=30,
                                            deadline=None, suppress_health_check=[HealthCheck.too_slow])
test_gateway_rules = GatewayMachine.TestCase

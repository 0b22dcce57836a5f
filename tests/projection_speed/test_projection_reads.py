"""The projection's cheaper reads answer exactly what the plain ones did (issue 12 item 1(b), issue 15 scale).

- ``trusted(Model)(row)``, how the projection builds the rows it keeps, equals ``Model.model_validate(row)``
  field for field and type for type (a ``StrEnum`` member, not the string it equals) for every row of every
  kind a view shows, on SQLite and PostgreSQL; a row that does not fit the model fails as validation does.
- A plan's SQL bound (``plan_clause(..., bound=True)`` with ``plan_binding``'s values) selects the same rows as
  the plan's literal SQL, for random plan trees; plans that differ only by their values share one statement,
  so the projection's compiled SQL does not grow with the number of agents.
- One projection is one read transaction (one ``BEGIN``, none of the query builder's), and
  ``Reader.snapshot`` is one consistent view: a write committed meanwhile is not seen inside it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from engine.models.agents import Agent
from engine.models.artifacts import Artifact
from engine.models.handoffs import Handoff
from engine.models.memory import Memory
from engine.models.rooms import Room
from engine.models.state import StateEntry
from engine.models.tasks import Task
from engine.models.trusted import trusted
from engine.policy.enforcement import PdpAuthorizer
from engine.policy.model import PlanExpression, PlanFilter, PlanValue, PlanVariable
from engine.sources import ManualClock, SeededIds
from engine.world import World
from engine.world.book import RuntimeBook
from engine.world.projection import WorldView
from store import Store
from store.plan_sql import UntranslatablePlan, plan_binding, plan_clause
from tests.answers.test_projection_equivalence import AGENTS, _build, _busy_steps, reference_view
from tests.conftest import add_agent, close_world, open_pdp_world
from tests.hypothesis_budget import examples
from tests.pg_cluster import PgCluster

KINDS: dict[str, type[BaseModel]] = {"tasks": Task, "memory": Memory, "state_entries": StateEntry,
                                     "handoffs": Handoff, "rooms": Room, "artifacts": Artifact, "agents": Agent}


def _same(a: Any, b: Any, where: str) -> None:
    """``a`` and ``b`` equal and of the same type, all the way down."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, BaseModel):
        assert a.model_fields_set == b.model_fields_set, where
        for name in type(a).model_fields:
            _same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


@pytest.fixture(scope="module")
def busy(pdp_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The equivalence test's fixed busy world (every kind in every status) on a SQLite file."""
    root = tmp_path_factory.mktemp("projection-speed")
    clock = ManualClock()
    w = open_pdp_world(f"sqlite:///{root / 'w.db'}", pdp_client, root / "artifacts", clock=clock)
    _build(w, clock, _busy_steps())
    yield w
    close_world(w)


def _check_trusted(w: World) -> int:
    seen = 0
    for table, model in KINDS.items():
        rows = w._store.read.rows(table)
        assert rows, table
        build = trusted(model)
        assert build is not model.model_validate, f"{model.__name__} should be built, not validated"
        for row in rows:
            _same(build(dict(row)), model.model_validate(row), f"{table}:{row}")
            seen += 1
    return seen


def test_trusted_rows_equal_validated_ones_type_for_type_on_sqlite(busy: World) -> None:
    assert _check_trusted(busy) > 50


def test_trusted_rows_equal_validated_ones_on_postgresql(pg_cluster: PgCluster, pdp_client: Any,
                                                         tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_pdp_world(pg_cluster.create_database(), pdp_client, tmp_path / "artifacts", clock=clock)
    try:
        _build(w, clock, _busy_steps(count=140))
        assert _check_trusted(w) > 30
    finally:
        close_world(w)


def test_a_row_that_does_not_fit_fails_as_validation_does(busy: World) -> None:
    row = busy._store.read.rows("tasks")[0]
    build = trusted(Task)
    for bad in ({**row, "status": "teleported"}, {**row, "extra": 1}, {k: v for k, v in row.items() if k != "goal"},
                {**row, "version": "seven"}):
        with pytest.raises(ValidationError):
            Task.model_validate(bad)
        with pytest.raises(ValidationError):
            build(bad)
    mem = busy._store.read.rows("memory")[0]
    built = trusted(Memory)({**mem, "confidence": 1})  # an integer where a float is: a float, as validated
    assert type(built.confidence) is float and built == Memory.model_validate({**mem, "confidence": 1})
    assert trusted(WorldView) == WorldView.model_validate  # nested models: always validated


# -- plans bound as parameters ---------------------------------------------------------------------------------

_ATTRS = ("owner", "scope", "status", "room", "sensitivity", "reviewer", "id", "assignee")
_SCALARS = st.one_of(st.sampled_from([*AGENTS, "gov", "shared", "room", "private", "candidate", "shared", ""]),
                     st.integers(-1, 6), st.sampled_from([0.0, 2.0, 3.5]), st.booleans())
_VARIABLE = st.sampled_from([*(f"request.resource.attr.{a}" for a in _ATTRS), "request.resource.id"]).map(
    lambda n: PlanVariable(name=n))
_VALUE = _SCALARS.map(lambda v: PlanValue(value=v))
_LIST = st.lists(_SCALARS, max_size=3).map(lambda v: PlanValue(value=v))


def _tree(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    compare = st.tuples(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), st.one_of(_VARIABLE, _VALUE),
                        st.one_of(_VARIABLE, _VALUE)).map(
        lambda t: PlanExpression(operator=t[0], operands=[t[1], t[2]]))
    member = st.tuples(_VARIABLE, _LIST).map(lambda t: PlanExpression(operator="in", operands=list(t)))
    logic = st.tuples(st.sampled_from(["and", "or"]), st.lists(children, min_size=1, max_size=3)).map(
        lambda t: PlanExpression(operator=t[0], operands=t[1]))
    negation = children.map(lambda c: PlanExpression(operator="not", operands=[c]))
    return st.one_of(compare, member, logic, negation)


# a boolean position holds what a PDP puts there: an expression, an attribute or true/false
PLANS = st.recursive(st.one_of(_VARIABLE, st.booleans().map(lambda b: PlanValue(value=b))), _tree,
                     max_leaves=8).map(lambda c: PlanFilter(kind="conditional", condition=c))


def _ids(w: World, kind: str, plan: PlanFilter, *, bound: bool) -> list[str] | None:
    """The ids of ``kind`` the plan selects: through the projection's compiled, bound SQL or the query
    builder's literal one (``None``: the plan is not SQL, either way)."""
    read = w._store.read
    try:
        rows = read.section_rows(kind, plan, limit=100_000) if bound else read.rows_allowed(kind, plan)
    except UntranslatablePlan:
        return None
    key = {"memory": "memory_id", "task": "task_id", "handoff": "handoff_id"}[kind]
    return sorted(str(r[key]) for r in rows)


@settings(max_examples=examples(ci=60, thorough=400), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=PLANS, kind=st.sampled_from(["memory", "task", "handoff"]))
def test_a_bound_plan_selects_what_its_literal_sql_selects(busy: World, plan: PlanFilter, kind: str) -> None:
    assert _ids(busy, kind, plan, bound=True) == _ids(busy, kind, plan, bound=False)


def test_an_in_list_of_mixed_types_binds_each_element_as_its_column(busy: World) -> None:
    """Once a CI failure: a literal ``IN`` list took its first element's type, so ``owner in [2.5, "alice"]``
    raised ``could not convert string to float`` and ``[True, -1]`` ``not None, True, or False``."""
    for listed in ([2.5, AGENTS[0]], [True, -1, AGENTS[0]], [AGENTS[0], 3]):
        plan = PlanFilter(kind="conditional", condition=PlanExpression(operator="in", operands=[
            PlanVariable(name="request.resource.attr.owner"), PlanValue(value=listed)]))
        literal, bound = _ids(busy, "memory", plan, bound=False), _ids(busy, "memory", plan, bound=True)
        assert literal == bound and literal, listed  # the agent's own memories, whatever else the list holds


def test_plans_that_differ_only_by_values_share_one_form() -> None:
    def plan(owner: Any, scopes: list[Any]) -> PlanFilter:
        return PlanFilter(kind="conditional", condition=PlanExpression(operator="or", operands=[
            PlanExpression(operator="eq", operands=[PlanVariable(name="request.resource.attr.owner"),
                                                    PlanValue(value=owner)]),
            PlanExpression(operator="in", operands=[PlanVariable(name="request.resource.attr.scope"),
                                                    PlanValue(value=scopes)])]))
    a, b = plan_binding("memory", plan("alice", ["shared", "room"])), plan_binding("memory", plan("bob", ["x", "y"]))
    assert a[0] == b[0] and a[1] == ["alice", "shared", "room"] and b[1] == ["bob", "x", "y"]
    assert plan_binding("memory", plan(3, ["x", "y"]))[0] != a[0]  # another type: another statement
    assert plan_binding("memory", plan("alice", ["x"]))[0] != a[0]  # another list length
    sql = {str(plan_clause("memory", plan(o, ["p", "q"]), bound=True).compile()) for o in ("alice", "bob")}
    assert len(sql) == 1


def test_the_compiled_sql_does_not_grow_with_the_agents(pdp_client: Any, tmp_path: Path) -> None:
    """Every agent's memory and handoff plans name the agent; they share their statements all the same."""
    w = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "artifacts")
    try:
        agents = [f"ag{i:02d}" for i in range(12)]
        for a in agents:
            add_agent(w, a, ["memory.write"])
            w.store_memory(a, f"note of {a}", "observation", scope="private")
        w.project_world(agents[0])
        compiled = len(w._store.read._sections)
        views = [w.project_world(a) for a in agents]
        assert len(w._store.read._sections) == compiled
        assert all([m.owner for m in v.working_memory] == [v.agent.agent_id] for v in views)  # each its own
    finally:
        close_world(w)


# -- one read transaction --------------------------------------------------------------------------------------

def test_a_projection_is_one_read_transaction(pdp_client: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    setup = open_pdp_world(url, pdp_client, tmp_path / "artifacts", seed=5)
    for a in ("ann", "ben"):
        add_agent(setup, a, ["task.create", "state.write", "memory.write"])
    task = setup.create_task("ann", "the work").task_id
    setup.compare_and_set_state("ann", f"progress/{task}", 0, {"step": 1})
    setup.store_memory("ann", "seen", "observation")
    close_world(setup)
    statements: list[str] = []
    store = Store(url)
    store.trace_statements(statements.append)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp_client, store.read), clock=ManualClock(), ids=SeededIds(3))
    try:
        book.world.project_world("ann")  # warm: plans remembered, statements compiled
        statements.clear()
        view = book.world.project_world("ann", task_id=task)
        assert [t.task_id for t in view.tasks] == [task] and view.state and view.working_memory
        begins = [s for s in statements if s.lstrip().upper().startswith("BEGIN")]
        assert begins == ["BEGIN"], begins
        assert sum(1 for s in statements if s.lstrip().upper().startswith("SELECT")) >= 8
    finally:
        book.close()


def test_a_snapshot_does_not_see_a_write_committed_meanwhile(pdp_client: Any, tmp_path: Path) -> None:
    w = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "artifacts")
    try:
        add_agent(w, "ann", ["state.write"])
        read = w._store.read
        before = read.last_seq()

        def write() -> None:
            w.compare_and_set_state("ann", "k", 0, 1)
        with read.snapshot():
            assert read.last_seq() == before
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(timeout=30)
            assert not writer.is_alive()
            assert read.last_seq() == before and read.get("state_entries", key="k") is None
        assert read.last_seq() > before and read.get("state_entries", key="k") is not None
    finally:
        close_world(w)


# -- ties at the window's edge -----------------------------------------------------------------------------------

def test_rows_of_one_age_are_cut_as_the_reference_cuts_them(pdp_client: Any, tmp_path: Path) -> None:
    """Many tasks and keys written at the same microsecond (a simulation's setup): the projection stops
    reading inside the tie (SQLite orders their ids as Python does) and keeps what the reference keeps.
    The budgets keep the whole tie inside the reference's window (``budget * 8`` rows: where a tie straddles
    that edge the reference itself kept an arbitrary part of it), while each page read is a few rows."""
    clock = ManualClock()
    w = open_pdp_world(f"sqlite:///{tmp_path / 'w.db'}", pdp_client, tmp_path / "artifacts", clock=clock)
    try:
        for a in AGENTS:
            add_agent(w, a, ["task.create", "state.write"])
        clock.advance(1.0)
        tasks = [w.create_task(AGENTS[i % 3], f"goal {i}", task_id=f"t{(i * 7) % 40:03d}").task_id
                 for i in range(40)]  # created out of id order, all at one microsecond
        for i in range(40):
            w.compare_and_set_state(AGENTS[i % 3], f"k/{(i * 11) % 40:03d}", 0, i)
        clock.advance(5.0)
        w.compare_and_set_state("bob", "k/newest", 0, 1)  # one newer row above the tie
        for agent in AGENTS:
            for budget in (6, 7, 9):
                for task_id in (None, tasks[5]):
                    new = w.project_world(agent, budget=budget, task_id=task_id)
                    old = reference_view(w, agent, budget=budget, task_id=task_id)
                    assert new.model_dump() == old.model_dump(), (agent, budget, task_id)
                    assert len(new.tasks) == budget and len(new.state) == budget
    finally:
        close_world(w)

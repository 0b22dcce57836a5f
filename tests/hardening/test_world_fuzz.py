"""Every public World call, fuzzed parameter by parameter with values no store can hold (integers beyond 64
bits, JSON nested 10,000 deep, NUL, lone surrogates, non-finite floats, oversize text and payloads), on
SQLite and PostgreSQL under the real PDP: each call is refused with a PMWError (never a traceback, never
``store_unavailable``) and every table's row count and version sum is as before (a policy denial may append
its one audit event).

Two passes: a deterministic matrix (every call x every fuzzable parameter x one bad value of each sort)
and a hypothesis fuzz (random bad values, hidden at random places in otherwise valid data), derandomized
so that a failure reproduces.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import book_of
from tests.hardening.support import BAD_JSON, BAD_STRINGS, Seeded, call_refused, deep_dict, deep_list
from tests.hardening.world_calls import Call, Param, book_calls, invocation, world_calls

# The runtime's bookkeeping is on its book (engine.world.book.RuntimeBook), not the agent-facing World.
# A success of one of these with a bad value would change the world for every later case (a bogus policy
# epoch refuses every decided write), so they run separately, each case on a fresh seeded world.
RUNTIME_ONLY = ("record_decision", "recheck_queued_work", "activate_policy_epoch", "commit_controller_step")
CALLS = world_calls()
AGENT_CALLS = CALLS
PAIRS = [(c, p) for c in AGENT_CALLS for p in c.fuzzable()]
BOOK_CALLS = book_calls()
RUNTIME_PAIRS = [(c, p) for c in BOOK_CALLS for p in c.fuzzable()]

MATRIX: dict[str, dict[str, Any]] = {
    "str": BAD_STRINGS,
    "int": {"2**63": 2**63, "-2**63-1": -(2**63) - 1, "2**64": 2**64},
    "float": {"inf": math.inf, "nan": math.nan, "2**64": 2**64},
    "dict": BAD_JSON,
    "list": {"nul": ["ok", "a\x00"], "surrogate": ["\udcff"], "deep": deep_list(10_000)},
    "any": {"nul": "a\x00", "deep": deep_dict(10_000), "big-int": 2**64, "surrogate": {"s": "\ud800"}},
}


def test_every_call_has_a_fuzzed_parameter() -> None:
    """The introspection found the World's calls (a refactor that hid them would make the fuzz vacuous)."""
    assert len(CALLS) >= 60, [c.method for c in CALLS]
    assert len(PAIRS) >= 150
    assert {"create_task", "compare_and_set_state", "store_memory", "enqueue_wake", "register_agent",
            "append_event", "events", "list_tasks"} <= {c.method for c in CALLS}
    assert set(RUNTIME_ONLY) <= {c.method for c in BOOK_CALLS}
    assert not set(RUNTIME_ONLY) & {c.method for c in CALLS}  # the bookkeeping is off the World


def _matrix(seeded: Seeded, pairs: list[tuple[Call, Param]], values: dict[str, dict[str, Any]] | None = None,
            *, on_book: bool = False) -> tuple[list[str], set[str]]:
    """Run every (call, parameter, bad value of ``values``, default :data:`MATRIX`) of ``pairs`` on the World
    (``on_book``: on its runtime book); the failures and the calls exercised."""
    target: object = book_of(seeded.world) if on_book else seeded.world
    failures: list[str] = []
    exercised: set[str] = set()
    before: dict[str, Any] | None = None
    for call, param in pairs:
        for label, bad in (values or MATRIX).get(param.kind, {}).items():
            run = invocation(target, call, seeded.ids, param.name, bad)
            if run is None:
                continue
            exercised.add(call.method)
            try:
                before = call_refused(seeded.world, run, f"{call.method}({param.name}={label})", before).after
            except AssertionError as exc:
                failures.append(str(exc).splitlines()[0][:300])
                before = None
    return failures, exercised


def test_every_world_call_refuses_every_kind_of_bad_value(seeded: Seeded) -> None:
    failures, exercised = _matrix(seeded, PAIRS)
    assert failures == [], "\n".join(failures)
    assert {c.method for c in AGENT_CALLS if c.fuzzable()} - exercised == set()


def test_integers_too_long_to_print_are_refused(seeded: Seeded) -> None:
    failures, _ = _matrix(seeded, [(c, p) for c, p in PAIRS if p.kind == "int"], {"int": {"10**5000": 10**5000}})
    assert failures == [], "\n".join(failures)


def test_runtime_bookkeeping_refuses_every_kind_of_bad_value(seeded: Seeded) -> None:
    assert RUNTIME_PAIRS
    failures, _ = _matrix(seeded, RUNTIME_PAIRS, on_book=True)
    assert failures == [], "\n".join(failures)


# -- hypothesis: random bad values at random places --------------------------------------------------------

_BAD_CHARS = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc80", "\udcff", "\udfff"])
bad_strings = st.builds(lambda a, c, b: a + c + b, st.text(max_size=12), _BAD_CHARS, st.text(max_size=12))
big_ints = st.one_of(st.integers(min_value=2**63, max_value=2**300),
                     st.integers(min_value=-(2**300), max_value=-(2**63) - 1))
bad_floats = st.one_of(st.sampled_from([math.inf, -math.inf, math.nan]), big_ints)
bad_leaves = st.one_of(bad_strings, big_ints, st.sampled_from([math.inf, math.nan]))
good_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)),
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                     max_size=3),
                         max_leaves=8)


@st.composite
def bad_json(draw: st.DrawFn) -> Any:
    """Valid JSON with one bad thing in it: a bad leaf or key at a random depth, or nesting past the limit."""
    kind = draw(st.sampled_from(["leaf", "key", "deep"]))
    if kind == "deep":
        depth = draw(st.integers(min_value=65, max_value=3000))
        return {"v": draw(st.sampled_from([deep_list, deep_dict]))(depth)}
    bad: Any = draw(bad_leaves) if kind == "leaf" else {draw(bad_strings): 1}
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        filler = draw(good_json)
        bad = draw(st.sampled_from([[filler, bad], {"f": filler, "b": bad}]))
    return bad if isinstance(bad, dict) else {"v": bad}


def bad_value(kind: str) -> st.SearchStrategy[Any]:
    if kind == "str":
        return bad_strings
    if kind == "int":
        return big_ints
    if kind == "float":
        return bad_floats
    if kind == "dict":
        return bad_json()
    if kind == "list":
        return st.builds(lambda good, bad: [*good, bad], st.lists(st.text(max_size=5), max_size=3),
                         st.one_of(bad_leaves, bad_json()))
    return st.one_of(bad_leaves, bad_json())


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(data=st.data())
def test_random_bad_values_are_refused_and_change_nothing(seeded: Seeded, data: st.DataObject) -> None:
    call, param = data.draw(st.sampled_from(PAIRS), label="call")
    bad = data.draw(bad_value(param.kind), label="value")
    run = invocation(seeded.world, call, seeded.ids, param.name, bad)
    if run is not None:
        call_refused(seeded.world, run, f"{call.method}({param.name})")



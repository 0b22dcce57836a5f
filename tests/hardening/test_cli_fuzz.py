"""Every ``pmw`` command that takes values, fuzzed parameter by parameter (integers beyond 64 bits, JSON
nested 10,000 deep or holding escaped NUL and lone surrogates or huge numbers, NUL and lone surrogates in
text, as an invalid UTF-8 byte of argv decodes, oversize text), on SQLite and PostgreSQL under the session's
PDP: never a traceback or an unexpected exception, never exit 8 (``store_unavailable``) or 1, an error on
stderr (JSON with a code matching the exit code under ``--json``), and every table as before (a policy
denial appends its one audit event).

A deterministic pass gives each (command, parameter) one bad value of its kind (rotating through the
kinds' lists, so that together they cover every value), then a derandomized hypothesis fuzz draws random
ones. The existing matrix of known bad input stays in tests/test_cli_bad_input.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.runtime import Runtime
from engine.sources import SeededIds
from store import Store
from tests.cli_support import Pdp, invoke, pdp_fixture
from tests.hardening.cli_calls import cli_commands
from tests.hardening.support import seed
from tests.hypothesis_budget import examples

pdp = pdp_fixture
ACTOR = "alice"
DEEP_JSON = "[" * 10_000 + "]" * 10_000

BAD_ARGS: dict[str, list[str]] = {
    "str": ["a\x00b", "id\udcff", "x\ud800y", "y" * (70 * 1024)],
    "int": [str(2**63), str(-(2**63) - 1), "1" + "0" * 30, str(2**64)],
    "float": ["inf", "nan", "1e400", str(2**70)],
    "json": ['{"k\\u0000": 1}', '{"s": "\\ud800"}', '{"n": 18446744073709551616}', '{"f": 1e400}',
             '{"v": ' + "[" * 70 + "]" * 70 + "}", '{"s": "' + "z" * (70 * 1024) + '"}', '"a\\u0000"'],
}
# Exit codes bad input may end in: 2 usage (typer's own refusal), 3 invalid input, 4 not found, 5 conflict,
# 6 not permitted. Never 1 (an internal error), never 8 (the store "unavailable": a client would retry).
CLEAN_EXITS = {0, 2, 3, 4, 5, 6}
COMMANDS = cli_commands()
PAIRS = [(c, p) for c in COMMANDS for p in c.params]


@pytest.fixture(scope="module", params=("sqlite-file", "postgres"))
def cli_world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
              pdp: Pdp) -> Iterator[tuple[str, dict[str, str], Store]]:
    """A seeded world for the module on each backend (refusals leave it as it was: asserted each time)."""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_cluster").create_database()
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('cli-fuzz') / 'world.db'}"
    with Runtime.open(pdp.settings(url), ids=SeededIds(5)) as runtime:
        runtime.book.bootstrap_governor("gov", "Governor", "t-gov")
        runtime.world.activate_session("term:t-gov")
        ids = seed(runtime.world)
    counts = Store(url)
    yield url, ids, counts
    counts.close()


def _run(url: str, pdp: Pdp, argv: list[str], counts: Store, label: str, as_json: bool) -> str | None:
    """Run ``pmw --db URL --as alice ARGV``; the failure (a message) or None when it was clean."""
    before = counts.read.counts_and_versions()
    result = invoke(url, *argv, actor=ACTOR, as_json=as_json, env=pdp.env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"{label}: {type(result.exception).__name__} escaped: {result.exception!r}"[:400]
    if "Traceback" in result.output:
        return f"{label}: a traceback"
    if result.exit_code not in CLEAN_EXITS:
        return f"{label}: exit {result.exit_code}: {result.stderr[:300]}"
    if result.exit_code != 0 and not result.stderr.strip():
        return f"{label}: exit {result.exit_code} without a message"
    if as_json and result.exit_code not in (0, 2):
        error = json.loads(result.stderr)
        if error.get("code") in (None, "store_unavailable"):
            return f"{label}: {error}"
    after = counts.read.counts_and_versions()
    if after != before:
        events = counts.read.events(0, 1, newest=True)[0]["event_type"]
        denied = events == "policy.denied" and after["events"] == before["events"] + 1
        if not denied or {**after, "events": 0} != {**before, "events": 0}:
            return f"{label}: exit {result.exit_code} and the store changed"
    return None


def test_the_fuzz_reaches_every_command_that_takes_values() -> None:
    names = {c.name for c in COMMANDS}
    assert {"state set", "tasks create", "events append", "wakes enqueue", "memory store", "rooms say",
            "agents register", "handoffs create", "invoke", "approvals request"} <= names
    assert len(PAIRS) >= 150


def test_every_command_refuses_a_bad_value_in_every_parameter(cli_world: tuple[str, dict[str, str], Store],
                                                              pdp: Pdp) -> None:
    url, ids, counts = cli_world
    failures = []
    for i, (command, param) in enumerate(PAIRS):
        values = BAD_ARGS[param.kind]
        for bad in (values[i % len(values)], values[(i + 1) % len(values)]):  # two each, every value in turn
            argv = command.argv(ids, param.name, bad)
            if argv is None:
                failures.append(f"{command.name}: no valid value for a required parameter")
                break
            failure = _run(url, pdp, argv, counts, f"{command.name} {param.flag or param.name}={bad[:30]!r}",
                           as_json=(i + len(bad)) % 2 == 1)
            if failure is not None:
                failures.append(failure)
    assert failures == [], "\n".join(failures)


JSON_PAIRS = [(c, p) for c, p in PAIRS if p.kind == "json"]


def test_json_nested_10000_deep_is_refused_by_every_command(cli_world: tuple[str, dict[str, str], Store],
                                                            pdp: Pdp) -> None:
    url, ids, counts = cli_world
    failures = []
    for command, param in JSON_PAIRS:
        argv = command.argv(ids, param.name, DEEP_JSON)
        assert argv is not None
        failure = _run(url, pdp, argv, counts, f"{command.name} {param.flag or param.name}=deep", as_json=True)
        if failure is not None:
            failures.append(failure)
    assert failures == [], "\n".join(failures)


@st.composite
def _bad_arg(draw: st.DrawFn, kind: str) -> str:
    if kind == "int":
        return str(draw(st.one_of(st.integers(min_value=2**63, max_value=2**400),
                                  st.integers(min_value=-(2**400), max_value=-(2**63) - 1))))
    if kind == "float":
        return draw(st.sampled_from(["inf", "-inf", "nan", "1e309", "-1e999"]))
    bad_char = draw(st.sampled_from(["\x00", "\ud800", "\udcff", "\udfff"]))
    text = draw(st.text(max_size=10)) + bad_char + draw(st.text(max_size=10))
    if kind == "str":
        return text
    shape = draw(st.sampled_from(["deep", "escaped", "number"]))
    if shape == "deep":
        depth = draw(st.integers(min_value=65, max_value=3000))  # past json.loads' recursion limit too
        return "[" * depth + "]" * depth
    if shape == "number":
        digits = draw(st.integers(min_value=20, max_value=6000))
        return '{"n": ' + "9" * digits + "}"
    return json.dumps({"k": text, text: 1}, ensure_ascii=True)  # \u escapes: NUL and lone surrogates in JSON


# the deterministic matrix above gives every (command, parameter) its bad values; the random fuzz draws 15 more
# per backend in CI, 40 under HYPOTHESIS_PROFILE=thorough (tests/hypothesis_budget.py)
@settings(max_examples=examples(ci=15, thorough=40), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_random_bad_arguments_fail_cleanly(cli_world: tuple[str, dict[str, str], Store], pdp: Pdp,
                                           data: st.DataObject) -> None:
    url, ids, counts = cli_world
    command, param = data.draw(st.sampled_from(PAIRS), label="parameter")
    bad = data.draw(_bad_arg(param.kind), label="value")
    argv = command.argv(ids, param.name, bad)
    assert argv is not None
    failure = _run(url, pdp, argv, counts, f"{command.name} {param.flag or param.name}", as_json=True)
    assert failure is None, failure


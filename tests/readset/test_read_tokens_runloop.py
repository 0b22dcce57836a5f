"""Read-set tokens across processes and through the run loop (issue 16 item 6): a world's read token is
signed with the world's key, so another process over the same database verifies it (and no one without
the key can make one); a wake's effects commit only under the read set of the projection the agent decided
on, so another writer committing between the projection and the effects refuses them all as ``conflict``,
even when each effect's ``expected_version`` matches. On SQLite (file) and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from engine.errors import StoreUnavailable
from engine.models.agents import Agent
from engine.models.wakes import Wake
from engine.protocol.adapters import AgentDecision, SetState
from engine.runloop import InProcessRunner
from engine.world import World
from engine.world.projection import WorldView
from engine.world.read_set import world_key
from tests.conftest import DbUrlFactory, add_agent, book_of, close_world, open_local_world

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sqlite-file", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(db_url_factory: DbUrlFactory) -> str:
    return db_url_factory()


@pytest.fixture
def world(url: str, tmp_path: Path) -> Iterator[World]:
    w = open_local_world(url, tmp_path / "artifacts")
    yield w
    close_world(w)


def _other_process(*args: str) -> dict[str, object]:
    """Run :mod:`tests.readset.token_process` in a process of its own (bounded)."""
    done = subprocess.run([sys.executable, "-m", "tests.readset.token_process", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return dict(orjson.loads(done.stdout.strip().splitlines()[-1]))


def test_a_token_issued_by_one_process_verifies_in_another_on_the_same_world(world: World, url: str) -> None:
    world.compare_and_set_state("alice", "plan", 0, {"steps": 1})
    read = world.get_state("plan", actor="alice")
    # another process over the same database accepts this process's token
    assert _other_process("write", url, "alice", "plan", "1", '{"steps": 2}', read.read_token) == {"version": 2}
    # and refuses it once the read set moved on, even with the version patched to the current one
    assert _other_process("write", url, "alice", "plan", "2", '{"steps": 9}', read.read_token) == {
        "error": "stale_read"}
    # a token the other process issued verifies here
    issued = _other_process("issue", url, "plan")["token"]
    assert isinstance(issued, str)
    assert world.compare_and_set_state("alice", "plan", 2, {"steps": 3}, read_token=issued).version == 3
    # an edited token is refused there as here: nothing written
    prefix, _payload, mac = read.read_token.split(".")
    forged = f"{prefix}.{_payload[:-2]}AA.{mac}"
    assert _other_process("write", url, "alice", "plan", "3", '"x"', forged) == {"error": "invalid_input"}
    assert world.get_state("plan").version == 3


def test_another_worlds_token_is_refused(world: World, db_url_factory: DbUrlFactory, tmp_path: Path) -> None:
    """Each world draws its own key: a token of one world is not a token of another (in another process)."""
    other = open_local_world(db_url_factory(), tmp_path / "other-artifacts")
    try:
        world.compare_and_set_state("alice", "plan", 0, 1)
        other.compare_and_set_state("alice", "plan", 0, 1)
        assert world_key(book_of(world).store.read) != world_key(book_of(other).store.read)
        token = other.get_state("plan").read_token
    finally:
        close_world(other)
    url = str(book_of(world).store.url)
    assert _other_process("write", url, "alice", "plan", "1", "2", token) == {"error": "invalid_input"}


def test_the_key_is_read_by_the_runtime_only(world: World) -> None:
    """The key is in no row a World read or the log can show: not a table the reader knows, in no event."""
    store = book_of(world).store
    key = world_key(store.read).hex()
    world.compare_and_set_state("alice", "plan", 0, 1)
    with pytest.raises((KeyError, StoreUnavailable, ValueError)):
        store.read.get("runtime_secrets", name="read_set_key")
    log = orjson.dumps([e.model_dump(mode="json") for e in world.events(limit=1000)]).decode()
    assert key not in log and "read_set_key" not in log
    assert key not in world.get_state("plan").read_token


# -- the run loop ----------------------------------------------------------------------------------------------

class Racing:
    """Decides on the projection, but before its effects commit another writer (bob) moves ``plan`` on; the
    effects are computed to match the versions now stored (as a patched resend would), so only the read set
    can tell that the decision rests on a stale read."""

    def __init__(self, world: World, *, race: bool) -> None:
        self.world = world
        self.race = race
        self.seen: list[int] = []

    def run(self, agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        shown = next(s for s in view.state if s.key == "plan")
        self.seen.append(shown.version)
        if self.race:
            self.world.compare_and_set_state("bob", "plan", shown.version, {"steps": "bob's"})
        now = self.world.get_state("plan").version
        return AgentDecision(decision="act", reason="from the plan I read", effects=[
            SetState(key="plan", expected_version=now, value={"steps": f"alice's, from v{shown.version}"}),
            SetState(key="answer", expected_version=0, value="rests on the plan")])


def _run(world: World, adapter: Racing) -> InProcessRunner:
    add_agent(world, "alice", ["state.write"])
    world.compare_and_set_state("alice", "plan", 0, {"steps": 1})
    world.enqueue_wake("gov", "alice", "plan-changed", "k-1")
    runner = InProcessRunner(book_of(world), adapters={"alice": adapter}, controller=False)
    runner.run_until_quiet()
    runner.close()
    return runner


def test_a_write_between_the_projection_and_the_effects_refuses_them_all(world: World) -> None:
    adapter = Racing(world, race=True)
    _run(world, adapter)
    assert adapter.seen == [1]
    [receipt] = world.list_receipts(agent_id="alice", actor="gov")
    assert receipt.outcome.value == "conflict"
    assert receipt.reason is not None and "read set changed" in receipt.reason
    assert "'plan' version 1->2" in receipt.reason
    effects = receipt.payload["effects"]
    assert [e["verdict"] for e in effects] == ["conflict", "conflict"]
    assert all("'plan' version 1->2" in str(e["reason"]) for e in effects)
    # nothing of the decision committed: bob's write stands, the answer was never written
    assert (world.get_state("plan").version, world.get_state("plan").value) == (2, {"steps": "bob's"})
    assert world.list_state("answer") == []


def test_without_a_race_the_same_decision_commits(world: World) -> None:
    adapter = Racing(world, race=False)
    _run(world, adapter)
    [receipt] = world.list_receipts(agent_id="alice", actor="gov")
    assert receipt.outcome.value == "acted"
    assert world.get_state("plan").value == {"steps": "alice's, from v1"}
    assert world.get_state("answer").value == "rests on the plan"


# -- a decision that says what it rests on (``AgentDecision.reads``) ----------------------------------------

class Narrowed:
    """Decides on ``plan`` and says so (``reads``); before its effects commit another writer (bob) moves
    ``moved`` on (a key the projection showed too)."""

    def __init__(self, world: World, *, reads: list[str] | None, moved: str) -> None:
        self.world, self.reads, self.moved = world, reads, moved

    def run(self, agent: Agent, view: WorldView, wake: Wake) -> AgentDecision:
        shown = {s.key: s.version for s in view.state}
        assert {"plan", "notes"} <= set(shown)
        self.world.compare_and_set_state("bob", self.moved, shown[self.moved], f"bob moved {self.moved}")
        return AgentDecision(decision="act", reads=self.reads, effects=[
            SetState(key="answer", expected_version=0, value="rests on the plan")])


def _run_narrowed(world: World, adapter: Narrowed) -> str:
    add_agent(world, "alice", ["state.write"])
    world.compare_and_set_state("alice", "plan", 0, {"steps": 1})
    world.compare_and_set_state("alice", "notes", 0, "n")
    world.enqueue_wake("gov", "alice", "plan-changed", "k-1")
    runner = InProcessRunner(book_of(world), adapters={"alice": adapter}, controller=False)
    runner.run_until_quiet()
    runner.close()
    [receipt] = world.list_receipts(agent_id="alice", actor="gov")
    return receipt.outcome.value


@pytest.mark.parametrize(("reads", "moved", "outcome"), [
    (["plan"], "notes", "acted"),      # another key moved: the decision does not rest on it
    (None, "notes", "conflict"),       # by default it rests on everything shown
    (["plan"], "plan", "conflict"),    # the key it named moved
    ([], "plan", "acted"),             # it rests on its effects' own versions only
])
def test_reads_narrows_the_read_set_of_a_decision(world: World, reads: list[str] | None, moved: str,
                                                   outcome: str) -> None:
    assert _run_narrowed(world, Narrowed(world, reads=reads, moved=moved)) == outcome
    assert (world.list_state("answer") != []) == (outcome == "acted")


def test_reads_naming_a_key_the_projection_did_not_show_fails_the_wake_and_writes_nothing(world: World) -> None:
    """A fence on a key the agent was not shown could only refuse, or tell it what it may not see."""
    assert _run_narrowed(world, Narrowed(world, reads=["plan", "not-shown"], moved="notes")) == "failed"
    [receipt] = world.list_receipts(agent_id="alice", actor="gov")
    assert receipt.reason is not None and "decision.reads" in receipt.reason and "not-shown" in receipt.reason
    assert world.list_state("answer") == []

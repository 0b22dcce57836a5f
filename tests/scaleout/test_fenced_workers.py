"""Workers fenced by their claims (issue 13): a worker whose wake lease ran out cannot commit the wake's
effects or its ack; the wake is claimed again and runs once. Real PDP, SQLite file and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import ConflictError, WakeLeaseLost
from engine.models.agents import Agent
from engine.models.receipts import Outcome
from engine.models.wakes import Wake
from engine.policy.cerbos_adapter import CerbosPdp
from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
from engine.protocol.worker import Worker
from engine.world import World
from engine.world.projection import WorldView
from tests.conftest import add_agent, book_of, close_world, open_pdp_world

LEASE_S = 5


def bump(key: str) -> RuleAgent:
    """Increments ``key`` once per wake."""
    def rule(agent: Agent, view: WorldView, wake: Wake) -> AgentDecision | None:
        entry = next((s for s in view.state if s.key == key), None)
        version, value = (entry.version, entry.value) if entry else (0, 0)
        return AgentDecision(decision="act", effects=[SetState(key=key, expected_version=version, value=value + 1)])
    return RuleAgent([rule])


@pytest.fixture(params=["sqlite-file", "postgres"])
def team(request: pytest.FixtureRequest, tmp_path: Path, pdp_client: CerbosPdp) -> Iterator[World]:
    url = (f"sqlite:///{tmp_path / 'w.db'}" if request.param == "sqlite-file"
           else str(request.getfixturevalue("pg_url")))
    world = open_pdp_world(url, pdp_client, tmp_path / "artifacts")
    add_agent(world, "boss", ["wake.enqueue"])
    add_agent(world, "w", ["state.write"])
    world.enqueue_wake("boss", "w", "count", "k1")
    yield world
    close_world(world)


def worker(world: World, worker_id: str) -> Worker:
    return Worker(book_of(world), worker_id, {"w": bump("n")}, lease_seconds=LEASE_S)


def claimed(world: World, worker_id: str) -> Wake:
    wake = world.claim_wake(worker_id, agent_ids=["w"], lease_seconds=LEASE_S)
    assert wake is not None
    return wake


def written(world: World) -> tuple[int, int]:
    """The log's length and the receipts: what a refused cycle must leave as it was."""
    return book_of(world).store.read.last_seq(), len(world.list_receipts(actor="gov"))


def no_effect(world: World) -> None:
    """Nothing of the refused cycle is in the store: no effect, no receipt, the wake still claimed."""
    assert "n" not in {s.key for s in world.list_state(actor="gov")}
    assert world.list_receipts(actor="gov") == []


def ran_once(world: World) -> None:
    """The wake ended in exactly one receipt and its effect was applied exactly once."""
    receipts = world.list_receipts(actor="gov")
    assert [r.outcome for r in receipts] == [Outcome.ACTED]
    assert world.get_state("n", actor="w").value == 1
    assert book_of(world).rebuild_state(from_snapshot=False) == book_of(world).state_image()


def test_a_worker_past_its_lease_commits_nothing_and_the_wake_runs_once(team: World) -> None:
    late = claimed(team, "worker-1")
    team.clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]  # worker-1 is paused past its lease
    before = written(team)
    with pytest.raises(WakeLeaseLost) as refused:
        worker(team, "worker-1").run_wake(late)
    assert (refused.value.reason, refused.value.token, refused.value.code) == ("expired", 1, "wake_lease_lost")
    assert written(team)[1] == before[1] == 0
    no_effect(team)
    assert worker(team, "worker-2").run_until_idle()  # reclaimed, run, acked
    ran_once(team)


def test_a_restarted_worker_of_the_same_name_fences_out_its_old_self(team: World) -> None:
    old = claimed(team, "worker-1")
    team.clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    new = claimed(team, "worker-1")  # the same worker id, another process: the claim's attempt is 2
    assert (old.attempts, new.attempts) == (1, 2)
    before = written(team)
    with pytest.raises(WakeLeaseLost) as refused:
        worker(team, "worker-1").run_wake(old)
    assert refused.value.reason == "reclaimed"
    assert written(team)[1] == before[1] == 0
    no_effect(team)
    worker(team, "worker-1").run_wake(new)
    ran_once(team)


def test_a_worker_whose_wake_was_reclaimed_and_acked_commits_nothing(team: World) -> None:
    first = claimed(team, "worker-1")
    team.clock.advance(LEASE_S + 1)  # type: ignore[attr-defined]
    assert worker(team, "worker-2").run_until_idle()
    before = written(team)
    with pytest.raises(ConflictError):  # the wake is done, and was another worker's: refused before any commit
        worker(team, "worker-1").run_wake(first)
    assert written(team) == before
    ran_once(team)

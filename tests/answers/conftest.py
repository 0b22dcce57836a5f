"""Helpers for the answers an agent relies on: ask ``allowed_actions``, make the call, and check they agree."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.errors import AlreadyExists, IllegalTransition, LeaseHeld, NotFound, NotPermitted, PMWError, PolicyDenied
from engine.world import World
from tests.conftest import add_agent

WORKER_CAPS = ["task.create", "task.assign", "task.work", "memory.write", "handoff.create", "room.open",
               "message.send", "wake.enqueue", "artifact.write"]


def expected_reason(error: PMWError) -> str:
    """The reason an answer must give for a call that raised ``error`` (issue 9: IllegalTransition ->
    illegal_transition, NotPermitted / not the assignee -> not_assignee, PolicyDenied -> policy)."""
    if isinstance(error, PolicyDenied):
        return "policy"
    if isinstance(error, IllegalTransition | AlreadyExists):
        return "illegal_transition"
    if isinstance(error, NotPermitted | LeaseHeld | NotFound):
        return "not_assignee"
    raise AssertionError(f"the call failed for a reason no answer gives: {error!r}")


def agree(world: World, actor: str, kind: str, ident: str, action: str, call: Callable[[], object]) -> str:
    """Ask whether ``actor`` may ``action`` the object, then make ``call``; assert the answer held: allowed
    and the call succeeded, or refused for the reason the call's error names. Returns ``allowed`` or the
    reason."""
    answer = world.allowed_actions(actor, kind, ident)
    assert set(answer.refused) == set(answer.denied) == set(answer.why)
    try:
        call()
    except PMWError as error:
        assert action in answer.denied, f"{actor} {action} {kind} {ident}: answered allowed, call raised {error!r}"
        assert answer.refused[action] == expected_reason(error), (
            f"{actor} {action} {kind} {ident}: answered {answer.refused[action]} ({answer.why[action]}), "
            f"the call raised {error!r}")
        return str(answer.refused[action])
    assert action in answer.allowed, (
        f"{actor} {action} {kind} {ident}: answered {answer.refused.get(action)} ({answer.why.get(action)}), "
        "the call succeeded")
    return "allowed"


@pytest.fixture
def team(pworld: World) -> World:
    """The real-PDP world with workers alice and bob (every worker capability), mallory (none) and rita
    (a reviewer)."""
    add_agent(pworld, "alice", WORKER_CAPS)
    add_agent(pworld, "bob", WORKER_CAPS)
    add_agent(pworld, "mallory")
    add_agent(pworld, "rita", ["memory.review", "memory.write"])
    pworld.grant("gov", "rita", role_id="reviewer")
    return pworld


def files_under(root: Path) -> list[Path]:
    """Every file below ``root`` (staging included), or none if it does not exist."""
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []

"""``engine.service.dispatch`` and the bounds of ``engine.service.calls`` on a runtime with its own real PDP:
a token is proven outside the world's lock (a caller with a bad token is refused at once while another call
holds the world, and delays nobody); the time a call acts at is the world's clock, never a request's; one
request may not ask ``allowed_actions_batch`` for more than a transport allows. Each refusal writes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import InvalidInput, Unauthenticated
from engine.runtime import Runtime
from engine.service.calls import TRANSPORT_LIMITS
from engine.service.dispatch import Dispatcher
from tests.conftest import add_agent, runtime_on_policy_copy

HOLD_S = 3.0


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, policy_deployment: Path) -> Iterator[Runtime]:
    """``gov`` and ``alice`` (room.create, state.write) on a runtime of the module's own."""
    rt = runtime_on_policy_copy(tmp_path_factory.mktemp("dispatch"))
    add_agent(rt.world, "alice", ["state.write", "room.create"])
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def token(runtime: Runtime) -> str:
    issued = runtime.world.issue_token("gov", "alice")
    assert issued.token is not None
    return issued.token


def test_a_bad_token_is_refused_while_another_call_holds_the_world(runtime: Runtime, token: str) -> None:
    dispatch = Dispatcher(runtime)
    held, release = threading.Event(), threading.Event()

    def slow(_principal: object) -> None:  # a long call holding the world's lock
        held.set()
        release.wait(HOLD_S * 2)

    holder = threading.Thread(target=dispatch.run, args=(token, slow), daemon=True)
    holder.start()
    assert held.wait(30)
    try:
        started = time.monotonic()
        with pytest.raises(Unauthenticated):
            dispatch.run("pmw_tok_nope_secret", lambda _p: None)
        assert dispatch.principal(token).agent_id == "alice"  # proving a good token does not wait either
        assert time.monotonic() - started < HOLD_S  # refused without waiting for the held lock
    finally:
        release.set()
        holder.join(30)
    assert not holder.is_alive()


def test_a_request_never_sets_the_time_a_call_acts_at(runtime: Runtime, token: str) -> None:
    dispatch = Dispatcher(runtime)
    before = runtime.store.read.last_seq()
    with pytest.raises(InvalidInput) as refused:
        dispatch.run(token, lambda p: dispatch.world_call(p, "close_stale_rooms", {"now_us": 2**62}))
    assert refused.value.field == "now_us"
    assert runtime.store.read.last_seq() == before
    assert dispatch.run(token, lambda p: dispatch.world_call(p, "close_stale_rooms", {})) is not None


def test_one_request_asks_for_at_most_a_transports_share(runtime: Runtime, token: str) -> None:
    dispatch = Dispatcher(runtime)
    param, most = TRANSPORT_LIMITS["allowed_actions_batch"]
    objects = [["agent", "alice"]] * (most + 1)
    with pytest.raises(InvalidInput) as refused:
        dispatch.run(token, lambda p: dispatch.world_call(p, "allowed_actions_batch", {param: objects}))
    assert refused.value.field == param
    answered = dispatch.run(token, lambda p: dispatch.world_call(p, "allowed_actions_batch",
                                                                  {param: objects[:most]}))
    assert len(answered) == most

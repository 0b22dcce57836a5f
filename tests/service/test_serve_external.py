"""An external agent process pulls and acks its own wakes while ``pmw serve`` runs the controller and an
in-process agent: the controller wakes both (subscribers of one key), the server's worker never touches the
external agent's wakes, and the receipts and run traces of both have the same shape."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.support import Served, wait_until

ROUNDS = 3
COOLDOWN_S = 2.2  # rules/wake_storm.yaml cooldown_us, and a little


def shape(value: Any) -> Any:
    """The keys of a JSON value, recursively, and the types of its leaves (a list: the shapes of its objects,
    or "list"); null and a value count as the same leaf (a field may be empty in one run)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        objects = [shape(v) for v in value if isinstance(v, dict)]
        return objects[:1] if objects else "list"
    return "leaf"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("serve-external")
    with Served(root, serve_args=["--agent", "w=tests.runloop.cli_agents:bob", "--poll-seconds", "0.1"]) as server:
        yield server


def test_an_external_agent_pulls_and_acks_its_own_wakes(served: Served) -> None:
    boss = served.client(served.add_agent("boss", ["state.write"]))
    inside = served.client(served.add_agent("w", ["state.write"]))
    outside_token = served.add_agent("x", ["state.write"])
    for agent, client in (("w", inside), ("x", served.client(outside_token))):
        client.call("world", "subscribe", (), {"subject_id": "signal", "agent_id": agent, "actor": agent})

    env = dict(served.env, PMW_SERVER=served.url, PMW_TOKEN=outside_token)
    external = subprocess.Popen([sys.executable, "-m", "tests.service.external_agent", str(ROUNDS), "x-out"],
                                env=env, cwd=served.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    gov = served.client(served.governor_token)

    def receipts_of(agent: str) -> list[Any]:
        return list(gov.call("world", "list_receipts", (), {"agent_id": agent, "actor": "gov"}))

    def has_receipts(agent: str, count: int) -> bool:
        return len(receipts_of(agent)) >= count
    try:
        for n in range(ROUNDS):  # each write of the key wakes both subscribers (the controller decides it)
            if n:
                time.sleep(COOLDOWN_S)  # the storm rules' cooldown: an agent is woken at most once per 2 s
            boss.call("world", "compare_and_set_state", (), {"key": "signal", "expected_version": n, "value": n,
                                                             "actor": "boss"})
            wait_until(functools.partial(has_receipts, "x", n + 1), 60, f"x's receipt {n + 1}")
        out, err = external.communicate(timeout=120)
    finally:
        if external.poll() is None:
            external.kill()
            external.wait(10)
    assert external.returncode == 0, err
    pulled = json.loads(out)
    assert len(pulled) == ROUNDS and {r["agent_id"] for r in pulled} == {"x"}
    assert {r["outcome"] for r in pulled} == {"acted"}

    wait_until(lambda: len(receipts_of("w")) >= ROUNDS, 60, "w's receipts")
    mine, theirs = receipts_of("w"), receipts_of("x")
    assert len(theirs) == ROUNDS and {r.outcome.value for r in mine} == {"acted"}
    assert shape(mine[0].model_dump(mode="json")) == shape(theirs[0].model_dump(mode="json"))
    trace_in = gov.call("world", "get_trace", (mine[0].wake_id,), {"actor": "gov"}).model_dump(mode="json")
    trace_out = gov.call("world", "get_trace", (theirs[0].wake_id,), {"actor": "gov"}).model_dump(mode="json")
    assert shape(trace_in) == shape(trace_out)
    assert trace_out["worker_id"] == "pull:x" and trace_in["worker_id"] == "serve-worker"
    assert trace_out["commits"] and trace_in["commits"]
    assert gov.call("world", "get_state", ("x-out",), {"actor": "gov"}).value == ROUNDS  # each effect once
    wakes = gov.call("world", "list_wakes", (), {"target_agent": "x", "actor": "gov"})
    assert {w.cause for w in wakes} == {"subscriber"} and {w.lease_owner for w in wakes} == {"pull:x"}

"""The commands as REST resources, end to end on a real ``pmw serve`` with the real PDP: a task created,
read, claimed on its ETag and completed; a handoff by pointers accepted and completed by its target; a
state key holding ``/`` set and read; an artifact registered and read back with its checksum; memory
stored and read; a wake queued for an agent, claimed and acked by it with a NO_ACTION receipt read back;
what the agent may do and its projection; every command reachable as ``POST /v1/actions/<command>``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from engine.commands import COMMANDS
from tests.service.support import Served
from tests.transports.test_rest_support import AGENT_CAPABILITIES, call


class World:
    def __init__(self, served: Served) -> None:
        self.served = served
        self.alice = served.add_agent("alice", AGENT_CAPABILITIES)
        self.bob = served.add_agent("bob", AGENT_CAPABILITIES)

    def ok(self, method: str, path: str, body: Any = None, token: str | None = None, **headers: str) -> Any:
        status, answer_headers, answer = call(self.served, method, path, body, token or self.alice, **headers)
        assert status == 200, (method, path, answer)
        self.last_headers = answer_headers
        return answer


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with Served(tmp_path_factory.mktemp("rest-resources"), serve_args=["--no-controller"]) as served:
        yield World(served)


def test_a_task_from_creation_to_completion(world: World) -> None:
    task = world.ok("POST", "/v1/tasks", {"goal": "write the report", "task_id": "report-1"})
    assert (task["task_id"], task["status"], world.last_headers["etag"]) == ("report-1", "open", '"1"')
    read = world.ok("GET", "/v1/tasks/report-1")
    claimed = world.ok("POST", "/v1/tasks/report-1/claim", None, If_Match=world.last_headers["etag"])
    assert (read["version"], claimed["status"], claimed["assignee"]) == (1, "claimed", "alice")
    done = world.ok("POST", "/v1/tasks/report-1/complete", {"result": {"pages": 3}})
    assert (done["status"], done["result"]) == ("completed", {"pages": 3})
    listed = world.ok("GET", "/v1/tasks?status=completed")
    assert [t["task_id"] for t in listed] == ["report-1"]


def test_a_handoff_by_pointers(world: World) -> None:
    world.ok("POST", "/v1/tasks", {"goal": "review it", "task_id": "review-1"})
    handoff = world.ok("POST", "/v1/handoffs", {"target_agent": "bob", "task_id": "review-1", "goal": "review",
                                                "evidence_refs": ["report-1"]})
    hid = handoff["handoff_id"]
    accepted = world.ok("POST", f"/v1/handoffs/{hid}/accept", None, world.bob)
    finished = world.ok("POST", f"/v1/handoffs/{hid}/complete", {"result": {"ok": True}}, world.bob)
    assert (accepted["status"], finished["status"]) == ("accepted", "completed"), finished
    assert world.ok("GET", f"/v1/handoffs/{hid}", token=world.bob)["evidence_refs"] == ["report-1"]


def test_a_state_key_with_a_slash(world: World) -> None:
    world.ok("PUT", "/v1/state/plan/step", {"value": [1, 2]}, If_None_Match="*")
    assert world.ok("GET", "/v1/state/plan/step")["value"] == [1, 2]
    assert world.ok("GET", "/v1/state/plan%2Fstep")["key"] == "plan/step"
    assert [e["key"] for e in world.ok("GET", "/v1/state?prefix=plan/")] == ["plan/step"]


def test_an_artifact_read_back_with_its_checksum(world: World) -> None:
    art = world.ok("POST", "/v1/artifacts", {"artifact_type": "report", "content": "three pages"})
    assert art["checksum"].endswith(hashlib.sha256(b"three pages").hexdigest()), art
    read = world.ok("GET", f"/v1/artifacts/{art['artifact_id']}/content")
    assert (read["artifact"]["checksum"], read["content"]) == (art["checksum"], "three pages"), read
    second = world.ok("POST", f"/v1/artifacts/{art['artifact_id']}/versions", {"content": "four pages"},
                      If_Match='"1"')
    assert second["version"] == 2
    versions = world.ok("GET", f"/v1/artifacts/{art['artifact_id']}/versions")
    assert [v["version"] for v in versions] == [1, 2]


def test_memory_stored_and_read(world: World) -> None:
    memory = world.ok("POST", "/v1/memory", {"content": "the build is green", "epistemic_type": "observation"})
    assert world.ok("GET", f"/v1/memory/{memory['memory_id']}")["content"] == "the build is green"
    mine = world.ok("GET", "/v1/agents/alice/memory")
    assert memory["memory_id"] in [m["memory_id"] for m in mine]


def test_a_wake_claimed_and_acked_by_its_agent(world: World) -> None:
    queued = world.ok("POST", "/v1/wakes", {"target_agent": "bob", "cause": "review ready",
                                            "idempotency_key": "bob-review-1"})
    again = world.ok("POST", "/v1/wakes", {"target_agent": "bob", "cause": "review ready",
                                           "idempotency_key": "bob-review-1"})
    assert (queued["created"], again["created"]) == (True, False)
    assert again["wake"]["wake_id"] == queued["wake"]["wake_id"]  # delivered twice, one wake
    wake = world.ok("POST", "/v1/wakes/claim", {"lease_seconds": 30}, world.bob)
    assert wake is not None and wake["wake_id"] == queued["wake"]["wake_id"], wake
    assert [w["wake_id"] for w in world.ok("GET", "/v1/agents/bob/wakes", token=world.bob)] == [wake["wake_id"]]
    receipt = world.ok("POST", f"/v1/wakes/{wake['wake_id']}/ack", {"decision": "no_action",
                                                                    "reason": "nothing to do"}, world.bob)
    assert (receipt["decision"], receipt["outcome"]) == ("no_action", "no_action"), receipt
    assert world.ok("GET", f"/v1/wakes/{wake['wake_id']}/receipt", token=world.bob)["receipt_id"] == \
        receipt["receipt_id"]
    assert world.ok("POST", "/v1/wakes/claim", {}, world.bob) is None  # nothing more is due


def test_what_the_agent_may_do_and_its_projection(world: World) -> None:
    world.ok("POST", "/v1/tasks", {"goal": "plan the week", "task_id": "plan-1"})  # its own: runs alone too
    allowed = world.ok("GET", "/v1/agents/alice/allowed-actions?kind=task&ident=plan-1")
    assert "read" in allowed["allowed"] and allowed["kind"] == "task", allowed
    view = world.ok("GET", "/v1/agents/alice/projection?budget=5")
    assert view["agent"]["agent_id"] == "alice" and view["budget"] == 5, view


def test_every_command_is_an_action(world: World) -> None:
    status, _, document = call(world.served, "GET", "/v1/openapi.json")
    assert status == 200
    actions = {path.removeprefix("/v1/actions/") for path in document["paths"] if path.startswith("/v1/actions/")}
    assert actions == set(COMMANDS)
    for name, command in COMMANDS.items():  # each body is the command's own model
        body = document["paths"][f"/v1/actions/{name}"]["post"]["requestBody"]["content"]["application/json"]
        component = body["schema"]["$ref"].rsplit("/", 1)[-1]
        assert set(document["components"]["schemas"][component].get("properties", {})) == set(command.model_fields)
    entry = world.ok("POST", "/v1/actions/compare_and_set_state", {"key": "via-action", "expected_version": 0,
                                                                  "value": 1})
    assert entry["version"] == 1

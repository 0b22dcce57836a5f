"""``engine.client.connect`` (engine/client/world.py): the same script body against the embedded World and
against a real ``pmw serve`` process gives the same results and raises the same exception classes, with the
same fields (``VersionConflict.current``, ``PolicyDenied``, ``NotFound``, ``IllegalTransition``, ...).

Both worlds are decided by the real Cerbos PDP on the repository's policies; the embedded one is a SQLite
file opened in process, the served one a subprocess with tokens issued by its governor. The script acts as
``alice`` (``actor="alice"``, as a program written for the embedded World does); over HTTP alice's token
makes the calls. Also: ``world.wakes()`` iterates alice's wakes as they are queued and a new stream resumes
after ``last_seq`` (none lost, none twice); a code the client does not know stays a ``RemoteError``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import engine.client
from engine.client.errors import typed_error
from engine.client.http import RemoteError
from engine.client.world import RemoteWorld
from engine.errors import IllegalTransition, NotFound, PMWError, PolicyDenied, Unauthenticated, VersionConflict
from engine.models.wakes import Wake
from engine.world import World
from tests.conftest import add_agent
from tests.service.support import Served

CAPABILITIES = ["state.write", "task.create", "task.work"]


def script(world: Any) -> list[Any]:
    """A program written against the embedded World; what it saw, with run-specific ids and times left out."""
    seen: list[Any] = []

    def outcome(call: Any) -> Any:
        try:
            value = call()
        except PMWError as exc:
            fields = {k: v for k, v in exc.details().items() if k not in ("id", "policy_epoch", "reason")}
            return ("raised", type(exc).__name__, exc.code, exc.exit_code, fields)
        return ("returned", type(value).__name__)

    entry = world.compare_and_set_state("alice", "plan", expected_version=0, value={"step": 1})
    seen.append((type(entry).__name__, entry.key, entry.version, entry.value))
    entry = world.compare_and_set_state("alice", "plan", entry.version, {"step": 2})  # positional arguments
    seen.append((entry.version, entry.value))
    try:
        world.compare_and_set_state("alice", "plan", expected_version=1, value={"step": 9})
    except VersionConflict as exc:  # what an agent branches on: re-read at exc.current
        seen.append(("conflict", exc.kind, exc.id, exc.expected, exc.current))
        seen.append(world.get_state("plan", actor="alice").value)
    seen.append(outcome(lambda: world.get_state("no-such-key", actor="alice")))
    task = world.create_task("alice", "write the report")
    seen.append((type(task).__name__, task.goal, task.status, task.version))
    claimed = world.claim_task("alice", task.task_id)
    seen.append((claimed.status, claimed.assignee, claimed.version))
    seen.append(outcome(lambda: world.claim_task("alice", task.task_id)))
    allowed = world.allowed_actions("alice", "task", task.task_id)
    seen.append((type(allowed).__name__, sorted(allowed.allowed), sorted(allowed.denied)))
    done = world.complete_task("alice", task.task_id, {"ok": True})
    seen.append((done.status, done.result))
    seen.append(outcome(lambda: world.complete_task("alice", task.task_id, {"ok": False})))
    seen.append(outcome(lambda: world.get_task("tsk_nope", actor="alice")))
    seen.append(outcome(lambda: world.enqueue_wake("alice", "alice", "ping", "k1")))  # no wake.enqueue
    seen.append(outcome(lambda: world.compare_and_set_state("alice", "", 0, 1)))  # invalid input
    listed = world.list_tasks(actor="alice")
    seen.append([(type(t).__name__, t.goal, t.status) for t in listed])
    return seen


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("client"), serve_args=["--no-controller"]) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(served: Served) -> dict[str, str]:
    return {"alice": served.add_agent("alice", CAPABILITIES), "boss": served.add_agent("boss", ["wake.enqueue"])}


def test_the_same_script_gives_the_same_results_and_errors(pworld: World, served: Served,
                                                           tokens: dict[str, str]) -> None:
    add_agent(pworld, "alice", CAPABILITIES)
    embedded = script(pworld)
    remote = script(engine.client.connect(served.url, tokens["alice"]))  # the one line that changes
    assert remote == embedded
    raised = [s[1] for s in embedded if isinstance(s, tuple) and s[0] == "raised"]
    assert raised == ["NotFound", "IllegalTransition", "IllegalTransition", "NotFound", "PolicyDenied",
                      "InvalidInput"]


def test_errors_are_the_worlds_classes_with_their_fields(served: Served, tokens: dict[str, str]) -> None:
    world = engine.client.connect(served.url, tokens["alice"])
    world.compare_and_set_state("alice", "typed", 0, 1)
    with pytest.raises(VersionConflict) as conflict:
        world.compare_and_set_state("alice", "typed", 5, 2)
    assert conflict.value.current == 1 and conflict.value.expected == 5 and conflict.value.kind == "state"
    assert "current version is 1" in conflict.value.message
    with pytest.raises(NotFound):
        world.get_task("tsk_missing", actor="alice")
    with pytest.raises(PolicyDenied) as denied:
        world.enqueue_wake("alice", "boss", "ping", "k-denied")
    assert denied.value.actor == "alice" and denied.value.policy_epoch
    with pytest.raises(NotFound):  # not a call of the World at all
        world.no_such_call()
    other = world.compare_and_set_state
    with pytest.raises(PMWError) as not_me:  # acting as another agent: refused, the token is alice's
        other("boss", "typed", 1, 3)
    assert not_me.value.code == "not_permitted" and not isinstance(not_me.value, IllegalTransition)
    assert {"compare_and_set_state", "allowed_actions", "wakes"} <= set(dir(world))


def test_an_unknown_code_stays_a_remote_error() -> None:
    remote = RemoteError({"code": "brand_new_code", "detail": "from a newer server", "exit_code": 5, "x": 1})
    assert typed_error(remote) is remote and remote.code == "brand_new_code" and remote.details() == {"x": 1}
    bad_fields = RemoteError({"code": "version_conflict", "detail": "?", "kind": "state"})  # fields missing
    assert typed_error(bad_fields) is bad_fields


def test_an_illegal_transitions_status_field_comes_from_fields_not_the_http_status(
        served: Served, tokens: dict[str, str]) -> None:
    """The server sends every field in ``fields`` (``IllegalTransition.status`` is the object's status; the
    document's ``status`` member stays the HTTP status): the client rebuilds the error from ``fields``, and
    from the members of a document without it (an older server)."""
    world = engine.client.connect(served.url, tokens["alice"])
    task = world.create_task("alice", "legal?")
    world.claim_task("alice", task.task_id)
    world.complete_task("alice", task.task_id, {"ok": True})
    with pytest.raises(IllegalTransition) as illegal:
        world.claim_task("alice", task.task_id)
    assert illegal.value.status == "completed" and illegal.value.id == task.task_id
    sent = RemoteError({"code": "not_found", "status": 404, "detail": "gone", "exit_code": 4, "kind": "member",
                        "id": "member", "fields": {"kind": "task", "id": "tsk_1"}})
    rebuilt = typed_error(sent)
    assert isinstance(rebuilt, NotFound) and (rebuilt.kind, rebuilt.id) == ("task", "tsk_1")  # fields win
    assert sent.details() == {"kind": "task", "id": "tsk_1"}
    older = typed_error(RemoteError({"code": "not_found", "status": 404, "detail": "gone", "exit_code": 4,
                                     "kind": "task", "id": "tsk_2"}))
    assert isinstance(older, NotFound) and older.id == "tsk_2"


def test_wakes_iterates_as_queued_and_resumes_after_last_seq(served: Served, tokens: dict[str, str]) -> None:
    world = engine.client.connect(served.url, tokens["alice"])
    boss = engine.client.connect(served.url, tokens["boss"])
    assert isinstance(world, RemoteWorld)
    with world.wakes(wait_s=20) as stream:
        first = boss.enqueue_wake("boss", "alice", "ping", "w-0").wake.wake_id
        got = next(stream)
        assert isinstance(got, Wake) and got.wake_id == first and got.target_agent == "alice"
        last = stream.last_seq
    assert last is not None
    away = [boss.enqueue_wake("boss", "alice", "ping", f"w-{n}").wake.wake_id for n in (1, 2, 3)]
    boss.enqueue_wake("boss", "boss", "ping", "w-boss")  # not alice's
    with world.wakes(after_seq=last, wait_s=20) as resumed:
        again = [next(resumed).wake_id for _ in away]
        live = boss.enqueue_wake("boss", "alice", "ping", "w-live").wake.wake_id
        assert next(resumed).wake_id == live
    assert again == away
    with world.wakes(wait_s=0.5) as idle, pytest.raises(TimeoutError):  # bounded wait, nothing queued
        next(idle)
    with pytest.raises(PMWError) as refused:  # another agent's stream
        world.wakes("boss")
    assert refused.value.code == "not_permitted"


def test_a_revoked_token_ends_wakes_with_unauthenticated(served: Served, tokens: dict[str, str]) -> None:
    token = served.issue("alice")
    world = engine.client.connect(served.url, token)
    token_id = world.whoami()["token_id"]
    with world.wakes(wait_s=20) as stream:
        served.client(served.governor_token).call("world", "revoke_token", (), {"token_id": token_id})
        with pytest.raises(Unauthenticated) as ended:
            next(stream)
    assert ended.value.reason == "revoked" and ended.value.token_id == token_id


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_wakes_survive_a_server_restart(tmp_path: Path) -> None:
    """The stream of a running ``world.wakes()`` dies with its server; the next ``next`` reconnects to the
    restarted server (same address) with ``Last-Event-ID`` and gets the wakes queued since, none twice."""
    port = free_port()
    server = Served(tmp_path, serve_args=["--no-controller", "--port", str(port)])
    server.start()
    try:
        alice, boss = server.add_agent("alice"), server.add_agent("boss", ["wake.enqueue"])
        world = engine.client.connect(server.url, alice)
        stream = world.wakes(wait_s=60)
        enqueue = engine.client.connect(server.url, boss).enqueue_wake
        first = enqueue("boss", "alice", "ping", "r-0").wake.wake_id
        assert next(stream).wake_id == first
        server.stop()
        server.start()
        assert server.url.endswith(f":{port}")
        enqueue = engine.client.connect(server.url, boss).enqueue_wake
        later = [enqueue("boss", "alice", "ping", f"r-{n}").wake.wake_id for n in (1, 2)]
        assert [next(stream).wake_id for _ in later] == later
        assert stream.reconnects >= 1
        stream.close()
    finally:
        server.stop()

"""Seed 000's MVP tests 1, 2, 3 and 15 driven over MCP by the official MCP Python client (``mcp`` 2.3:
``ClientSession``), against one real ``pmw serve`` (``tests/service/support.py`` ``Served``: a subprocess on a
temporary SQLite world, the real Cerbos PDP, the controller on ``rules/``), with real agent tokens issued by
``pmw tokens issue``. Each flow runs over both transports (parametrized):

- ``http``: the streamable HTTP client on ``/mcp``, the agent's token in ``Authorization: Bearer``;
- ``stdio``: the stdio client spawning ``pmw mcp`` with ``PMW_SERVER`` and ``PMW_TOKEN`` in its environment.

Tools are the World's method names; the principal (``actor``; ``worker`` for wakes) is never an argument: the
token says who acts. Every flow asserts on the store's rows and events (read straight from the SQLite file),
not only on the tools' answers:

1. resume in a new conversation: a second MCP session (a new process over stdio) claims the wake the
   controller queued, reads its projection and continues from the state, task and private memory the first
   session wrote; nothing is redone (two ``state.set`` events, versions 1 and 2);
2. handoff by pointers: the target, woken by the controller (``handoff_target``), finishes the task from the
   packet's pointers and the world; the source's private notes are never in its projection;
3. a wake delivered ten times (one idempotency key, before and after the run) is one wake row, one
   ``wake.issued`` event, one run, one effect and one receipt;
15. an agent woken by a key it follows decides to do nothing: one receipt, decision and outcome
   ``no_action``, with its reason, and no effect (over HTTP the wake is pushed to its resource subscription
   first: no polling).
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession, MessageHandlerFnT
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from store import Store
from tests.service.support import GOVERNOR, Served

TRANSPORTS = ("http", "stdio")
WAKE_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 60.0
SECTIONS = ["intro", "figures", "summary"]
#: what a wake's payload may hold: the chain's bookkeeping, never a transcript
WAKE_PAYLOAD_KEYS = {"depth", "chain", "origin_us", "rule"}


class ToolError(Exception):
    """A tool's ``isError`` result; ``error`` is its ``structuredContent`` (PMW's code and fields)."""

    def __init__(self, name: str, error: dict[str, Any]) -> None:
        super().__init__(f"{name}: {error}")
        self.error = error


class McpAgent:
    """One MCP conversation of one agent: World calls as tools, results from ``structuredContent``."""

    def __init__(self, session: ClientSession, agent_id: str) -> None:
        self.session = session
        self.agent_id = agent_id

    async def call(self, name: str, **arguments: Any) -> Any:
        """The tool's structured result (a result that is not an object comes wrapped as ``{"result": ...}``
        and is unwrapped); ``ToolError`` for an ``isError`` result."""
        result = await self.session.call_tool(name, arguments, read_timeout_seconds=CALL_TIMEOUT_S)
        payload = result.structured_content
        assert isinstance(payload, dict), f"{name}: no structuredContent in {result}"
        if result.is_error:
            raise ToolError(name, payload)
        return payload["result"] if set(payload) == {"result"} else payload

    async def next_wake(self, *causes: str) -> dict[str, Any]:
        """Claim this agent's next due wake with one of ``causes`` (any other claimed on the way is acked
        ``no_action``), polling until one is due (bounded)."""
        deadline = time.monotonic() + WAKE_TIMEOUT_S
        passed: list[str] = []
        while time.monotonic() < deadline:
            wake = await self.call("claim_wake", lease_seconds=120)
            if wake is None:
                await anyio.sleep(0.2)
            elif wake["cause"] in causes:
                return dict(wake)
            else:
                passed.append(wake["cause"])
                await self.call("ack_wake", wake_id=wake["wake_id"], decision="no_action",
                                reason="not the wake this flow waits for")
        raise AssertionError(f"{self.agent_id}: no wake ({causes}) within {WAKE_TIMEOUT_S} s; passed {passed}")

    async def view(self, **arguments: Any) -> dict[str, Any]:
        view = await self.call("project_world", agent_id=self.agent_id, **arguments)
        assert view["agent"]["agent_id"] == self.agent_id
        return dict(view)


@asynccontextmanager
async def conversation(served: Served, transport: str, agent_id: str, token: str,
                       on_message: MessageHandlerFnT | None = None) -> AsyncIterator[McpAgent]:
    """A new MCP session as ``agent_id`` (its ``token``) over ``transport``, initialized (``on_message``:
    the session's handler of what the server sends unasked, notifications included)."""
    if transport == "http":
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http, \
                streamable_http_client(served.url + "/mcp", http_client=http) as (read, write), \
                ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield McpAgent(session, agent_id)
        return
    env = {k: v for k, v in served.env.items() if k != "PMW_DB_URL"}  # the server's world, not a file of its own
    env |= {"PMW_SERVER": served.url, "PMW_TOKEN": token}
    params = StdioServerParameters(command=sys.executable, args=["-m", "engine.cli", "mcp"], env=env,
                                   cwd=str(served.root))
    with (served.root / f"mcp-{agent_id}.err").open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            yield McpAgent(session, agent_id)


def run_flow(flow: Callable[[], Awaitable[None]]) -> None:
    anyio.run(flow)


# -- the store, read through its own reader (the test's own connection: reads only) ------------------------

def rows(served: Served, table: str, **where: Any) -> list[dict[str, Any]]:
    """The rows of ``table`` matching ``where`` (equality), in primary-key order (events: log order)."""
    store = Store(served.env["PMW_DB_URL"])
    try:
        return [dict(r) for r in store.read.rows(table, where, order_by=("seq",) if table == "events" else ())]
    finally:
        store.close()


def events(served: Served, event_type: str, **where: Any) -> list[dict[str, Any]]:
    """The events of ``event_type`` matching ``where`` (``actor_id``, ``subject_id``), in log order."""
    return rows(served, "events", event_type=event_type, **where)


def one(found: list[dict[str, Any]]) -> dict[str, Any]:
    assert len(found) == 1, found
    return found[0]


# -- the server ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("mcp-flows")) as server:
        yield server


def governor(served: Served, name: str, **arguments: Any) -> Any:
    """A World call as the governor through the server's API (setup only; the flows act over MCP)."""
    return served.client(served.governor_token).call("world", name, (), {**arguments, "actor": GOVERNOR})


# -- MVP 1 --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mvp01_a_new_mcp_session_resumes_the_task_from_the_world(served: Served, transport: str) -> None:
    """MVP 1 over MCP: conversation 1 creates and claims a task, writes the first section's progress and a
    private note, and ends (it detaches its PMW session, so Alice is offline, and its MCP session closes;
    over stdio its ``pmw mcp`` process exits). The governor comments on the task; the controller wakes Alice
    (its owner, who follows it). Conversation 2 (a new MCP session, a new process over stdio, nothing
    carried over) registers a new PMW session on another terminal for the same identity, claims that wake,
    finds in its projection the progress and the note the first wrote, finishes the remaining sections,
    completes the task and acks."""
    alice = f"alice-{transport}"
    token = served.add_agent(alice, ["state.write", "task.create", "task.work", "memory.write"])
    ids: dict[str, str] = {}

    async def first() -> None:
        async with conversation(served, transport, alice, token) as agent:
            task = await agent.call("create_task", goal="write the quarterly report",
                                    constraints={"sections": SECTIONS})
            ids["task"] = task["task_id"]
            await agent.call("claim_task", task_id=task["task_id"])
            key = f"report:{task['task_id']}"
            entry = await agent.call("compare_and_set_state", key=key, expected_version=0,
                                     value={"done": ["intro"], "by": "conversation-1"})
            assert entry["version"] == 1
            note = await agent.call("store_memory", content="the figures come from the Q3 sheet",
                                    epistemic_type="observation")
            ids["note"] = note["memory_id"]
            (session,) = await agent.call("resolve_target", target=f"term:t-{alice}")
            ids["old_session"] = session["session_id"]
            await agent.call("detach_session", target=f"term:t-{alice}")   # the conversation ends: offline

    async def second() -> None:
        async with conversation(served, transport, alice, token) as agent:
            assert (await agent.call("get_agent", agent_id=alice))["status"] == "offline"
            reg = await agent.call("register_agent", agent_id=alice, display_name="Alice", role_id="worker",
                                   term_key=f"t-{alice}-2")              # a new conversation, the same identity
            ids["new_session"] = reg["session"]["session_id"]
            await agent.call("activate_session", target=f"session:{ids['new_session']}")
            wake = await agent.next_wake("task_owner", "subscriber")
            view = await agent.view(task_id=ids["task"])
            key = f"report:{ids['task']}"
            entry = next(s for s in view["state"] if s["key"] == key)
            assert (entry["version"], entry["value"]["done"]) == (1, ["intro"])   # resumed where the first stopped
            task = next(t for t in view["tasks"] if t["task_id"] == ids["task"])
            assert (task["status"], task["assignee"]) == ("claimed", alice)
            note = next(m for m in view["working_memory"] if m["memory_id"] == ids["note"])
            todo = [s for s in SECTIONS if s not in entry["value"]["done"]]
            done = await agent.call("compare_and_set_state", key=key, expected_version=entry["version"],
                                    value={"done": entry["value"]["done"] + todo, "by": "conversation-2"})
            await agent.call("complete_task", task_id=ids["task"],
                             result={"sections": SECTIONS, "source": note["content"]})
            receipt = await agent.call("ack_wake", wake_id=wake["wake_id"], decision="act", task_id=ids["task"],
                                       resulting_state_version=done["version"], action_refs=[f"state:{key}"])
            assert receipt["outcome"] == "acted"
            ids["wake"] = wake["wake_id"]

    run_flow(first)
    governor(served, "append_event", event_type="task.commented", payload={"note": "please finish"},
             subject_kind="task", subject_id=ids["task"])
    run_flow(second)

    key = f"report:{ids['task']}"
    state = one(rows(served, "state_entries", key=key))
    assert (state["version"], state["value"], state["updated_by"]) == (
        2, {"done": SECTIONS, "by": "conversation-2"}, alice)
    assert [e["resulting_version"] for e in events(served, "state.set", subject_id=key)] == [1, 2]  # nothing redone
    task = one(rows(served, "tasks", task_id=ids["task"]))
    assert (task["status"], task["owner_agent"], task["assignee"]) == ("completed", alice, alice)
    assert task["result"] == {"sections": SECTIONS, "source": "the figures come from the Q3 sheet"}
    note = one(rows(served, "memory", memory_id=ids["note"]))
    assert (note["owner"], note["scope"]) == (alice, "private")
    wake = one(rows(served, "wakes", wake_id=ids["wake"]))
    assert (wake["target_agent"], wake["status"]) == (alice, "acked")
    assert wake["cause"] in {"task_owner", "subscriber"}             # the task's owner, who follows its task
    assert set(wake["payload"]) <= WAKE_PAYLOAD_KEYS                                   # no transcript
    receipt = one(rows(served, "receipts", wake_id=ids["wake"]))
    assert (receipt["agent_id"], receipt["decision"], receipt["outcome"]) == (alice, "act", "acted")
    sessions = {r["session_id"]: (r["term_key"], r["status"]) for r in rows(served, "sessions", agent_id=alice)}
    assert sessions == {ids["old_session"]: (f"t-{alice}", "offline"),
                        ids["new_session"]: (f"t-{alice}-2", "active")}
    agent_row = one(rows(served, "agents", agent_id=alice))
    assert agent_row["status"] == "active"
    assert agent_row["capability_profile"] == {"capabilities": ["memory.write", "state.write", "task.create",
                                                                "task.work"]}   # kept across conversations


# -- MVP 2 --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mvp02_a_handoff_over_mcp_is_finished_from_the_packet_and_the_world(served: Served, transport: str
                                                                            ) -> None:
    """MVP 2 over MCP: the source (its own MCP session) drafts the summary, keeps private notes, and hands
    the task off with a packet of pointers (state ref, evidence refs, constraints, authority scope, expected
    output, return route). The target (another agent, another session) is woken by the controller
    (``handoff_target``), reads only its projection (the packet and the state it points at, never the
    source's notes), accepts, finalizes the state on the version it read, completes the task and the handoff,
    and acks."""
    src, dst = f"src-{transport}", f"dst-{transport}"
    src_token = served.add_agent(src, ["task.create", "task.work", "state.write", "handoff.create",
                                       "memory.write"])
    dst_token = served.add_agent(dst, ["task.work", "state.write"])
    key = f"incident-summary-{transport}"
    ids: dict[str, str] = {}
    packet: dict[str, Any] = {
        "current_state_ref": f"state:{key}", "evidence_refs": ["event:db-failover"],
        "constraints": {"max_words": 200, "audience": "customers"},
        "authority_scope": {"capabilities": ["state.write", "task.work"]},
        "expected_output": "the summary, final, under 200 words", "return_route": src}

    async def source() -> None:
        async with conversation(served, transport, src, src_token) as agent:
            task = await agent.call("create_task", goal="publish the incident summary")
            ids["task"] = task["task_id"]
            await agent.call("claim_task", task_id=task["task_id"])
            await agent.call("compare_and_set_state", key=key, expected_version=0,
                             value={"text": "outage 10:02-10:40", "status": "draft"})
            notes = await agent.call("store_memory", content="chat: user said ... I tried ... then I ...",
                                     epistemic_type="observation")
            ids["notes"] = notes["memory_id"]
            handoff = await agent.call("create_handoff", target_agent=dst, task_id=task["task_id"],
                                       goal="finish and publish the incident summary", **packet)
            ids["handoff"] = handoff["handoff_id"]

    async def target() -> None:
        async with conversation(served, transport, dst, dst_token) as agent:
            wake = await agent.next_wake("handoff_target")
            ids["wake"] = wake["wake_id"]
            view = await agent.view()
            assert ids["notes"] not in {m["memory_id"] for m in view["working_memory"] + view["shared_facts"]}
            h = next(h for h in view["handoffs"] if h["handoff_id"] == ids["handoff"])
            assert h["status"] == "pending" and h["target_agent"] == dst
            pointed = h["current_state_ref"].removeprefix("state:")
            entry = next(s for s in view["state"] if s["key"] == pointed)
            result = {"output": h["expected_output"], "state": f"state:{pointed}@{entry['version'] + 1}",
                      "max_words": h["constraints"]["max_words"]}
            await agent.call("accept_handoff", handoff_id=h["handoff_id"])
            final = await agent.call("compare_and_set_state", key=pointed, expected_version=entry["version"],
                                     value={**entry["value"], "status": "final", "reviewed_by": dst})
            await agent.call("complete_task", task_id=h["task_id"], result=result)
            await agent.call("complete_handoff", handoff_id=h["handoff_id"],
                             result={"route": h["return_route"], **result})
            await agent.call("ack_wake", wake_id=wake["wake_id"], decision="act", task_id=h["task_id"],
                             resulting_state_version=final["version"])

    run_flow(source)
    run_flow(target)

    stored = one(rows(served, "handoffs", handoff_id=ids["handoff"]))
    assert {k: stored[k] for k in packet} == packet                                    # the pointers, stored
    assert (stored["source_agent"], stored["target_agent"], stored["status"]) == (src, dst, "completed")
    assert stored["result"]["route"] == src
    state = one(rows(served, "state_entries", key=key))
    assert (state["version"], state["value"]["status"], state["updated_by"]) == (2, "final", dst)
    task = one(rows(served, "tasks", task_id=ids["task"]))
    assert (task["status"], task["assignee"], task["owner_agent"]) == ("completed", dst, src)
    wake = one(rows(served, "wakes", wake_id=ids["wake"]))
    assert (wake["target_agent"], wake["cause"], wake["status"]) == (dst, "handoff_target", "acked")
    assert set(wake["payload"]) <= WAKE_PAYLOAD_KEYS
    assert [e["actor_id"] for e in events(served, "handoff.accept", subject_id=ids["handoff"])] == [dst]
    receipt = one(rows(served, "receipts", wake_id=ids["wake"]))
    assert (receipt["agent_id"], receipt["outcome"]) == (dst, "acted")


# -- MVP 3 --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mvp03_a_wake_delivered_ten_times_over_mcp_is_one_wake_one_run_one_effect(served: Served,
                                                                                  transport: str) -> None:
    """MVP 3 over MCP: a boss enqueues the same wake (one idempotency key) five times, the worker (another
    agent, its own session) claims and runs it (one compare-and-set) and acks; five more deliveries and the
    worker finds nothing more to claim. One wake row, one ``wake.issued`` event, one effect, one receipt."""
    boss, worker = f"boss-{transport}", f"w-{transport}"
    boss_token = served.add_agent(boss, ["wake.enqueue"])
    worker_token = served.add_agent(worker, ["state.write"])
    key, counter = f"dup-key-{transport}", f"counter-{transport}"
    created: list[bool] = []
    ids: dict[str, str] = {}

    async def deliver(times: int) -> None:
        async with conversation(served, transport, boss, boss_token) as agent:
            for _ in range(times):
                answer = await agent.call("enqueue_wake", target_agent=worker, cause="recount", idempotency_key=key)
                created.append(answer["created"])
                ids.setdefault("wake", answer["wake"]["wake_id"])
                assert answer["wake"]["wake_id"] == ids["wake"]

    async def work() -> None:
        async with conversation(served, transport, worker, worker_token) as agent:
            wake = await agent.next_wake("recount")
            assert wake["wake_id"] == ids["wake"]
            view = await agent.view()
            entry = next((s for s in view["state"] if s["key"] == counter), None)
            version, value = (entry["version"], entry["value"]) if entry else (0, 0)
            done = await agent.call("compare_and_set_state", key=counter, expected_version=version, value=value + 1)
            await agent.call("ack_wake", wake_id=wake["wake_id"], decision="act",
                             resulting_state_version=done["version"], action_refs=[f"state:{counter}"])

    async def nothing_left() -> None:
        async with conversation(served, transport, worker, worker_token) as agent:
            assert await agent.call("claim_wake") is None

    run_flow(lambda: deliver(5))
    run_flow(work)
    run_flow(lambda: deliver(5))
    run_flow(nothing_left)

    assert created == [True] + [False] * 9
    wake = one(rows(served, "wakes", idempotency_key=key))
    assert (wake["wake_id"], wake["target_agent"], wake["status"]) == (ids["wake"], worker, "acked")
    assert len(events(served, "wake.issued", subject_id=ids["wake"])) == 1
    assert len(events(served, "state.set", actor_id=worker)) == 1                           # one effect
    state = one(rows(served, "state_entries", key=counter))
    assert (state["version"], state["value"]) == (1, 1)
    receipt = one(rows(served, "receipts", wake_id=ids["wake"]))
    assert (receipt["agent_id"], receipt["outcome"]) == (worker, "acted")


# -- MVP 15 -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
def test_mvp15_an_agent_woken_over_mcp_with_nothing_to_do_leaves_a_no_action_receipt(served: Served,
                                                                                      transport: str) -> None:
    """MVP 15 over MCP: the watcher follows a key (``subscribe``); a writer sets it; the controller wakes
    the watcher (``subscriber``); the watcher reads its projection, decides nothing needs doing and acks
    ``no_action`` with its reason. Its wake ends in exactly one receipt, decision and outcome ``no_action``,
    and it wrote nothing. Over streamable HTTP the watcher does not poll: it subscribes to its projection
    resource and is told (``notifications/resources/updated``) when the wake is queued, then claims it
    (a ``pmw mcp`` on a server does not forward notifications, so over stdio it polls ``claim_wake``)."""
    writer, watcher = f"writer-{transport}", f"watcher-{transport}"
    writer_token = served.add_agent(writer, ["state.write"])
    watcher_token = served.add_agent(watcher, ["state.write"])
    key = f"weather-{transport}"
    uri = f"pmw://agents/{watcher}/projection"
    ids: dict[str, str] = {}
    told: list[str] = []
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            told.append(message.params.uri)
            updated.set()

    async def follow() -> None:
        async with conversation(served, transport, watcher, watcher_token) as agent:
            await agent.call("subscribe", subject_id=key)

    async def write() -> None:
        async with conversation(served, transport, writer, writer_token) as agent:
            await agent.call("compare_and_set_state", key=key, expected_version=0, value="sunny")

    async def watch() -> None:
        async with conversation(served, transport, watcher, watcher_token, on_message) as agent:
            if transport == "http":
                with warnings.catch_warnings():  # resources/subscribe: the handshake era's (2026-07-28 has listen)
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await agent.session.subscribe_resource(uri)
            await write()                                  # another agent, another session
            if transport == "http":
                with anyio.fail_after(WAKE_TIMEOUT_S):
                    await updated.wait()                   # pushed: the wake is queued
            wake = await agent.next_wake("subscriber")
            ids["wake"] = wake["wake_id"]
            view = await agent.view()
            assert next(s for s in view["state"] if s["key"] == key)["value"] == "sunny"
            receipt = await agent.call("ack_wake", wake_id=wake["wake_id"], decision="no_action",
                                       reason="nothing changed")
            assert (receipt["decision"], receipt["outcome"]) == ("no_action", "no_action")

    run_flow(follow)
    run_flow(watch)

    if transport == "http":
        assert told and set(told) == {uri}
    wake = one(rows(served, "wakes", wake_id=ids["wake"]))
    assert (wake["target_agent"], wake["cause"], wake["status"]) == (watcher, "subscriber", "acked")
    receipt = one(rows(served, "receipts", wake_id=ids["wake"]))
    assert (receipt["agent_id"], receipt["decision"], receipt["outcome"], receipt["reason"], receipt["action_refs"]
            ) == (watcher, "no_action", "no_action", "nothing changed", [])
    assert len(rows(served, "receipts", agent_id=watcher)) == 1
    assert events(served, "state.set", actor_id=watcher) == []
    assert [e["actor_id"] for e in events(served, "state.set", subject_id=key)] == [writer]

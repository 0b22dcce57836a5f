"""``docs/agents.md`` runs as written, against a real ``pmw serve`` (``tests/service/support.py`` ``Served``,
the real PDP, real tokens):

- its Python agent (``counter_agent.py``, the block copied out of the page) waits on the wake stream, pulls,
  reads its projection, asks ``allowed_actions`` and sends its decision: each wake ends acted, and the
  store holds what it wrote (one ``state.set`` per wake, one receipt per wake); so does the same agent on
  the World's API (``world_agent.py``: ``engine.client.connect``, ``world.wakes()``);
- its desktop configuration line (the ``mcpServers`` JSON block) starts ``pmw mcp`` over stdio as the
  token's agent, for the official MCP client; every PMW tool the page's parity table names is one of the
  tools that server lists, and the table covers each of pic-agent-call's 21 tools.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from store import Store
from tests.cli_support import REPO
from tests.service.support import Served

DOC = REPO / "docs" / "agents.md"
AGENT_TIMEOUT_S = 120.0
#: pic-agent-call's tools (seed 002; ../shared/notes/transports-and-conformance.md)
PIC_AGENT_CALL = {
    "add-observation", "query-entity", "stats", "create_entities", "add_observations", "create_relations",
    "read_graph", "search_nodes", "create_task", "list_pending_tasks", "claim_task", "complete_task",
    "fail_task", "get_task", "channel_send", "channel_list_unread", "channel_claim", "channel_ack",
    "register_agent", "unregister_agent", "agent_status"}


def blocks(language: str) -> list[str]:
    """The page's fenced code blocks in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def the_block(language: str, marker: str) -> str:
    (found,) = [b for b in blocks(language) if marker in b]
    return found


def parity_rows() -> dict[str, str]:
    """The parity table: pic-agent-call's tool -> the PMW column (as written)."""
    section = DOC.read_text().split("## 5. Parity with pic-agent-call", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    return rows


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("agents-doc")) as server:
        yield server


def _rows(served: Served, table: str, **where: Any) -> list[dict[str, Any]]:
    store = Store(served.env["PMW_DB_URL"])
    try:
        return [dict(r) for r in store.read.rows(table, where)]
    finally:
        store.close()


def _run_agent(served: Served, script: Path, agent: str, token: str, boss_token: str, key: str) -> dict[str, Any]:
    """Start the page's agent (``--once``), queue one wake for it as the boss, wait for it to exit; the line
    it printed for the wake."""
    env = {**served.env, "PMW_SERVER": served.url, "PMW_TOKEN": token, "PMW_AGENT": agent}
    proc = subprocess.Popen([sys.executable, str(script), "--once"], env=env, cwd=served.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        boss = served.client(boss_token)
        wake = boss.call("world", "enqueue_wake", (), {"target_agent": agent, "cause": "recount",
                                                        "idempotency_key": key})
        out, err = proc.communicate(timeout=AGENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        raise AssertionError(f"the page's agent did not finish within {AGENT_TIMEOUT_S} s") from None
    assert proc.returncode == 0, err
    (line,) = out.splitlines()
    printed = dict(json.loads(line))
    assert printed["wake"] == wake.wake.wake_id
    return printed


def test_the_python_agent_of_the_page_runs_as_written(served: Served, tmp_path: Path) -> None:
    script = tmp_path / "counter_agent.py"
    script.write_text(the_block("python", '"""counter_agent.py'))
    agent = "counter-agent"
    token = served.add_agent(agent, ["state.write"])
    boss_token = served.add_agent("boss", ["wake.enqueue"])
    first = _run_agent(served, script, agent, token, boss_token, "recount-1")    # no counter yet: creates it
    second = _run_agent(served, script, agent, token, boss_token, "recount-2")   # asks allowed_actions first
    assert (first["outcome"], second["outcome"]) == ("acted", "acted")
    (entry,) = _rows(served, "state_entries", key="counter")
    assert (entry["version"], entry["value"], entry["updated_by"]) == (2, 2, agent)
    assert len(_rows(served, "events", event_type="state.set", actor_id=agent)) == 2
    for wake_id in (first["wake"], second["wake"]):
        (wake,) = _rows(served, "wakes", wake_id=wake_id)
        (receipt,) = _rows(served, "receipts", wake_id=wake_id)
        assert (wake["status"], receipt["agent_id"], receipt["outcome"]) == ("acked", agent, "acted")


def test_the_world_api_agent_of_the_page_runs_as_written(served: Served, tmp_path: Path) -> None:
    """``world_agent.py`` (the World's calls through ``engine.client.connect``) handles one wake: the counter
    moves by one, written by it, and its wake ends in one ``acted`` receipt."""
    script = tmp_path / "world_agent.py"
    script.write_text(the_block("python", '"""world_agent.py'))
    agent = "world-agent"
    token = served.add_agent(agent, ["state.write"])
    boss_token = served.add_agent("boss-2", ["wake.enqueue"])
    before = _rows(served, "state_entries", key="counter")
    version = before[0]["version"] if before else 0
    env = {**served.env, "PMW_SERVER": served.url, "PMW_TOKEN": token, "PMW_AGENT": agent}
    proc = subprocess.Popen([sys.executable, str(script), "--once"], env=env, cwd=served.root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wake = served.client(boss_token).call("world", "enqueue_wake", (), {
            "target_agent": agent, "cause": "recount", "idempotency_key": "world-agent-1"}).wake
        _out, err = proc.communicate(timeout=AGENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=10)
        raise AssertionError(f"the page's World-API agent did not finish within {AGENT_TIMEOUT_S} s") from None
    assert proc.returncode == 0, err
    (entry,) = _rows(served, "state_entries", key="counter")
    assert (entry["version"], entry["value"], entry["updated_by"]) == (version + 1, version + 1, agent)
    (row,) = _rows(served, "wakes", wake_id=wake.wake_id)
    (receipt,) = _rows(served, "receipts", wake_id=wake.wake_id)
    assert (row["status"], receipt["agent_id"], receipt["outcome"], receipt["action_refs"]) == (
        "acked", agent, "acted", ["state:counter"])


def test_the_desktop_config_line_serves_every_tool_the_page_names(served: Served) -> None:
    config = json.loads(the_block("json", '"mcpServers"'))["mcpServers"]["pmw"]
    agent = "desktop-agent"
    token = served.add_agent(agent, [])
    command = config["command"].replace("/path/to/pmw", str(REPO))
    assert Path(command).is_file(), command
    env = {**config["env"], "PMW_SERVER": served.url, "PMW_TOKEN": token}
    assert set(env) == set(config["env"])                                  # nothing but what the page sets
    listed: set[str] = set()

    async def session() -> None:
        params = StdioServerParameters(command=command, args=config["args"], env=env, cwd=str(served.root))
        with (served.root / "desktop-mcp.err").open("a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                listed.update(t.name for t in (await s.list_tools()).tools)
                me = await s.call_tool("get_agent", {"agent_id": agent})
                assert not me.is_error and me.structured_content is not None
                assert me.structured_content["agent_id"] == agent
    anyio.run(session)

    rows = parity_rows()
    assert set(rows) == PIC_AGENT_CALL
    named = {name for cell in rows.values() for name in re.findall(r"`([a-z_]+)`", cell)}
    assert named and named <= listed, sorted(named - listed)
    assert {"claim_wake", "ack_wake", "project_world", "allowed_actions", "compare_and_set_state"} <= listed

"""``benchmarks/cli_latency.py`` in its CI-sized variant, and the CLI as a client of the server it starts.

- ``python -m benchmarks.cli_latency --runs 2`` exits 0 and prints the side-by-side table (both commands,
  both modes, the ratio column). No timing is asserted: the figures belong to the benchmark.
- Against a real ``pmw serve`` subprocess (the benchmark's own ``served``: real store, PDP and HTTP API),
  ``pmw exec NAME --json BODY`` sends the call by its name (``execute`` is not served): the write is made as
  the token's agent, ``--op-id`` replays it, a bad body exits 3 before anything is sent, and ``--as`` another
  agent is refused by the server. ``pmw commands`` answers from the local registry in client mode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli_latency import GOVERNOR, base_env, init_world, served
from engine.errors import PolicyUnavailable
from engine.policy.pdp_process import cerbos_binary

REPO = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True)
def _needs_cerbos() -> None:
    try:
        cerbos_binary()
    except PolicyUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))


def test_ci_sized_run_prints_the_table() -> None:
    done = subprocess.run([sys.executable, "-m", "benchmarks.cli_latency", "--runs", "2"], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("CLI latency: medians of 2 run(s) each")
    header = lines[1]
    for column in ("command", "client (pmw serve)", "embedded", "embedded/client"):
        assert column in header
    rows = {line.split("  ")[0].strip(): line for line in lines[2:]}
    assert set(rows) == {"pmw --help", f"pmw --json agents show {GOVERNOR}"}
    for row in rows.values():
        assert row.count(" / ") == 2 and "x  " in row and ("PASS" in row or "MISS" in row)


@pytest.fixture(scope="module")
def client_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    env = base_env(tmp_path_factory.mktemp("served"))
    token = init_world(env)
    with served(env) as url:
        yield {**env, "PMW_SERVER": url, "PMW_TOKEN": token}


def pmw(env: dict[str, str], *args: str) -> tuple[int, Any, str]:
    done = subprocess.run([sys.executable, "-m", "engine.cli", "--json", *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def test_exec_sends_the_call_by_name(client_env: dict[str, str]) -> None:
    code, task, err = pmw(client_env, "exec", "create_task", "--json", '{"goal": "by name"}')
    assert code == 0, err
    assert task["goal"] == "by name" and task["owner_agent"] == GOVERNOR
    code, listed, err = pmw(client_env, "tasks", "list")
    assert code == 0, err
    assert task["task_id"] in {t["task_id"] for t in listed}


def test_exec_op_id_replays(client_env: dict[str, str]) -> None:
    body = '{"goal": "once"}'
    code, first, err = pmw(client_env, "exec", "create_task", "--json", body, "--op-id", "op-once")
    assert code == 0, err
    code, again, err = pmw(client_env, "exec", "create_task", "--json", body, "--op-id", "op-once")
    assert code == 0, err
    assert again["task_id"] == first["task_id"]


def test_exec_bad_body_and_other_actor_change_nothing(client_env: dict[str, str]) -> None:
    _, before, _ = pmw(client_env, "tasks", "list")
    code, _, err = pmw(client_env, "exec", "create_task", "--json", '{"gaol": "typo"}')
    assert code == 3 and json.loads(err)["code"] == "invalid_input"
    code, _, err = pmw(client_env, "--as", "bob", "exec", "create_task", "--json", '{"goal": "as bob"}')
    assert code == 6 and json.loads(err)["code"] == "not_permitted"
    _, after, _ = pmw(client_env, "tasks", "list")
    assert after == before


def test_commands_lists_the_local_registry_in_client_mode(client_env: dict[str, str]) -> None:
    code, listed, err = pmw(client_env, "commands")
    assert code == 0, err
    assert "create_task" in {c["name"] for c in listed}

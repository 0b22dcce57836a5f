"""The README's quick start (the ``bash`` block under "Quick start") runs as written: ``pmw init`` with a
governor, ``pmw serve`` in the background, CLI clients with ``PMW_SERVER``/``PMW_TOKEN``, a SIGTERM stop.

Only the port is replaced by a free one (tests run side by side). The block runs under ``bash -euo pipefail``
in a temporary directory with ``.venv/bin`` first on ``PATH``; a server left running by a failed step is
stopped by the PID it printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

from tests.cli_support import REPO, require_cerbos
from tests.service.support import base_env

README = REPO / "README.md"
PORT = "8765"


def quickstart_block() -> str:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    return str(block)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    require_cerbos()
    block = quickstart_block()
    assert "pmw serve" in block.replace("--as gov ", "") and "PMW_SERVER" in block and "PMW_TOKEN" in block
    assert block.count(PORT) == 2
    script = block.replace(PORT, str(free_port()))
    env = base_env(tmp_path / "pmw-data")
    env.pop("PMW_DB_URL")  # the quick start uses the default world, ./pmw-data/world.db
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
    finally:
        served = tmp_path / "serve.json"
        if served.exists() and served.read_text().strip():
            pid = int(json.loads(served.read_text())["pid"])
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    tail = json.loads(done.stdout.strip().splitlines()[-1])  # events tail --limit 3 (--json: one line)
    assert any(e["subject_id"] == "plan" and e["actor_id"] == "alice" for e in tail), tail
    assert (tmp_path / "pmw-data" / "world.db").is_file()
    assert not (tmp_path / "pmw-data" / "serve.lock").exists()  # stopped cleanly: the lock released

"""Child: one registered agent claims one task at the same moment as its rivals.

Usage: ``python -m tests.procs.claimer URL AGENT_ID TASK_ID READY_FILE START_FILE``

Opens the world, reads the task (so the connection is up), creates ``READY_FILE``, waits for
``START_FILE`` (the barrier), then claims. Prints one JSON line: ``{"outcome": "won", ...}`` or
``{"outcome": "error", "code": ..., "type": ...}`` for a typed PMW error, and exits 0. Anything that is
not a PMW error propagates (non-zero exit).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.procs import wait_for_start


def main(argv: list[str]) -> int:
    url, agent_id, task_id, ready_file, start_file = argv
    from engine.errors import PMWError
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    book = open_world(url, policy=LocalScopeRules())
    world = book.world
    try:
        world.get_task(task_id)
        Path(ready_file).touch()
        wait_for_start(start_file)
        try:
            task = world.claim_task(agent_id, task_id)
        except PMWError as exc:
            out = {"agent": agent_id, "outcome": "error", "code": exc.code, "type": type(exc).__name__,
                   "details": exc.details()}
        else:
            out = {"agent": agent_id, "outcome": "won", "assignee": task.assignee, "status": task.status.value,
                   "version": task.version}
        print(json.dumps(out, sort_keys=True), flush=True)
        return 0
    finally:
        book.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

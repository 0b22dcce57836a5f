"""Child: one worker host's process. Opens the world at DB_URL (its own PDPs on its own loopback, serving the
shared deployment root), runs every due wake of AGENTS (each woken agent writes the one state key of its
wake, after WORK_S seconds of "thinking", so leases are held a while) until STOP_FILE exists, then writes
a JSON report to REPORT_FILE.

Usage: ``python -m tests.multihost.worker_child DB_URL DEPLOY_ROOT WORKER_ID LEASE_S WORK_S PDPS AGENTS
STOP_FILE REPORT_FILE [SUPERVISE]`` (AGENTS comma-separated; SUPERVISE ``1``: the PDPs are supervised, a killed
one restarted on its ports, as ``pmw serve`` does; default ``0``)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

MAX_LOOPS = 100_000


def main(argv: list[str]) -> int:
    url, deploy_root, worker_id, lease_s, work_s, pdps, agents, stop_file, report_file = argv[:9]
    supervise = argv[9:] == ["1"]
    from engine.errors import PMWError
    from engine.protocol.adapters import AgentDecision, RuleAgent, SetState
    from engine.protocol.worker import Worker
    from engine.runtime import Runtime
    from engine.settings import load_settings

    def rule(agent: Any, view: Any, wake: Any) -> AgentDecision | None:
        time.sleep(float(work_s))
        # the wake's own key, whatever the projection showed: it rests on nothing else (reads=[]), so the other
        # hosts' writes between its projection and its commit are no conflict (they were 174 of 254 receipts)
        return AgentDecision(decision="act", reads=[],
                             effects=[SetState(key=f"n/{wake.wake_id}", expected_version=0, value=1)])

    settings = load_settings(db_url=url, policy_deploy_root=Path(deploy_root), pdp_replicas=int(pdps))
    errors: dict[str, int] = {}
    cycles = 0
    with Runtime.open(settings, supervise=supervise) as runtime:
        worker = Worker(runtime.book, worker_id, {a: RuleAgent([rule]) for a in agents.split(",")},
                        lease_seconds=float(lease_s))
        Path(report_file + ".ready").touch()
        for _ in range(MAX_LOOPS):
            if Path(stop_file).exists():
                break
            try:
                cycle = worker.run_once()
            except PMWError as exc:
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                time.sleep(0.1)
                continue
            if cycle is None:
                time.sleep(0.1)
            else:
                cycles += 1
    Path(report_file).write_text(json.dumps({"worker": worker_id, "cycles": cycles, "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

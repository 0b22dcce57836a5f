"""Child: a ``--role controller`` service (in process: no HTTP) on DB_URL deciding with the PDP at PDP_ADDRESS;
every 50 ms it writes its health's leader state and generation to STATUS_FILE (atomically), until STOP_FILE
exists. Usage: ``python -m tests.multihost.controller_child DB_URL PDP_ADDRESS LEASE_S STATUS_FILE STOP_FILE
[RULES_DIR [DEPLOY_ROOT PDPS]]``: RULES_DIR the controller's rules (default ``rules/``); PDP_ADDRESS ``-``
with DEPLOY_ROOT and PDPS: PDPS supervised PDPs of its own on its loopback, serving DEPLOY_ROOT's deployment."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

MAX_TICKS = 100_000


def main(argv: list[str]) -> int:
    url, pdp, lease_s, status_file, stop_file = argv[:5]
    from engine.runloop.runner import DEFAULT_RULES
    from engine.service.host import Service
    from engine.settings import load_settings

    rules = Path(argv[5]) if len(argv) > 5 else DEFAULT_RULES
    settings = (load_settings(db_url=url, policy_deploy_root=Path(argv[6]), pdp_replicas=int(argv[7]))
                if pdp == "-" else load_settings(db_url=url, pdp_address=pdp))
    service = Service(settings, role="controller", governor="gov", leader_lease_s=float(lease_s), poll_s=0.05,
                      rules=rules)
    service.start()
    try:
        for _ in range(MAX_TICKS):
            if Path(stop_file).exists():
                break
            health = service.health()
            tmp = f"{status_file}.{os.getpid()}"
            Path(tmp).write_text(json.dumps({"leader": health.leader, "generation": health.leader_generation,
                                             "takeovers": service.takeovers, "at": time.time()}))
            os.replace(tmp, status_file)
            time.sleep(0.05)
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Child program: start a PDP, print its PID, then wait to be killed (the parent SIGKILLs this process)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from engine.policy.pdp_process import ManagedPdp


def main() -> None:
    pdp = ManagedPdp(Path(sys.argv[1]))
    pdp.start()
    os.write(1, (json.dumps({"pdp_pid": pdp.pid}) + "\n").encode())
    time.sleep(120)  # bounded; the parent kills us long before


if __name__ == "__main__":
    main()

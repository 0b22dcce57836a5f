"""Child program: start a PDP, print its PID and working directory, then wait to be killed (the parent
SIGKILLs this process).

``python -m tests.procs.pdp_owner POLICY_DIR [--run-dir DIR] [--from-thread]``: ``--run-dir`` is the
ManagedPdp's ``run_dir``; ``--from-thread`` starts the PDP from a thread that exits before the line is
printed (the PDP must outlive that thread and still die with this process)."""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from pathlib import Path

from engine.policy.pdp_process import ManagedPdp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("policy_dir", type=Path)
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--from-thread", action="store_true")
    args = parser.parse_args()
    pdp = ManagedPdp(args.policy_dir, run_dir=args.run_dir)
    if args.from_thread:
        starter = threading.Thread(target=pdp.start, name="short-lived-starter")
        starter.start()
        starter.join(60)
        time.sleep(0.5)  # the starter thread is gone: a per-thread parent-death signal would have fired
    else:
        pdp.start()
    os.write(1, (json.dumps({"pdp_pid": pdp.pid, "workdir": str(pdp.workdir)}) + "\n").encode())
    time.sleep(120)  # bounded; the parent kills us long before


if __name__ == "__main__":
    main()

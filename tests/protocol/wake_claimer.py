"""Child (and thread) program of the claim race: claim and ack wakes of one queue until it is empty.

Usage: ``python -m tests.protocol.wake_claimer URL PDP_GRPC PDP_HTTP WORKER_ID AGENTS OUT_FILE START_FILE
DEADLINE_S``

``AGENTS`` is a comma-separated list. The child opens the world (decided by the PDP at the address),
waits for ``START_FILE`` (the barrier), then claims and acks until a claim answers ``None`` twice in a row
or ``DEADLINE_S`` seconds pass. It appends one JSON line to ``OUT_FILE`` per ack (``{"acked": wake_id}``)
and one per exception raised by ``claim_wake`` or ``ack_wake`` (``{"error": type, "message": ...}``),
then one ``{"done": worker_id}``. Exit code 0 unless the program itself failed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tests.procs import emit, wait_for_start


def claim_and_ack(world: Any, worker_id: str, agents: list[str], out: Path, deadline_s: float) -> None:
    """The claimer's loop (shared by the race's threads and processes): every exception is recorded, never
    raised, so that the parent counts them."""
    idle = 0
    stop = time.monotonic() + deadline_s
    while idle < 2 and time.monotonic() < stop:
        try:
            wake = world.claim_wake(worker_id, agent_ids=agents, lease_seconds=60.0)
        except Exception as exc:  # noqa: BLE001 - the race counts every exception
            emit(out, error=type(exc).__name__, message=str(exc), at="claim")
            continue
        if wake is None:
            idle += 1
            time.sleep(0.01)
            continue
        idle = 0
        try:
            world.ack_wake(worker_id, wake.wake_id, "no_action", op_id=f"{wake.wake_id}:ack")
        except Exception as exc:  # noqa: BLE001
            emit(out, error=type(exc).__name__, message=str(exc), at="ack")
            continue
        emit(out, acked=wake.wake_id, worker=worker_id)
    emit(out, done=worker_id)


def main(argv: list[str]) -> int:
    url, grpc, http, worker_id, agents, out_file, start_file, deadline_s = argv
    from engine.policy.cerbos_adapter import CerbosPdp
    from engine.policy.enforcement import PdpAuthorizer
    from engine.policy.pdp_process import PdpAddress
    from engine.sources import RandomIds, SystemClock
    from engine.world.book import RuntimeBook
    from store import Store

    pdp = CerbosPdp(PdpAddress(grpc=grpc, http=http))
    store = Store(url)
    book = RuntimeBook(store, policy=PdpAuthorizer(pdp, store.read), clock=SystemClock(), ids=RandomIds())
    try:
        wait_for_start(start_file)
        claim_and_ack(book.world, worker_id, agents.split(","), Path(out_file), float(deadline_s))
        return 0
    finally:
        book.close()
        pdp.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

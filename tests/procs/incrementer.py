"""Child: ``increments`` read-modify-write increments of one state key through the gateway.

Usage: ``python -m tests.procs.incrementer URL ACTOR KEY INCREMENTS READY_FILE START_FILE``

Each increment reads the key and compare-and-sets ``value + 1`` at the version it read; on
``VersionConflict`` it re-reads and tries again after a short random back-off (at most ``MAX_ATTEMPTS`` times per
increment; the back-off only saves CPU on a small machine, correctness never depends on it). Prints
one JSON line (increments done, conflicts seen) and exits 0; any other error exits non-zero.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from tests.procs import wait_for_start

MAX_ATTEMPTS = 10_000
BACKOFF_S = 0.01
BACKOFF_CAP = 16


def main(argv: list[str]) -> int:
    url, actor, key, increments, ready_file, start_file = argv
    from engine.errors import VersionConflict
    from engine.policy.enforcement import LocalScopeRules
    from engine.world.book import open_world

    book = open_world(url, policy=LocalScopeRules())
    world = book.world
    try:
        world.get_state(key)  # connect before the barrier
        Path(ready_file).touch()
        wait_for_start(start_file)
        conflicts = 0
        rng = random.Random()
        for _ in range(int(increments)):
            for attempt in range(MAX_ATTEMPTS):
                entry = world.get_state(key)
                try:
                    world.compare_and_set_state(actor, key, entry.version, entry.value + 1)
                    break
                except VersionConflict:
                    conflicts += 1
                    time.sleep(rng.uniform(0, BACKOFF_S * min(2 ** attempt, BACKOFF_CAP)))
            else:
                print(json.dumps({"error": f"no success in {MAX_ATTEMPTS} attempts"}), flush=True)
                return 3
        print(json.dumps({"actor": actor, "increments": int(increments), "conflicts": conflicts}), flush=True)
        return 0
    finally:
        book.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

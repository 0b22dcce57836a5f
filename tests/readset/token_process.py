"""A second process over a world (run as ``python -m tests.readset.token_process``): it opens the world at
the URL it is given, then either reads a key and prints its read token (``issue URL KEY``) or writes with a
token it is given (``write URL ACTOR KEY EXPECTED VALUE TOKEN``) and prints ``{"version": n}`` or
``{"error": code}``. What the cross-process tests of ``test_read_tokens_runloop`` run in another process."""

from __future__ import annotations

import sys
import tempfile

import orjson

from engine.errors import PMWError
from engine.policy.enforcement import LocalScopeRules
from engine.sources import ManualClock
from engine.world.book import open_world


def main(argv: list[str]) -> int:
    mode, url = argv[0], argv[1]
    with tempfile.TemporaryDirectory() as artifacts:
        book = open_world(url, policy=LocalScopeRules(), artifact_dir=artifacts, clock=ManualClock())
        try:
            world = book.world
            if mode == "issue":
                out: dict[str, object] = {"token": world.get_state(argv[2]).read_token}
            else:
                actor, key, expected, value, token = argv[2:7]
                try:
                    entry = world.compare_and_set_state(actor, key, int(expected), orjson.loads(value),
                                                        read_token=token)
                    out = {"version": entry.version}
                except PMWError as exc:
                    out = {"error": exc.code}
        finally:
            book.close()
    sys.stdout.write(orjson.dumps(out).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Shadow mode over the recorded log: what a changed rule set would have decided differently.

The world's events are replayed from the start of the log (or its first ``limit`` events), each with the
world facts its recorded changes imply and the chain the live follower would give it, through the rules
in force and the candidate rules, each in a private controller. Nothing is committed and the live
controller is not touched.
"""

from __future__ import annotations

from pathlib import Path

from engine.controller import Controller, Observation
from engine.controller.facts import Fact
from engine.controller.shadow import ShadowDiff
from engine.runloop.follower import SKIPPED_EVENTS, ControllerLoop
from engine.runloop.world_facts import fact_changes
from engine.world.book import RuntimeBook


def recorded_observations(book: RuntimeBook, *, limit: int = 100_000, world_id: str = "main",
                          rule_dir: Path | str = "rules") -> list[Observation]:
    """The log's first ``limit`` events as controller inputs (facts and chains as the follower derives them)."""
    chains = ControllerLoop(book, rule_dir, world_id=world_id)  # only its event reading is used
    known: dict[str, Fact] = {}
    inputs: list[Observation] = []
    for row in book.store.read.events(0, limit):
        if row["event_type"] in SKIPPED_EVENTS:
            continue
        upserts, retracts = fact_changes(row, known)
        for fid in retracts:
            known.pop(fid, None)
        known.update({f["id"]: f for f in upserts})
        depth, chain, origin = chains._chain(row)
        event = {k: row[k] for k in ("seq", "event_id", "event_type", "actor_id", "subject_kind", "payload",
                                     "causation_id", "created_at_us")}
        event.update(subject_id=str(row["subject_id"])[:256], correlation_id=chain, cascade_depth=depth,
                     chain_origin_us=origin)
        inputs.append(Observation(event, tuple(upserts), tuple(retracts)))
    return inputs


def shadow_log(book: RuntimeBook, current_rules: Path | str, candidate_rules: Path | str, *, limit: int = 100_000,
               world_id: str = "main") -> list[ShadowDiff]:
    """Replay the log through both rule sets; the events whose decisions differ. A candidate directory that
    does not validate raises ``RuleFileError``."""
    controller = Controller(world_id, current_rules)
    controller.load()
    try:
        return controller.shadow(recorded_observations(book, limit=limit, world_id=world_id,
                                                       rule_dir=current_rules), candidate_rules)
    finally:
        controller.close()


__all__ = ["recorded_observations", "shadow_log"]

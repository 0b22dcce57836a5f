"""Which event types an agent may append by hand, and which only the World's own calls write.

The controller's rules react to event types (``rules/*.yaml``): a ``handoff.created`` wakes its target, a
``memory.propose`` routes a review, a ``review.requested`` isolates a reviewer. An event appended with
``append_event`` carries no row images, but a rule keyed on its type cannot tell it from the real one.
So ``append_event`` refuses (``InvalidInput`` naming ``event_type``, nothing written):

* :data:`COMMAND_EVENTS`: every event type a registered command declares (``engine.commands``: derived
  from the registry, so a new command's events are refused without a list to keep);
* :data:`TOKEN_EVENTS`: the token calls' (``token.issued``, ``token.revoked``);
* :data:`RUNTIME_EVENTS`: the event types of the runtime book's calls (bootstrap, epochs, recorded
  decisions, controller steps, revocations, denial records, snapshots), keyed by the call that writes them;
* :data:`CONTROLLER_EVENTS`: the records the controller's agent appends for its decisions (a contest, a
  refresh demand), from any other agent.

Event types that change the controller's decisions and that agents may append are decision events
(``engine.policy.model.DECISION_EVENTS``): the policy decides who may append each. Every other type
the rules react to is the appender's own record (a claim, a delta, a risk) and is documented as harmless
in ``docs/policy.md`` ("Event types").
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from engine.commands import COMMANDS
from engine.world.snapshots import SNAPSHOT_EVENT
from engine.world.tokens import TOKEN_CALL_EVENTS

#: What a command declares when its caller names the event type (``append_event``).
CALLER_NAMED = "<event_type>"

#: Every event type the registered commands write.
COMMAND_EVENTS: frozenset[str] = frozenset(e for c in COMMANDS.values() for e in c.events if e != CALLER_NAMED)

#: The runtime book's calls and the event types each writes (``engine.world.book.RuntimeBook``).
RUNTIME_CALL_EVENTS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "bootstrap_governor": ("governor.bootstrapped",),
    "activate_policy_epoch": ("policy.activated",),
    "record_decision": ("agent.decided",),
    "commit_controller_step": ("controller.step",),
    "recheck_queued_work": ("wake.revoked", "handoff.revoked"),
    "record_denial": ("policy.denied",),
    "take_snapshot": (SNAPSHOT_EVENT,),
})
RUNTIME_EVENTS: frozenset[str] = frozenset(e for events in RUNTIME_CALL_EVENTS.values() for e in events)

#: The token calls' event types (``engine.world.tokens``; also command events once their commands are
#: registered: the same names either way).
TOKEN_EVENTS: frozenset[str] = frozenset(e for events in TOKEN_CALL_EVENTS.values() for e in events)

#: Everything only the World's own calls write.
WORLD_EVENTS: frozenset[str] = COMMAND_EVENTS | RUNTIME_EVENTS | TOKEN_EVENTS

#: The records of the controller's decisions, appended by its agent (``engine.runloop.follower``).
CONTROLLER_EVENTS: frozenset[str] = frozenset({"claim.contested", "context.refresh_required"})


#: Event types the rules react to (``rules/*.yaml``) that an agent appends as its own record, and why
#: that steers nothing it could not do itself. (Payload-keyed rules, which match any type, are in
#: ``docs/policy.md``, "Event types".)
AGENT_RECORDS: Mapping[str, str] = MappingProxyType({
    "claim.asserted": "the appender's own claim on a term: facts are keyed by the appender, and a contest convenes "
                      "only the two claimants in a room in the controller's namespace, which nobody else can take",
})


def append_refusal(actor: str, event_type: str, controller: str) -> str | None:
    """Why ``actor`` may not append an event of ``event_type`` by hand (``None``: the policy decides it);
    ``controller``: the controller's agent id."""
    if event_type in WORLD_EVENTS:
        return f"{event_type!r} is written only by the World's own call, never appended by hand"
    if event_type in CONTROLLER_EVENTS and actor != controller:
        return f"{event_type!r} records a decision of the controller ({controller}) and is appended only by it"
    return None


__all__ = ["AGENT_RECORDS", "CALLER_NAMED", "COMMAND_EVENTS", "CONTROLLER_EVENTS", "RUNTIME_CALL_EVENTS",
           "RUNTIME_EVENTS", "TOKEN_EVENTS", "WORLD_EVENTS", "append_refusal"]

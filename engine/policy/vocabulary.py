"""The policy's vocabulary: the resource kinds PMW asks the PDP about and every action of each kind, by
capability class (``docs/policy-contract.md``).

Plain constants without pydantic, so the command line can name them in its help texts and check its
arguments without importing the permission layer; :mod:`engine.policy.model` re-exports them.
"""

from __future__ import annotations

from enum import StrEnum

KINDS = ("agent", "state", "task", "artifact", "memory", "wake", "handoff", "receipt", "room", "topology",
         "channel", "message", "approval", "tool", "event")


class CapabilityClass(StrEnum):
    READ = "read"
    INVOKE = "invoke"
    MUTATE = "mutate"


# Every action of every kind, by capability class (docs/policy-contract.md).
# ``issue_token`` / ``revoke_token`` / ``list_tokens``: an agent's tokens (``engine.world.tokens``), decided on
# the agent they authenticate as.
_MUTATIONS: dict[str, tuple[str, ...]] = {
    "agent": ("register", "update", "grant", "unregister", "subscribe", "issue_token", "revoke_token"),
    "state": ("write",),
    "task": ("create", "assign", "claim", "complete", "fail", "release", "abort"),
    "artifact": ("create", "version"),
    "memory": ("create", "propose", "review", "promote", "reject", "archive", "reopen", "supersede", "revoke",
               "break_glass"),
    "wake": ("enqueue", "claim", "ack", "cancel"),
    "handoff": ("create", "accept", "complete", "reject"),
    "receipt": ("create",),
    "room": ("create", "join", "leave", "close", "discuss", "answer", "distill", "invite"),
    "topology": ("write",),
    "channel": ("send",),
    "message": ("claim", "ack"),
    "approval": ("request", "approve"),
    "tool": (),
    "event": ("append",),
}
# Reads besides ``read`` (capability class read).
_READS: dict[str, tuple[str, ...]] = {"agent": ("list_tokens",)}
_UNREAD = frozenset({"tool", "event"})  # kinds with no read action (an event is read through the log)
_INVOKABLE = frozenset({"state", "artifact", "memory", "tool"})

ACTIONS: dict[str, dict[str, CapabilityClass]] = {
    kind: {**({} if kind in _UNREAD else {"read": CapabilityClass.READ}),
           **dict.fromkeys(_READS.get(kind, ()), CapabilityClass.READ),
           **({"invoke": CapabilityClass.INVOKE} if kind in _INVOKABLE else {}),
           **dict.fromkeys(mutations, CapabilityClass.MUTATE)}
    for kind, mutations in _MUTATIONS.items()
}


__all__ = ["ACTIONS", "KINDS", "CapabilityClass"]

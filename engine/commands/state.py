"""Shared state (versioned keys, compare-and-set only) and free-standing events. (Snapshots are the
runtime's: ``RuntimeBook.take_snapshot``, no command.)"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from engine.commands.base import Command
from engine.commands.fields import INT64_MAX, JsonValue, Payload
from engine.models.state import StateKey

EVENT_TYPE_PATTERN = r"^[a-z][a-z0-9_.]{0,99}$"
SUBJECT_KIND_PATTERN = r"^[a-z][a-z_]{0,49}$"
MAX_SUBJECT_ID_CHARS = 300
#: The longest read token a write accepts (``engine.world.read_set``).
MAX_READ_TOKEN_CHARS = 32_768


class CompareAndSetState(Command):
    """Write ``value`` to the shared state ``key`` only if the key is at ``expected_version`` (0: the key
    must not exist yet). A stale write is ``version_conflict`` carrying the current version (re-read and
    recompute, never resend); creating a key that exists is ``already_exists``; updating a key that does
    not exist is ``not_found``. With ``read_token`` (from ``get_state``) the write also needs every key that
    read saw to be unchanged since: else ``stale_read`` naming what changed, even if ``expected_version``
    matches now (``engine.world.read_set``)."""

    name = "compare_and_set_state"
    events = ("state.set",)
    agent_effect = True
    ref_field = "key"

    key: StateKey = Field(description="The state key (letters, digits, _ . / : -; at most 256).")
    expected_version: int = Field(ge=0, le=INT64_MAX, description=(
        "The version you read; 0 creates the key."))
    value: JsonValue = Field(description="The new value: any JSON value.")
    read_token: str | None = Field(default=None, min_length=1, max_length=MAX_READ_TOKEN_CHARS, description=(
        "The read token of the read this value was computed from: refused (stale_read) if what it read "
        "changed since."))

    @model_serializer(mode="wrap")
    def _token_only_when_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A write without a token dumps (and hashes: its operation identity) as it did before tokens."""
        data: dict[str, Any] = handler(self)
        if self.read_token is None:
            data.pop("read_token", None)
        return data


class AppendEvent(Command):
    """Append an event that changes no state, recording a fact about the work (e.g. ``claim.asserted``
    {term, claim, value}, ``conflict.resolved`` {term}, ``review.requested``) about a subject; the
    controller's rules read it. Decided as a state write on ``log:<event_type>``."""

    name = "append_event"
    events = ("<event_type>",)
    agent_effect = True
    ref_field = "event_id"

    event_type: str = Field(pattern=EVENT_TYPE_PATTERN, description="The event type, e.g. claim.asserted.")
    payload: Payload | None = None
    subject_kind: str = Field(default="world", pattern=SUBJECT_KIND_PATTERN, description=(
        "The kind of object the event is about (world, task, room, ...)."))
    subject_id: str = Field(default="world", min_length=1, max_length=MAX_SUBJECT_ID_CHARS)


__all__ = ["AppendEvent", "CompareAndSetState"]

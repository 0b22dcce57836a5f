"""The policy epoch the world's writes are decided under (runtime bookkeeping, not an agent's call).

An epoch is the content digest of a policy set. Each activation is recorded in order
(``policy_activations``: ordinal, epoch, when, by whom, from where), and the current epoch is the last
activation's. Rolling back to a set deployed before is an ordinary activation of an old epoch: its history
keeps all three (A, B, A). ``policy_epochs`` keeps each epoch's first activation."""

from __future__ import annotations

from pydantic import Field

from engine.errors import InvalidInput
from engine.models.common import Model, TimeUs
from engine.validation import build, check_id, check_int64
from engine.world.core import Plan, WorldCore
from store import Change, Insert

RUNTIME_ACTOR = "pmw-runtime"


class PolicyEpoch(Model):
    epoch: str
    activated_at_us: TimeUs
    activated_by: str
    source: str
    ordinal: int | None = None  # the activation's place in the history (None: recorded before migration 6)


class _Activate(Model):
    epoch: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]*$")
    source: str = Field(max_length=500)


def check_epoch(epoch: object) -> str:
    """A policy epoch argument (``p-`` + digest, or a test's name): an id-like string of at most 100 characters."""
    return build(_Activate, epoch=epoch, source="").epoch


class PolicyEpochReads(WorldCore):
    def current_policy_epoch(self) -> PolicyEpoch | None:
        """The epoch the world's writes are decided under now (``None``: no PDP has ever governed it)."""
        row = self._store.read.current_policy_epoch()
        return PolicyEpoch.model_validate(row) if row is not None else None


class PolicyEpochCalls(PolicyEpochReads):
    """Epoch activation: runtime bookkeeping, on :class:`~engine.world.book.RuntimeBook` only."""

    def policy_history(self, limit: int = 1000) -> list[PolicyEpoch]:
        """The last ``limit`` activations, oldest first (a rollback shows as an old epoch activated again)."""
        if not 1 <= check_int64("limit", limit) <= 100_000:
            raise InvalidInput("limit", f"{limit!r} is not a whole number from 1 to 100000")
        return [PolicyEpoch.model_validate(r) for r in self._store.read.policy_activations(limit)]

    def activate_policy_epoch(self, epoch: str, source: str, *, by: str = RUNTIME_ACTOR) -> PolicyEpoch:
        """Make ``epoch`` the current one (the runtime does this once the PDP is seen deciding under it).
        From then on a write decided under any other epoch is refused by the gateway. Idempotent. ``by``:
        who asked for it (the governor of a reload; the runtime itself at a start)."""
        req = build(_Activate, epoch=epoch, source=source)
        activated_by = check_id("by", by)
        current = self.current_policy_epoch()
        if current is not None and current.epoch == req.epoch:
            return current

        def plan(now: int) -> Plan:
            last = self._store.read.policy_activations(limit=1)
            ordinal = int(last[0]["ordinal"]) + 1 if last else 1
            done = PolicyEpoch(epoch=req.epoch, activated_at_us=now, activated_by=activated_by, source=req.source,
                               ordinal=ordinal)
            row = done.model_dump(mode="json", exclude={"ordinal"})
            changes: list[Change] = [Insert("policy_activations", {**row, "ordinal": ordinal}, "policy_activation",
                                            str(ordinal))]
            if self._store.read.get("policy_epochs", epoch=req.epoch) is None:  # first sight of this set
                changes.insert(0, Insert("policy_epochs", row, "policy_epoch", done.epoch))
            return Plan("policy.activated", "policy", done.epoch, done, changes,
                        payload={"source": done.source, "ordinal": ordinal,
                                 "previous": current.epoch if current else None})
        # runtime bookkeeping: the PDP was seen deciding under this epoch; nobody's authority is involved
        return self._write("activate_policy_epoch", RUNTIME_ACTOR, req, plan, PolicyEpoch, op_id=None, cause=None,
                           decided=False)

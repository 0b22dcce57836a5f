"""The policy epoch the world's writes are decided under (runtime bookkeeping, not an agent's call)."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Model, TimeUs
from engine.validation import build
from engine.world.core import Plan, WorldCore
from store import Insert

RUNTIME_ACTOR = "pmw-runtime"


class PolicyEpoch(Model):
    epoch: str
    activated_at_us: TimeUs
    activated_by: str
    source: str


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

    def activate_policy_epoch(self, epoch: str, source: str) -> PolicyEpoch:
        """Make ``epoch`` the current one (the runtime does this once the PDP is seen deciding under it).
        From then on a write decided under any other epoch is refused by the gateway. Idempotent."""
        req = build(_Activate, epoch=epoch, source=source[:500] if isinstance(source, str) else source)
        current = self.current_policy_epoch()
        if current is not None and current.epoch == req.epoch:
            return current

        def plan(now: int) -> Plan:
            done = PolicyEpoch(epoch=req.epoch, activated_at_us=now, activated_by=RUNTIME_ACTOR, source=req.source)
            return Plan("policy.activated", "policy", done.epoch, done,
                        [Insert("policy_epochs", done.model_dump(mode="json"), "policy_epoch", done.epoch)],
                        payload={"source": done.source})
        # runtime bookkeeping: the PDP was seen deciding under this epoch; nobody's authority is involved
        return self._write("activate_policy_epoch", RUNTIME_ACTOR, req, plan, PolicyEpoch, op_id=None, cause=None,
                           decided=False)

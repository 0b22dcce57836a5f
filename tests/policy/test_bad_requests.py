"""Bad input to the permission layer is a clear, typed error, never a silent deny."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput, PolicyInvalidRequest
from engine.policy.cerbos_adapter import CerbosPdp
from engine.policy.enforcement import Check
from engine.policy.model import PrincipalRef, ResourceRef
from engine.world import World
from tests.conftest import add_agent

GOOD_PRINCIPAL = {"role": "worker", "status": "active", "capabilities": [], "rooms": [], "delegated_tasks": [],
                  "clearance": 0}
GOOD_RESOURCE = {"owner": "", "assignee": "", "task_id": "", "room": "", "scope": "", "status": "", "reviewer": "",
                 "sensitivity": 0, "side_effect": "S0", "role": "", "membership": "", "event_type": ""}


@pytest.mark.parametrize(("principal", "resource"), [
    ({**GOOD_PRINCIPAL, "clearance": 9}, GOOD_RESOURCE),
    ({**GOOD_PRINCIPAL, "status": "asleep"}, GOOD_RESOURCE),
    ({k: v for k, v in GOOD_PRINCIPAL.items() if k != "rooms"}, GOOD_RESOURCE),
    (GOOD_PRINCIPAL, {**GOOD_RESOURCE, "sensitivity": "high"}),
    (GOOD_PRINCIPAL, {**GOOD_RESOURCE, "surprise": 1}),
], ids=["clearance out of range", "unknown status", "missing rooms", "string sensitivity", "unknown attribute"])
def test_schema_violations_are_typed_errors(pdp_client: CerbosPdp, principal: dict[str, object],
                                            resource: dict[str, object]) -> None:
    with pytest.raises(PolicyInvalidRequest) as err:
        pdp_client.check(PrincipalRef(id="x", roles=["agent"], attr=principal),
                         [(ResourceRef(kind="state", id="k", attr=resource), ["read"])])
    assert err.value.code == "policy_invalid_request"


def test_unknown_kinds_and_actions_are_refused_before_asking(pworld: World) -> None:
    add_agent(pworld, "alice", ["state.write"])
    with pytest.raises(InvalidInput):
        pworld.allowed_actions("alice", "warp-drive", "x")
    with pytest.raises(InvalidInput):
        pworld.invoke("alice", "task", "t1")  # tasks cannot be invoked
    with pytest.raises(ValueError, match="no policy action"):
        Check("state", "k", "teleport")

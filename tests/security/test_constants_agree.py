"""The authority table lives in the policy (``policies/_authority/authority.yaml``); the controller checks
decision events against its own copy (``engine.policy.model.DECISION_EVENTS``). They must say the same, and
every role that may append a decision event must be one no agent can take itself."""

from __future__ import annotations

from typing import Any

import yaml

from engine.policy.model import DECISION_EVENTS, GOVERNOR_ROLE
from tests.conftest import REPO


def authority() -> dict[str, Any]:
    doc = yaml.safe_load((REPO / "policies" / "_authority" / "authority.yaml").read_text())
    assert doc["exportConstants"]["name"] == "pmw_authority"
    return dict(doc["exportConstants"]["definitions"])


def test_the_controller_and_the_policy_agree_on_decision_events() -> None:
    table = authority()["decision_events"]
    assert {k: set(v) for k, v in table.items()} == {k: set(v) for k, v in DECISION_EVENTS.items()}


def test_only_privileged_roles_decide_and_governor_reviewer_moderator_are_privileged() -> None:
    consts = authority()
    privileged = set(consts["privileged_roles"])
    assert {GOVERNOR_ROLE, "reviewer", "moderator"} <= privileged
    for event_type, roles in consts["decision_events"].items():
        assert set(roles) <= privileged, event_type  # else an agent could register itself into a decision

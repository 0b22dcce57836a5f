"""A decision envelope through ``pmw serve``'s REST decision endpoint (``POST /v1/wakes/{id}/decision``): an
envelope the runtime refuses is ``invalid_input`` with the wake still the agent's to decide; a deferral is
carried out (its continuation wake, ``payload.envelope``) and a retried decision answers the same receipt."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.client.http import RemoteError
from tests.service.support import GOVERNOR, Served


def test_an_envelope_through_the_rest_decision_endpoint(tmp_path: Path) -> None:
    with Served(tmp_path) as served:
        agent = served.client(served.add_agent("ext", ["wake.enqueue"]))
        gov = served.client(served.governor_token)
        gov.call("world", "enqueue_wake", (), {"target_agent": "ext", "cause": "test", "idempotency_key": "k1",
                                               "actor": GOVERNOR})
        pulled = agent.request("POST", "/v1/wakes/pull", {"arguments": {"lease_seconds": 60}})["result"]
        wake_id = pulled["wake"]["wake_id"]
        path = f"/v1/wakes/{wake_id}/decision"

        with pytest.raises(RemoteError) as refused:  # a deferral in the past: refused, nothing recorded
            agent.request("POST", path, {"arguments": {"decision": {
                "outcome": "defer", "defer": {"reason": "past", "not_before_us": 1}}}})
        assert refused.value.remote_code == "invalid_input"
        assert str(refused.value.fields.get("field", "")).startswith("decision")

        decision = {"outcome": "defer", "defer": {"reason": "the build is still running", "delay_s": 60}}
        receipt = agent.request("POST", path, {"arguments": {"decision": decision}})["result"]
        assert receipt["outcome"] == "deferred" and receipt["next_wake"]
        envelope = receipt["payload"]["envelope"]
        assert envelope["outcome"] == "defer" and envelope["written"]["next_wake"] == [receipt["next_wake"]]
        later = gov.call("world", "get_wake", (), {"wake_id": receipt["next_wake"], "actor": GOVERNOR})
        assert (later.target_agent, later.status.value) == ("ext", "pending")
        assert later.payload["deferred"]["from_wake"] == wake_id

        again = agent.request("POST", path, {"arguments": {"decision": decision}})["result"]  # a lost response
        assert again == receipt
        with pytest.raises(RemoteError) as conflict:  # another decision for a decided wake
            agent.request("POST", path, {"arguments": {"decision": {"outcome": "idle"}}})
        assert conflict.value.remote_code == "operation_conflict"

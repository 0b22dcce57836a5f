"""A runner's claim request is validated once and remembered (``engine.world.wakes._claim_request``): what
is remembered never lets a request through that validation refuses, and never leaks a shared list."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInput
from engine.world.wakes import _claim_request


def test_a_remembered_request_answers_as_validation_does() -> None:
    ids = [f"ag{n:04d}" for n in range(1000, 0, -1)]
    first, targets = _claim_request(None, ids, 30.0)
    again, targets_again = _claim_request(None, list(ids), 30.0)
    assert again is first and targets == targets_again == sorted(ids)
    assert targets is not targets_again  # a copy each time: a caller may not change the remembered one
    assert targets is not None
    targets.clear()
    assert _claim_request(None, ids, 30.0)[1] == sorted(ids)


@pytest.mark.parametrize(("agent_id", "agent_ids", "lease"), [
    (None, ["ok"], float("nan")),
    (None, ["ok", "not an id!"], 1),
    ("ok", ["ok"], 1),               # one filter, not both
    (None, ["ok", 1], 1),            # 1 == True == 1.0: never taken for the id "1"
])
def test_a_refused_request_is_refused_every_time(agent_id: object, agent_ids: object, lease: object) -> None:
    _claim_request(None, ["ok"], 1)  # an equal-looking good request remembered first
    for _ in range(2):
        with pytest.raises(InvalidInput):
            _claim_request(agent_id, agent_ids, lease)

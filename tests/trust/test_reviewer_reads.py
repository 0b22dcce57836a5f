"""Reviewer reads of governance, decided by the real PDP (``policies/resources/governance.yaml``): a
reviewer reads the policy history, the audit log and explanations; deploy (reload) and shadow stay
refused; an agent that is neither governor nor reviewer is refused everything, each denial recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from engine.errors import PolicyDenied
from engine.runtime import Runtime, probe_epoch
from engine.service.governance import GovernanceCalls
from tests.conftest import REPO, add_agent, runtime_on_policy_copy

READS: dict[str, Callable[[GovernanceCalls, str], object]] = {
    "history": lambda c, who: c.history(who),
    "audit": lambda c, who: c.audit(who, agent="wendy"),
    "explain": lambda c, who: c.explain(who, "wendy", "state", "plan", "write"),
}
ACTS: dict[str, Callable[[GovernanceCalls, str], object]] = {
    "reload": lambda c, who: c.reload(who, str(REPO / "policies")),
    "shadow": lambda c, who: c.shadow(who, str(REPO / "policies")),
}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    rt = runtime_on_policy_copy(tmp_path_factory.mktemp("reviewer-reads"))
    add_agent(rt.world, "rev", role="reviewer")
    add_agent(rt.world, "wendy", ["state.write"])
    rt.world.compare_and_set_state("wendy", "plan", expected_version=0, value={"step": 1})
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def calls(runtime: Runtime) -> GovernanceCalls:
    return GovernanceCalls(runtime)


def test_a_reviewer_reads_history_audit_and_explain(calls: GovernanceCalls, runtime: Runtime) -> None:
    history = calls.history("rev")
    assert history and history[-1].epoch == probe_epoch(runtime.pdp)
    assert isinstance(calls.audit("rev", agent="wendy"), list)
    explained = calls.explain("rev", "wendy", "state", "plan", "write")
    assert explained.allowed and explained.policy_file == "resources/state.yaml"


@pytest.mark.parametrize("call", list(ACTS))
def test_a_reviewer_may_not_deploy_or_shadow(calls: GovernanceCalls, runtime: Runtime, call: str) -> None:
    epoch = runtime.book.current_policy_epoch()
    with pytest.raises(PolicyDenied) as denied:
        ACTS[call](calls, "rev")
    assert (denied.value.actor, denied.value.kind) == ("rev", "world")
    assert runtime.book.current_policy_epoch() == epoch


@pytest.mark.parametrize("call", [*READS, *ACTS])
def test_neither_governor_nor_reviewer_is_refused_everything(calls: GovernanceCalls, runtime: Runtime,
                                                               call: str) -> None:
    events = runtime.store.read.counts_and_versions()["events"]
    with pytest.raises(PolicyDenied):
        {**READS, **ACTS}[call](calls, "wendy")
    assert runtime.store.read.counts_and_versions()["events"] == events + 1  # the denial's record
    last = runtime.store.read.events(0, 1, newest=True)[0]
    assert (last["event_type"], last["actor_id"]) == ("policy.denied", "wendy")


"""The governance calls: what a governor asks of the runtime beside the World (``pmw policy ...``,
``pmw audit``), served by ``pmw serve`` like the World and called by the CLI through ``run.governance``.

Every method takes the acting principal as ``actor`` and JSON-able keyword arguments (a path as ``str``)
and returns a pydantic model or a list of them. Each first asks the PDP: ``reload`` and ``shadow`` need a
live governor (``agent:grant`` on itself, the authority only live governors hold; ``docs/policy.md``,
"Governance commands"); the reads ``history``, ``explain`` and ``audit`` need ``read`` on the ``governance``
resource (``policies/resources/governance.yaml``: live governors and reviewers). Otherwise the denial is
recorded (a ``policy.denied`` event) and ``PolicyDenied`` raised, before any argument is looked at.
Bad arguments are ``InvalidInput`` and change nothing.

- :meth:`GovernanceCalls.history` and :meth:`~GovernanceCalls.reload`: the policy activations and a reload
  (``Runtime.reload_policies``).
- :meth:`~GovernanceCalls.explain`: one decision with the rule and the policy file that decided (the engine's
  evaluation trace, ``engine.policy.explain_trace``, checked against the PDP's own answer), under what-if
  attributes, of the deployed set or of an undeployed directory (a PDP of its own, stopped after).
- :meth:`~GovernanceCalls.shadow`: the decision log replayed under a candidate set (``engine.policy.shadow``).
- :meth:`~GovernanceCalls.audit`: the decision log queried (``engine.policy.decision_log``).
- :meth:`~GovernanceCalls.metrics`: the §31 runtime quality metrics of the world (``engine.metrics``; the PDP
  decides the ``metrics`` action on the ``governance`` resource).
Only ``reload`` changes anything (besides a denial's record).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NoReturn

from pydantic import Field

from engine.errors import InvalidInput, PolicyDenied, PolicyUnavailable
from engine.metrics.model import WorldMetrics
from engine.models.common import Model
from engine.policy.candidate_pdp import candidate_dir, candidate_epoch, candidate_pdp
from engine.policy.decision_inputs import decision_inputs, with_what_if
from engine.policy.decision_log import AuditRow, audit_filter, audit_rows, log_path, newest_checks
from engine.policy.explain_trace import Effect, TraceStep, check_agreement, trace_decision
from engine.policy.governance import current_deployment
from engine.policy.model import ACTIONS, KINDS
from engine.policy.shadow import DEFAULT_LIMIT, ShadowReport, replay, shadow_limit
from engine.runtime import ReloadReport, Runtime
from engine.world.policy_epochs import PolicyEpoch

GOVERNANCE_KIND = "governance"  # the resource the PDP decides governance reads on (not a world object)


class PolicyExplanation(Model):
    """One decision, the rule and policy file that decided it, and what it was decided on."""

    principal: str
    kind: str
    id: str
    action: str
    allowed: bool
    effect: Effect
    policy_set: Literal["deployed", "candidate"]
    policy_dir: str = Field(description="the directory traced (the deployment, or the candidate asked)")
    policy_epoch: str | None = Field(description="the epoch decided under (a candidate's: the epoch it would get)")
    policy: str | None = Field(description="the policy that decided, e.g. resource.task.vdefault")
    policy_file: str | None = Field(description="its file, relative to policy_dir")
    rule: str | None = Field(description="the first deciding rule; None: no rule allowed it (deny by default)")
    rules: list[str] = Field(description="every matched rule with the decision's effect")
    matched_rules: list[str] = Field(description="every matched rule, whatever its effect")
    derived_roles: list[str]
    principal_roles: list[str]
    principal_attr: dict[str, object]
    resource_attr: dict[str, object]
    what_if: list[str] = Field(description="the attributes replaced by principal_attr / resource_attr")
    trace: list[TraceStep]


class GovernanceCalls:
    """The governance calls of one runtime (never hand the runtime itself to an agent)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def _require_governor(self, actor: str, call: str) -> None:
        """``PolicyDenied`` (recorded) unless ``actor`` is a live governor as the PDP decides it."""
        answer = self._runtime.world.allowed_actions(actor, "agent", actor)
        if "grant" not in answer.allowed:
            self._refuse(actor, call, answer.policy_epoch)

    def _require_reader(self, actor: str, call: str) -> None:
        """``PolicyDenied`` (recorded) unless the PDP allows ``actor`` to ``read`` the ``governance`` resource
        (``policies/resources/governance.yaml``: live governors and reviewers)."""
        p, r = decision_inputs(self._runtime.store.read, actor, GOVERNANCE_KIND, GOVERNANCE_KIND)
        decision = self._runtime.pdp.check(p, [(r, ["read"])])[0]
        if not decision.allowed("read"):
            self._refuse(actor, call, decision.epoch)

    def _refuse(self, actor: str, call: str, epoch: str | None) -> NoReturn:
        """Record the denial of governance ``call`` to ``actor`` (a ``policy.denied`` event), then raise it."""
        denied = PolicyDenied(actor, call, "world", "governance", epoch)
        self._runtime.book.record_denial(actor, call, denied)
        raise denied

    def history(self, actor: str, *, limit: int = 100) -> list[PolicyEpoch]:
        """The last ``limit`` activations of a policy epoch, oldest first (a rollback is an old epoch again)."""
        self._require_reader(actor, "policy history")
        return self._runtime.book.policy_history(limit)

    def reload(self, actor: str, source: str | None = None) -> ReloadReport:
        """Validate and deploy ``source`` (default: ``PMW_POLICY_DIR``), reload the PDP, wait until it decides
        under the new epoch, record it, re-decide queued work. A broken set is ``PolicyRejected``; the epoch
        stays."""
        self._require_governor(actor, "policy reload")
        return self._runtime.reload_policies(candidate_dir("source", source) if source is not None else None,
                                             by=actor)

    def explain(self, actor: str, principal_id: str, kind: str, id: str, action: str, *,
                principal_attr: dict[str, object] | None = None, resource_attr: dict[str, object] | None = None,
                policy_dir: str | None = None) -> PolicyExplanation:
        """Whether ``principal_id`` may ``action`` on ``kind id``, with the rule and the policy file that
        decided. ``principal_attr`` / ``resource_attr`` replace attributes the world's rows give (what if);
        ``policy_dir`` asks an undeployed set (validated: it must compile; a PDP of its own serves it for
        this call; nothing is deployed). The trace is shown only if it gives the PDP's own answer."""
        self._require_reader(actor, "policy explain")
        if kind not in KINDS:
            raise InvalidInput("kind", f"{kind!r} is not a kind; one of: {', '.join(KINDS)}")
        if action not in ACTIONS[kind]:
            raise InvalidInput("action", f"{kind!r} has no action {action!r}; one of: {', '.join(ACTIONS[kind])}")
        candidate = candidate_dir("policy_dir", policy_dir) if policy_dir is not None else None
        base_p, base_r = decision_inputs(self._runtime.store.read, principal_id, kind, id)
        p, r, changed = with_what_if(base_p, base_r, principal_attr, resource_attr)
        if candidate is None:
            directory = self._deployed_dir()
            decision = self._runtime.pdp.check(p, [(r, [action])])[0]
            epoch = decision.epoch
        else:
            directory = candidate
            with candidate_pdp(candidate, timeout_s=self._runtime.settings.pdp_timeout_s) as pdp:
                decision = pdp.check(p, [(r, [action])])[0]
            epoch = candidate_epoch(candidate)
        allowed = decision.allowed(action)
        trace = trace_decision(directory, p, r, action)
        check_agreement(trace, allowed=allowed, epoch=decision.epoch, policy_dir=directory)
        return PolicyExplanation(
            principal=principal_id, kind=kind, id=id, action=action, allowed=allowed, effect=trace.effect,
            policy_set="candidate" if candidate is not None else "deployed", policy_dir=str(directory),
            policy_epoch=epoch, policy=trace.policy, policy_file=trace.policy_file,
            rule=trace.rules[0] if trace.rules else None, rules=trace.rules, matched_rules=trace.matched_rules,
            derived_roles=decision.derived_roles, principal_roles=list(p.roles), principal_attr=p.attr,
            resource_attr=r.attr, what_if=changed, trace=trace.steps)

    def _deployed_dir(self) -> Path:
        """The policy set the runtime's PDP serves: its own PDP's deployment, or (an external PDP) the
        deployment beside the world, which the trace's epoch must then match."""
        if self._runtime.managed is not None:
            return self._runtime.managed.policy_dir.resolve()
        found = current_deployment(Runtime.deploy_root(self._runtime.settings))
        if found is None:
            raise PolicyUnavailable("the PDP's policy set is not deployed beside this world (an external PDP): "
                                    "pass policy_dir to explain a copy of it")
        return found.path

    def shadow(self, actor: str, policy_dir: str, *, limit: int = DEFAULT_LIMIT) -> ShadowReport:
        """Replay the newest ``limit`` recorded decisions of the decision log under the candidate set
        ``policy_dir`` (a PDP of its own) and list every one it would answer differently. Commits nothing."""
        self._require_governor(actor, "policy shadow")
        candidate = candidate_dir("policy_dir", policy_dir)
        count = shadow_limit(limit)
        log = self._log_paths()
        checks = newest_checks(log, count)
        with candidate_pdp(candidate, timeout_s=self._runtime.settings.pdp_timeout_s) as pdp:
            return replay(pdp, checks, policy_dir=candidate, candidate_epoch=candidate_epoch(candidate), log=log)

    def audit(self, actor: str, *, agent: str | None = None, kind: str | None = None, action: str | None = None,
              effect: str | None = None, since_us: int | None = None, until_us: int | None = None,
              limit: int = 100) -> list[AuditRow]:
        """The newest ``limit`` decisions of the decision log that match every filter given (the agent
        asking, the object's kind, the action, ALLOW or DENY, a time window in µs, bounds included),
        oldest first. Bad filters are ``InvalidInput``."""
        self._require_reader(actor, "audit")
        query = audit_filter(agent=agent, kind=kind, action=action, effect=effect, since_us=since_us,
                             until_us=until_us, limit=limit)
        return audit_rows(self._log_paths(), query)

    def metrics(self, actor: str) -> WorldMetrics:
        """The seed's §31 metrics of the whole world (``pmw metrics``): decided by the PDP (``metrics`` on the
        ``governance`` resource; a denial recorded and raised), computed from the store in one read."""
        from engine.metrics import MetricsCalls

        return MetricsCalls.of(self._runtime).world_metrics(actor)

    def _log_paths(self) -> list[Path]:
        """The decision logs of the PDPs this runtime started (one per replica, the first's first), else the
        world's default log path. External PDPs keep their logs where they run: not read here."""
        own = [m.audit_path for m in self._runtime.managed_replicas if m.audit_path is not None]
        return own or [log_path(self._runtime.settings.resolved_data_dir())]


__all__ = ["GovernanceCalls", "PolicyExplanation"]

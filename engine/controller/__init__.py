"""The blackboard controller: rules as files (``rules/*.yaml``) run on durable_rules behind a fence.

Public surface::

    from engine.controller import Controller
    ctl = Controller("world-1", "rules")
    ctl.load()                                   # validate + compile; RuleFileError changes nothing
    step = ctl.observe_step(event_dict)          # decisions + fact changes, to commit with step.position
    ctl.reload()                                 # hot reload: new host, rebuilt from the facts, swapped
    diffs = ctl.shadow(recorded_events, "rules-candidate")   # what a rule change would decide differently

Only :mod:`engine.controller.durable_host` imports ``durable``. See ``docs/controller.md``.
"""

from engine.controller.actions import ACTIONS, ActionSpec, Activation, Effect
from engine.controller.controller import Controller, Observation, Step
from engine.controller.decisions import (
    AnyDecision,
    Contest,
    Decision,
    DeferWake,
    ForceRefresh,
    RouteReview,
    Suppress,
    SuppressReason,
    TopologyOp,
    TopologyProposal,
    WakeTarget,
)
from engine.controller.durable_host import FactChanges, RuleSet
from engine.controller.errors import (
    ActionFailed,
    ControllerError,
    ControllerNotLoaded,
    EngineFailure,
    FactIdCollision,
    RuleFileError,
    StaleEvent,
    WorldIdCollision,
)
from engine.controller.facts import fact_hash
from engine.controller.rules_file import load_rule_dir
from engine.controller.shadow import ShadowDiff, format_diffs

__all__ = [
    "ACTIONS",
    "ActionFailed",
    "ActionSpec",
    "Activation",
    "AnyDecision",
    "Contest",
    "Controller",
    "ControllerError",
    "ControllerNotLoaded",
    "Decision",
    "DeferWake",
    "Effect",
    "EngineFailure",
    "FactChanges",
    "FactIdCollision",
    "ForceRefresh",
    "Observation",
    "RouteReview",
    "RuleFileError",
    "RuleSet",
    "ShadowDiff",
    "StaleEvent",
    "Step",
    "Suppress",
    "SuppressReason",
    "TopologyOp",
    "TopologyProposal",
    "WakeTarget",
    "WorldIdCollision",
    "fact_hash",
    "format_diffs",
    "load_rule_dir",
]

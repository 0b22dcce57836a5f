"""The run loop: the controller following the world's log, and workers running wakes (PMW-DCP)."""

from engine.runloop.envelope import DecisionEnvelope, EnvelopeOutcome
from engine.runloop.follower import CONTROLLER_AGENT, ControllerLoop, DrainStats, ensure_controller_agent
from engine.runloop.runner import DEFAULT_RULES, InProcessRunner, RunStats
from engine.runloop.signals import CommitSignal
from engine.runloop.wake_depth import DepthThresholds, WakeDepth, WakeSignals, wake_depth
from engine.runloop.worker import EnvelopeWorker, WakeCheck

__all__ = ["CONTROLLER_AGENT", "DEFAULT_RULES", "CommitSignal", "ControllerLoop", "DecisionEnvelope",
           "DepthThresholds", "DrainStats", "EnvelopeOutcome", "EnvelopeWorker", "InProcessRunner", "RunStats",
           "WakeCheck", "WakeDepth", "WakeSignals", "ensure_controller_agent", "wake_depth"]

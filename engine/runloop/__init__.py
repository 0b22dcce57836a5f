"""The run loop: the controller following the world's log, and workers running wakes (PMW-DCP)."""

from engine.runloop.follower import CONTROLLER_AGENT, ControllerLoop, DrainStats, ensure_controller_agent
from engine.runloop.runner import DEFAULT_RULES, InProcessRunner, RunStats
from engine.runloop.signals import CommitSignal

__all__ = ["CONTROLLER_AGENT", "DEFAULT_RULES", "CommitSignal", "ControllerLoop", "DrainStats", "InProcessRunner",
           "RunStats", "ensure_controller_agent"]

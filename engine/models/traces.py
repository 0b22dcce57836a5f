"""Run traces (seed 000 §55): what one wake's run retrieved, used, decided and committed, what it cost and
how long it took, and its result. Never chain-of-thought: only references, names, counts and outcomes."""

from __future__ import annotations

from pydantic import Field

from engine.models.common import Id, JsonValue, Model, TimeUs

MAX_TRACE_ITEMS = 1000


class TraceBody(Model):
    """What the worker records about one run; written in the same transaction as the wake's receipt."""

    worker_id: Id
    retrieved_refs: list[str] = Field(default_factory=list, max_length=MAX_TRACE_ITEMS)
    tools: list[str] = Field(default_factory=list, max_length=MAX_TRACE_ITEMS)
    decisions: list[dict[str, JsonValue]] = Field(default_factory=list, max_length=MAX_TRACE_ITEMS)
    commits: list[str] = Field(default_factory=list, max_length=MAX_TRACE_ITEMS)
    cost: dict[str, JsonValue] = Field(default_factory=dict)
    started_at_us: TimeUs
    result: str | None = Field(default=None, max_length=4000)


class Trace(TraceBody):
    trace_id: Id  # the wake's id
    agent_id: Id
    outcome: str
    decision: str
    finished_at_us: TimeUs
    latency_us: int = Field(ge=0)
    version: int


__all__ = ["Trace", "TraceBody"]

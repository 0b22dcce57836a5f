"""What ``pmw contracts check|list`` print (kept out of the CLI module: it must import without pydantic)."""

from __future__ import annotations

from engine.models.common import Model


class ContractSummary(Model):
    action: str
    side_effect: str
    idempotency: str
    confirmation: str
    compensation: str
    evidence: str


class ContractCheck(Model):
    source: str
    contracts: list[str]
    memory_retention_s: dict[str, int]
    artifact_retention_s: dict[str, int]
    attention_table: str = "built-in"  # where the attention broker's table comes from (attention.yaml, or built-in)


__all__ = ["ContractCheck", "ContractSummary"]

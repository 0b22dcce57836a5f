"""Retention rules as data (seed 000 §122, "retention is not utility"): how long memory and artifacts are kept.

``contracts/retention.yaml`` says, per memory epistemic type and per artifact type, how many seconds after
creation an object expires::

    memory:
      observation: 2592000       # 30 days
    artifacts:
      scratch: 86400

A memory's own TTL (``store_memory(ttl_seconds=...)``, its ``expires_at_us``) applies as well: whichever
comes first. Types not named are kept. The file is read like a contract (``file:line: field`` on any
problem, :class:`~engine.errors.ContractInvalid`); it names types and numbers only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from engine.contracts.loader import DEFAULT_CONTRACT_DIR, line_of, read_data_file
from engine.errors import ContractInvalid
from engine.models.common import Model
from engine.models.enums import EpistemicType

RETENTION_FILE = "retention.yaml"
MAX_RETAIN_S = 100 * 365 * 86400
Seconds = Annotated[int, Field(ge=1, le=MAX_RETAIN_S)]
ArtifactType = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")]


class RetentionRules(Model):
    """Seconds after creation at which objects of a type expire."""

    memory: dict[EpistemicType, Seconds] = Field(default_factory=dict)
    artifacts: dict[ArtifactType, Seconds] = Field(default_factory=dict)

    def memory_expiry_us(self, epistemic_type: str, created_at_us: int, expires_at_us: int | None) -> int | None:
        """When a memory expires: its own TTL or its type's retention, whichever is first (``None``: kept)."""
        kept = self.memory.get(EpistemicType(epistemic_type))
        by_rule = created_at_us + kept * 1_000_000 if kept is not None else None
        return min((t for t in (expires_at_us, by_rule) if t is not None), default=None)

    def artifact_expiry_us(self, artifact_type: str, created_at_us: int) -> int | None:
        kept = self.artifacts.get(artifact_type)
        return created_at_us + kept * 1_000_000 if kept is not None else None


def load_retention(directory: Path = DEFAULT_CONTRACT_DIR) -> RetentionRules:
    """The rules in ``directory / "retention.yaml"`` (no file: nothing expires by rule, TTLs still do)."""
    path = directory / RETENTION_FILE
    if not path.is_file():
        return RetentionRules()
    document = read_data_file(path)
    try:
        return RetentionRules.model_validate(document.data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(p for p in first["loc"] if p != "[key]")
        raise ContractInvalid(str(path), line_of(document.node, loc), ".".join(map(str, loc)) or "file",
                              str(first["msg"])) from exc


__all__ = ["RETENTION_FILE", "RetentionRules", "load_retention"]

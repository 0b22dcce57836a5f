"""The attention broker's table as data governance edits: ``contracts/attention.yaml``.

For each interruptibility state, the output a notice gets by its need (low, normal, high, critical; the need is
the higher of the notice's urgency and risk, :func:`engine.attention.broker.need_of`)::

    outputs:
      FREE:    [PASSIVE_BADGE, FULL_ALERT, FULL_ALERT, FULL_ALERT]
      MEETING: [BATCH_LATER, BATCH_LATER, FULL_ALERT, FULL_ALERT]
      ...

Every state must be given, each with four of ``SILENT_LOG``, ``BATCH_LATER``, ``PASSIVE_BADGE`` and
``FULL_ALERT``. What no file may change (the hard-safety rules, applied by the broker over the table): an S3
side effect is ``FORCE_HUMAN_REVIEW`` in every state; a ``FULL_ALERT`` past the attention budget is held; and
``DRIVING`` never gets a ``FULL_ALERT`` (a table that gives one is refused). The file is read like a contract
(``file:line: field`` on any problem, :class:`~engine.errors.ContractInvalid`); without the file the broker
uses :data:`engine.attention.broker.TABLE`, which the shipped file repeats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, field_validator

from engine.attention.model import AttentionOutput, Interruptibility
from engine.contracts.loader import DEFAULT_CONTRACT_DIR, line_of, read_data_file
from engine.errors import ContractInvalid
from engine.models.common import Model

ATTENTION_FILE = "attention.yaml"
Row = tuple[AttentionOutput, AttentionOutput, AttentionOutput, AttentionOutput]
TableOutput = Annotated[AttentionOutput, Field()]
#: what a table may give (FORCE_HUMAN_REVIEW is the hard-safety rules' own)
TABLE_OUTPUTS = (AttentionOutput.SILENT_LOG, AttentionOutput.BATCH_LATER, AttentionOutput.PASSIVE_BADGE,
                 AttentionOutput.FULL_ALERT)


class AttentionTable(Model):
    """The output for each state by need (0 low ... 3 critical)."""

    outputs: dict[Interruptibility, tuple[TableOutput, TableOutput, TableOutput, TableOutput]]

    @field_validator("outputs")
    @classmethod
    def _complete_and_safe(cls, outputs: dict[Interruptibility, Row]) -> dict[Interruptibility, Row]:
        missing = [s.value for s in Interruptibility if s not in outputs]
        if missing:
            raise ValueError(f"every state needs its row; missing: {', '.join(missing)}")
        for state, row in outputs.items():
            if bad := [o.value for o in row if o not in TABLE_OUTPUTS]:
                raise ValueError(f"{state.value}: {', '.join(bad)} is the hard-safety rules' own output, not "
                                 "a table's")
        if AttentionOutput.FULL_ALERT in outputs[Interruptibility.DRIVING]:
            raise ValueError("DRIVING: hard safety: never a FULL_ALERT while driving")
        return outputs


def load_attention_table(directory: Path = DEFAULT_CONTRACT_DIR) -> AttentionTable | None:
    """The table in ``directory / "attention.yaml"`` (``None``: no file, the broker's built-in table). Raises
    ``ContractInvalid`` naming the file, the line and the field."""
    path = directory / ATTENTION_FILE
    if not path.is_file():
        return None
    document = read_data_file(path)
    try:
        return AttentionTable.model_validate(document.data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(p for p in first["loc"] if p != "[key]")
        if first["type"] == "too_long" or (len(loc) == 3 and first["type"] == "missing"):  # a row of another length
            loc, reason = loc[:2], "a row is 4 outputs: for need low, normal, high, critical"
        else:
            reason = "missing field" if first["type"] == "missing" else str(first["msg"]).removeprefix("Value error, ")
        raise ContractInvalid(str(path), line_of(document.node, loc), ".".join(map(str, loc)) or "file",
                              reason) from exc


__all__ = ["ATTENTION_FILE", "TABLE_OUTPUTS", "AttentionTable", "load_attention_table"]

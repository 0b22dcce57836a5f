"""The attention broker's table as governance's data (``contracts/attention.yaml``): the shipped file is the
table the broker was written to (every state by need, by hand in test_broker.py), a world decides by the file
it reads, and a bad file is refused at load with file:line: field: a missing state, an unknown output, the
hard-safety output in a row, a FULL_ALERT while driving."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.attention import TABLE, AttentionOutput, Budget, Interruptibility, Notice, NoticeKind, Risk, Urgency
from engine.attention.broker import decide
from engine.attention.table import load_attention_table
from engine.contracts.loader import DEFAULT_CONTRACT_DIR
from engine.errors import ContractInvalid
from tests.attention.test_broker import EXPECTED, URGENCIES

SHIPPED = (DEFAULT_CONTRACT_DIR / "attention.yaml").read_text()


def test_the_shipped_table_is_the_brokers() -> None:
    table = load_attention_table()
    assert table is not None
    assert {s.value: tuple(o.value for o in row) for s, row in table.outputs.items()} == EXPECTED
    assert dict(table.outputs) == {s: tuple(row) for s, row in TABLE.items()}


def test_no_file_is_the_built_in_table(tmp_path: Path) -> None:
    assert load_attention_table(tmp_path) is None


def test_the_broker_decides_by_the_table_it_is_given_and_hard_safety_stays(tmp_path: Path) -> None:
    (tmp_path / "attention.yaml").write_text(SHIPPED.replace(
        "MEETING:  [BATCH_LATER, BATCH_LATER, FULL_ALERT, FULL_ALERT]",
        "MEETING:  [SILENT_LOG, SILENT_LOG, BATCH_LATER, FULL_ALERT]"))
    table = load_attention_table(tmp_path)
    assert table is not None
    high = Notice(kind=NoticeKind.APPROVAL_REQUEST, subject_kind="approval", subject_id="apr-1",
                  urgency=Urgency.HIGH, risk=Risk.LOW)
    roomy = Budget(full_alerts=10, window_s=3600)
    assert decide(high, Interruptibility.MEETING, 0, roomy).output is AttentionOutput.FULL_ALERT  # built-in
    assert decide(high, Interruptibility.MEETING, 0, roomy, table.outputs).output is AttentionOutput.BATCH_LATER
    s3 = high.model_copy(update={"side_effect": "S3"})
    assert decide(s3, Interruptibility.MEETING, 0, roomy, table.outputs).output is AttentionOutput.FORCE_HUMAN_REVIEW


@pytest.mark.parametrize(("old", "new", "field", "reason"), [
    ("  SLEEP:    [SILENT_LOG, SILENT_LOG, BATCH_LATER, FULL_ALERT]      # only critical ones wake\n", "",
     "outputs", "missing: SLEEP"),
    ("FREE:     [PASSIVE_BADGE,", "FREE:     [LOUD_BELL,", "outputs.FREE.0", "Input should be"),
    ("FREE:     [PASSIVE_BADGE,", "FREE:     [FORCE_HUMAN_REVIEW,", "outputs", "hard-safety rules' own"),
    ("DRIVING:  [SILENT_LOG, BATCH_LATER, BATCH_LATER, PASSIVE_BADGE]",
     "DRIVING:  [SILENT_LOG, BATCH_LATER, BATCH_LATER, FULL_ALERT]", "outputs", "never a FULL_ALERT while driving"),
    ("FOCUSED:  [BATCH_LATER, PASSIVE_BADGE, FULL_ALERT, FULL_ALERT]", "FOCUSED:  [BATCH_LATER, PASSIVE_BADGE]",
     "outputs.FOCUSED", "a row is 4 outputs"),
    ("MEETING:  [BATCH_LATER, BATCH_LATER, FULL_ALERT, FULL_ALERT]",
     "MEETING:  [BATCH_LATER, BATCH_LATER, FULL_ALERT, FULL_ALERT, FULL_ALERT]", "outputs.MEETING", "a row is 4"),
    ("outputs:", "output:", "outputs", "missing field"),
    ("FREE:     [PASSIVE_BADGE, FULL_ALERT, FULL_ALERT, FULL_ALERT]", "FREE:     [PASSIVE_BADGE, FULL_ALERT",
     "file", "expected ','"),
])
def test_a_bad_table_is_refused_with_file_line_and_field(tmp_path: Path, old: str, new: str, field: str,
                                                         reason: str) -> None:
    assert old in SHIPPED
    (tmp_path / "attention.yaml").write_text(SHIPPED.replace(old, new))
    with pytest.raises(ContractInvalid) as refused:
        load_attention_table(tmp_path)
    assert refused.value.file.endswith("attention.yaml") and refused.value.line > 0
    assert refused.value.field == field and reason in refused.value.reason, refused.value.message
    assert URGENCIES  # the table's columns, low to critical

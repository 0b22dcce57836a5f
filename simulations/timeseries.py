"""A run's tidy time series: ``timeseries.csv``, one row per event of the log, in log order.

Columns (:data:`COLUMNS`; a value that does not apply is empty, which :func:`load` reads as missing):

* ``seq``: the event's position in the log (as in ``events.jsonl``); ``t_s``: virtual seconds since the start;
* ``agent``: the declared agent the event is about: its actor when that is an agent, else the target of the
  wake it issued (``wake.issued``, a controller step that queued or suppressed one), else empty;
* ``actor``: who wrote it (an agent, the governor, ``pmw-controller``, ``sim-worker`` ...);
* ``kind``: the event type (``wake.ack``, ``state.set``, ``sim.fault`` ...); ``subject_kind``, ``subject_id``;
* ``outcome``: for ``wake.ack`` the receipt's outcome (``acted``, ``no_action``, ``conflict``, ``denied``,
  ``failed``); for a controller step its decisions' kinds (``suppress;wake``); for ``sim.fault_result`` the
  fault's result; for ``policy.denied``, ``denied``;
* ``reason``: a step's suppression reasons (``cooldown;depth``), a receipt's or a rejection's reason;
* ``cause``: the cause of the wake the event issued; ``fault``: the fault kind of ``sim.fault`` and
  ``sim.fault_result`` (``worker_crash``, ``pdp_outage``, ``policy_change`` ...);
* ``policy_epoch``: the policy epoch the event was decided under.

:class:`TimeseriesWriter` writes the rows while the report writes ``events.jsonl`` (one pass over the log);
:func:`load` reads a run's file into a pandas ``DataFrame`` (pandas is the optional ``data`` extra:
:class:`~engine.errors.OptionalDependencyMissing` names it when it is not installed).
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

from engine.errors import OptionalDependencyMissing

FILE_NAME = "timeseries.csv"
COLUMNS = ("seq", "t_s", "agent", "actor", "kind", "subject_kind", "subject_id", "outcome", "reason", "cause",
           "fault", "policy_epoch")
_REASON_LIMIT = 200


def _inserted_wakes(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c["values"] for c in event.get("changes") or [] if c.get("table") == "wakes" and c.get("op") == "insert"]


def _receipt(event: Mapping[str, Any]) -> Mapping[str, Any]:
    for c in event.get("changes") or []:
        if c.get("table") == "receipts" and c.get("op") == "insert":
            values: Mapping[str, Any] = c["values"]
            return values
    return {}


def row_of(event: Mapping[str, Any], start_us: int, agents: Collection[str]) -> dict[str, Any]:
    """The tidy row of one event of the log (``agents``: the scenario's declared agents)."""
    kind, actor, payload = str(event["event_type"]), str(event["actor_id"]), event.get("payload") or {}
    wakes = _inserted_wakes(event)
    row: dict[str, Any] = dict.fromkeys(COLUMNS, "")
    row.update(seq=int(event["seq"]), t_s=round((int(event["created_at_us"]) - start_us) / 1e6, 6), actor=actor,
               kind=kind, subject_kind=event.get("subject_kind") or "", subject_id=event.get("subject_id") or "",
               policy_epoch=event.get("policy_epoch") or "")
    targets = [str(w["target_agent"]) for w in wakes if w.get("target_agent") in agents]
    row["agent"] = actor if actor in agents else (targets[0] if targets else "")
    if wakes:
        row["cause"] = str(wakes[0].get("cause") or "")
    if kind == "wake.ack":
        receipt = _receipt(event)
        row["outcome"] = str(receipt.get("outcome") or payload.get("outcome") or "")
        row["reason"] = str(receipt.get("reason") or payload.get("reason") or "")[:_REASON_LIMIT]
    elif kind == "controller.step":
        decisions = [d for d in payload.get("decisions") or [] if isinstance(d, dict)]
        row["outcome"] = ";".join(sorted({str(d.get("kind")) for d in decisions}))
        row["reason"] = ";".join(sorted({str(d["reason"]) for d in decisions if d.get("kind") == "suppress"
                                         and d.get("reason")}))
        suppressed = [str(d["agent"]) for d in decisions if d.get("kind") == "suppress" and d.get("agent") in agents]
        if not row["agent"] and suppressed:
            row["agent"] = suppressed[0]
    elif kind in ("sim.fault", "sim.fault_result"):
        row["fault"] = str(payload.get("kind") or "")
        row["outcome"] = str(payload.get("result") or "")
        if not row["agent"] and payload.get("agent") in agents:
            row["agent"] = str(payload["agent"])
    elif kind == "policy.denied":
        row["outcome"] = "denied"
    elif kind == "memory.reject":
        row["reason"] = str(payload.get("reason") or "")[:_REASON_LIMIT]
    elif kind == "wake.issued" and not row["cause"]:
        row["cause"] = str(payload.get("cause") or "")
    return row


class TimeseriesWriter:
    """Writes ``timeseries.csv`` row by row (a context manager; the file is complete once it exits)."""

    def __init__(self, path: Path, start_us: int, agents: Collection[str]) -> None:
        self.path = path
        self.start_us = start_us
        self.agents = frozenset(agents)
        self.rows = 0
        self._file: TextIO | None = None
        self._csv: Any = None

    def __enter__(self) -> TimeseriesWriter:
        self._file = self.path.open("w", newline="", encoding="utf-8")
        self._csv = csv.DictWriter(self._file, fieldnames=COLUMNS, lineterminator="\n")
        self._csv.writeheader()
        return self

    def write(self, event: Mapping[str, Any]) -> None:
        self._csv.writerow(row_of(event, self.start_us, self.agents))
        self.rows += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
                 ) -> None:
        if self._file is not None:
            self._file.close()


def _pandas() -> Any:
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError as exc:
        raise OptionalDependencyMissing("pandas", "data", "simulations.timeseries.load") from exc
    return pandas


def load(path: str | Path) -> Any:
    """A run's time series as a pandas ``DataFrame`` (one row per event, :data:`COLUMNS`; ``seq`` an
    integer, ``t_s`` a float, the rest text with empty values as missing). ``path`` is a run's output
    folder or its ``timeseries.csv``. Raises ``OptionalDependencyMissing`` without pandas (the ``data``
    extra), ``FileNotFoundError`` when there is no such file."""
    pandas = _pandas()
    file = Path(path)
    if file.is_dir():
        file = file / FILE_NAME
    if not file.is_file():
        raise FileNotFoundError(f"no time series at {file} (a run writes {FILE_NAME} into its output folder)")
    text = {c: "string" for c in COLUMNS if c not in ("seq", "t_s")}
    return pandas.read_csv(file, dtype={"seq": "int64", "t_s": "float64", **text}, keep_default_na=False,
                           na_values={c: [""] for c in text})


__all__ = ["COLUMNS", "FILE_NAME", "TimeseriesWriter", "load", "row_of"]

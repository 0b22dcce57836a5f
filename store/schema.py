"""Every table of the PMW world, as SQLAlchemy Core metadata.

On SQLite, tables keyed by text are ``WITHOUT ROWID`` (one b-tree per table instead of two: fewer
pages written per commit).

Conventions: times are ``*_us`` BIGINT microseconds since the epoch (UTC); JSON columns hold JSON;
every mutable row has a ``version`` that the gateway's compare-and-set advances by exactly one.
State tables (:data:`STATE_TABLES`) are projections of the event log: folding the ``changes`` recorded on
every event rebuilds them exactly.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()

ID = 128
J = JSON(none_as_null=True)


def _id(name: str, *args: Any, **kw: Any) -> Column[str]:
    return Column(name, String(ID), *args, **kw)


schema_migrations = Table(
    "schema_migrations", metadata,
    Column("version", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    Column("applied_at_us", BigInteger, nullable=False),
)

events = Table(
    "events", metadata,
    Column("seq", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    _id("event_id", nullable=False, unique=True),
    Column("event_type", String(100), nullable=False),
    _id("actor_id", nullable=False),
    # The operations ledger: one event per operation, so the log is the ledger (UNIQUE op_id).
    _id("op_id", nullable=False, unique=True),
    Column("command", String(100), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("result", J, nullable=False),
    Column("subject_kind", String(50), nullable=False),
    Column("subject_id", String(300), nullable=False),
    Column("payload", J, nullable=False),
    Column("changes", J, nullable=False),
    _id("parent_event_id"),
    _id("causation_id"),
    _id("correlation_id"),
    Column("base_version", BigInteger),
    Column("resulting_version", BigInteger),
    Column("policy_epoch", String(100)),
    Column("topology_version", BigInteger),
    Column("created_at_us", BigInteger, nullable=False),
    # (the subject index is for room events only: ROOM_EVENTS_INDEX, migration 8)
    Index("ix_events_correlation", "correlation_id", sqlite_where=text("correlation_id IS NOT NULL"),
          postgresql_where=text("correlation_id IS NOT NULL")),
)

agents = Table(
    "agents", metadata,
    _id("agent_id", primary_key=True),
    Column("display_name", String(200), nullable=False),
    _id("role_id", nullable=False),
    Column("status", String(20), nullable=False),
    Column("model_hint", String(200)),
    _id("platform"),
    Column("capability_profile", J, nullable=False),
    Column("permission_profile", J, nullable=False),
    _id("current_task"),
    Column("last_seen_us", BigInteger, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_agents_role", "role_id"),
    sqlite_with_rowid=False,
)

sessions = Table(
    "sessions", metadata,
    _id("session_id", primary_key=True),
    _id("agent_id", ForeignKey("agents.agent_id"), nullable=False),
    _id("term_key", nullable=False),
    Column("status", String(20), nullable=False),
    Column("model_hint", String(200)),
    Column("started_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_sessions_agent", "agent_id"),
    Index("ix_sessions_term", "term_key"),
    # At most one active agent per exclusive terminal context, enforced by the database itself.
    Index("ux_sessions_active_term", "term_key", unique=True,
          sqlite_where=text("status = 'active'"), postgresql_where=text("status = 'active'")),
    sqlite_with_rowid=False,
)

state_entries = Table(
    "state_entries", metadata,
    Column("key", String(256), primary_key=True),
    Column("value", J),
    _id("updated_by", nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

tasks = Table(
    "tasks", metadata,
    _id("task_id", primary_key=True),
    Column("goal", Text, nullable=False),
    _id("owner_agent", nullable=False),
    _id("assignee"),
    Column("status", String(20), nullable=False),
    Column("dependencies", J, nullable=False),
    Column("constraints", J, nullable=False),
    Column("artifacts", J, nullable=False),
    Column("result", J),
    Column("deadline_us", BigInteger),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_tasks_status", "status"),
    Index("ix_tasks_assignee", "assignee"),
    sqlite_with_rowid=False,
)

artifacts = Table(
    "artifacts", metadata,
    _id("artifact_id", primary_key=True),
    _id("artifact_type", nullable=False),
    _id("owner", nullable=False),
    _id("created_by", nullable=False),
    _id("task_id"),
    Column("status", String(20), nullable=False),
    Column("checksum", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("location", String(500), nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

artifact_versions = Table(
    "artifact_versions", metadata,
    _id("artifact_id", ForeignKey("artifacts.artifact_id"), primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("checksum", String(64), nullable=False),
    Column("size", BigInteger, nullable=False),
    Column("location", String(500), nullable=False),
    _id("created_by", nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

memory = Table(
    "memory", metadata,
    _id("memory_id", primary_key=True),
    Column("scope", String(20), nullable=False),
    _id("owner", nullable=False),
    _id("room_id"),
    Column("epistemic_type", String(30), nullable=False),
    Column("content", Text, nullable=False),
    Column("source_refs", J, nullable=False),
    Column("confidence", Float, nullable=False),
    Column("status", String(20), nullable=False),
    _id("reviewer"),
    _id("supersedes"),
    _id("superseded_by"),
    Column("permission_scope", J, nullable=False),
    Column("valid_from_us", BigInteger, nullable=False),
    Column("valid_to_us", BigInteger),
    Column("expires_at_us", BigInteger),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_memory_owner", "owner"),
    Index("ix_memory_scope_status", "scope", "status"),
    Index("ix_memory_room", "room_id"),
    sqlite_with_rowid=False,
)

wakes = Table(
    "wakes", metadata,
    _id("wake_id", primary_key=True),
    _id("target_agent", nullable=False),
    Column("cause", String(200), nullable=False),
    _id("cause_event_id"),
    Column("status", String(20), nullable=False),
    Column("priority", Integer, nullable=False),
    Column("not_before_us", BigInteger, nullable=False),
    Column("payload", J, nullable=False),
    Column("payload_refs", J, nullable=False),
    Column("base_state_version", BigInteger),
    Column("authority_scope", J, nullable=False),
    Column("idempotency_key", String(256), nullable=False),
    _id("lease_owner"),
    Column("lease_until_us", BigInteger),
    Column("attempts", Integer, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    UniqueConstraint("idempotency_key", name="ux_wakes_idempotency_key"),
    Index("ix_wakes_due", "status", "not_before_us"),
    Index("ix_wakes_target", "target_agent", "status"),
    sqlite_with_rowid=False,
)

handoffs = Table(
    "handoffs", metadata,
    _id("handoff_id", primary_key=True),
    _id("source_agent", nullable=False),
    _id("target_agent", nullable=False),
    _id("task_id", nullable=False),
    Column("goal", Text, nullable=False),
    Column("current_state_ref", String(256)),
    Column("evidence_refs", J, nullable=False),
    Column("artifact_refs", J, nullable=False),
    Column("constraints", J, nullable=False),
    Column("authority_scope", J, nullable=False),
    Column("expected_output", Text),
    _id("return_route"),
    Column("status", String(20), nullable=False),
    Column("result", J),
    Column("reason", Text),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_handoffs_target", "target_agent", "status"),
    sqlite_with_rowid=False,
)

receipts = Table(
    "receipts", metadata,
    _id("receipt_id", primary_key=True),
    _id("wake_id", ForeignKey("wakes.wake_id"), unique=True),  # every wake ends in exactly one receipt
    _id("agent_id", nullable=False),
    _id("task_id"),
    Column("decision", String(20), nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("reason", Text),
    Column("observed_state_version", BigInteger),
    Column("topology_version", BigInteger),
    Column("base_state_version", BigInteger),
    Column("resulting_state_version", BigInteger),
    Column("action_refs", J, nullable=False),
    Column("artifact_refs", J, nullable=False),
    _id("next_wake"),
    Column("policy_epoch", String(100)),
    Column("payload", J, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Index("ix_receipts_agent", "agent_id"),
    sqlite_with_rowid=False,
)

topology_versions = Table(
    "topology_versions", metadata,
    Column("version", BigInteger, primary_key=True, autoincrement=False),
    _id("created_by", nullable=False),
    Column("reason", String(500), nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
)

topology_edges = Table(
    "topology_edges", metadata,
    _id("source_agent", primary_key=True),
    _id("target_agent", primary_key=True),
    Column("edge_type", String(20), primary_key=True),
    Column("scope", String(200), nullable=False),
    Column("weight", Float, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("topology_version", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

rooms = Table(
    "rooms", metadata,
    _id("room_id", primary_key=True),
    Column("goal", Text, nullable=False),
    Column("status", String(20), nullable=False),
    _id("opened_by", nullable=False),
    Column("context_scope", J, nullable=False),
    Column("authority_scope", J, nullable=False),
    Column("stop_condition", Text),
    Column("created_at_us", BigInteger, nullable=False),
    Column("closed_at_us", BigInteger),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

room_members = Table(
    "room_members", metadata,
    _id("room_id", ForeignKey("rooms.room_id"), primary_key=True),
    _id("agent_id", primary_key=True),
    Column("active", Boolean, nullable=False),
    Column("joined_at_us", BigInteger, nullable=False),
    Column("left_at_us", BigInteger),
    Column("version", BigInteger, nullable=False),
    Index("ix_room_members_agent", "agent_id", "active"),
    sqlite_with_rowid=False,
)

provenance_edges = Table(
    "provenance_edges", metadata,
    _id("edge_id", primary_key=True),
    Column("src_kind", String(50), nullable=False),
    Column("src_id", String(300), nullable=False),
    Column("dst_kind", String(50), nullable=False),
    Column("dst_id", String(300), nullable=False),
    Column("relation", String(50), nullable=False),
    _id("event_id", nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Index("ix_provenance_src", "src_kind", "src_id"),
    Index("ix_provenance_dst", "dst_kind", "dst_id"),
    sqlite_with_rowid=False,
)

messages = Table(
    "messages", metadata,
    _id("message_id", primary_key=True),
    _id("channel", nullable=False),
    _id("sender", nullable=False),
    Column("recipient_kind", String(20), nullable=False),
    _id("recipient"),
    Column("body", Text, nullable=False),
    Column("payload", J, nullable=False),
    _id("correlation_id"),
    _id("reply_to"),
    Column("created_at_us", BigInteger, nullable=False),
    Index("ix_messages_channel", "channel"),
    sqlite_with_rowid=False,
)

deliveries = Table(
    "deliveries", metadata,
    _id("delivery_id", primary_key=True),
    _id("message_id", ForeignKey("messages.message_id"), nullable=False),
    Column("recipient_kind", String(20), nullable=False),
    _id("recipient"),
    Column("status", String(20), nullable=False),
    _id("claimed_by"),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_deliveries_recipient", "recipient_kind", "recipient", "status"),
    Index("ix_deliveries_message", "message_id"),
    sqlite_with_rowid=False,
)

policy_epochs = Table(
    "policy_epochs", metadata,
    Column("epoch", String(100), primary_key=True),
    Column("activated_at_us", BigInteger, nullable=False),
    _id("activated_by", nullable=False),
    Column("source", String(500), nullable=False),
    Index("ix_policy_epochs_activated", "activated_at_us"),
    sqlite_with_rowid=False,
)

# Every activation of a policy epoch, in the order it was recorded (migration 6): rolling back to a set
# deployed before is a new activation of an old epoch. The current epoch is the last activation's.
policy_activations = Table(
    "policy_activations", metadata,
    Column("ordinal", BigInteger, primary_key=True, autoincrement=False),
    Column("epoch", String(100), nullable=False),
    Column("activated_at_us", BigInteger, nullable=False),
    _id("activated_by", nullable=False),
    Column("source", String(500), nullable=False),
    sqlite_with_rowid=False,
)

approvals = Table(
    "approvals", metadata,
    _id("approval_id", primary_key=True),
    _id("requested_by", nullable=False),
    Column("kind", String(50), nullable=False),
    Column("object_id", String(300), nullable=False),
    Column("action", String(50), nullable=False),
    Column("action_hash", String(64), nullable=False),
    Column("side_effect", String(2), nullable=False),
    Column("status", String(20), nullable=False),
    _id("approver"),
    Column("policy_epoch", String(100)),
    Column("expires_at_us", BigInteger),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

snapshots = Table(
    "snapshots", metadata,
    _id("snapshot_id", primary_key=True),
    Column("at_seq", BigInteger, nullable=False),
    Column("content", J, nullable=False),
    _id("created_by", nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# -- migration 4: the controller's durable position and facts, subscriptions, blind answers, run traces ------

controller_positions = Table(
    "controller_positions", metadata,
    _id("world_id", primary_key=True),
    Column("position", BigInteger, nullable=False),   # seq of the last event whose step is committed
    Column("steps", BigInteger, nullable=False),      # steps committed (decisions made) so far
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

controller_facts = Table(
    "controller_facts", metadata,
    _id("world_id", primary_key=True),
    Column("fact_id", String(300), primary_key=True),
    Column("kind", String(50), nullable=False),
    Column("fact", J, nullable=False),
    Column("active", Boolean, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    # migration 10: the order the controller's engine last asserted the fact in (step position * 8192 + its
    # index in the step); a rebuild loads facts in this order, so it fires as the follower did (0: before 10)
    Column("ordinal", BigInteger, nullable=False, server_default=text("0")),
    Index("ix_controller_facts_active", "world_id", "active"),
    sqlite_with_rowid=False,
)

subscriptions = Table(
    "subscriptions", metadata,
    _id("agent_id", primary_key=True),
    Column("subject_id", String(300), primary_key=True),
    Column("active", Boolean, nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("updated_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Index("ix_subscriptions_subject", "subject_id", "active"),
    sqlite_with_rowid=False,
)

room_answers = Table(
    "room_answers", metadata,
    _id("room_id", primary_key=True),
    _id("agent_id", primary_key=True),
    _id("memory_id", nullable=False),                 # the private answer; its scope becomes the room's on reveal
    Column("revealed", Boolean, nullable=False),
    Column("committed_at_us", BigInteger, nullable=False),
    Column("revealed_at_us", BigInteger),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

traces = Table(
    "traces", metadata,
    _id("trace_id", primary_key=True),                # the wake's id: one run, one trace
    _id("agent_id", nullable=False),
    _id("worker_id", nullable=False),
    Column("outcome", String(20), nullable=False),
    Column("decision", String(20), nullable=False),
    Column("retrieved_refs", J, nullable=False),
    Column("tools", J, nullable=False),
    Column("decisions", J, nullable=False),
    Column("commits", J, nullable=False),
    Column("cost", J, nullable=False),
    Column("started_at_us", BigInteger, nullable=False),
    Column("finished_at_us", BigInteger, nullable=False),
    Column("latency_us", BigInteger, nullable=False),
    Column("result", Text),
    Column("version", BigInteger, nullable=False),
    Index("ix_traces_agent", "agent_id", "finished_at_us"),
    sqlite_with_rowid=False,
)

# -- migration 7: agent tokens (the served mode's credentials) ---------------------------------------------
# One row per token an agent was issued. The secret is never stored: ``secret_sha256`` is the sha256 (hex)
# of the token's 32 random bytes, compared in constant time (``engine.auth.tokens``). Not a state table:
# credentials are no projection an image or a snapshot should carry; the column is marked ``credential``
# so that nothing that shows row images shows it (``engine.world.log_view``).
CREDENTIAL_COLUMNS: dict[str, tuple[str, ...]] = {"agent_tokens": ("secret_sha256",)}

agent_tokens = Table(
    "agent_tokens", metadata,
    _id("token_id", primary_key=True),
    _id("agent_id", ForeignKey("agents.agent_id"), nullable=False),
    Column("secret_sha256", String(64), nullable=False, info={"credential": True}),
    Column("scope", String(20), nullable=False),
    Column("label", String(200)),
    _id("issued_by", nullable=False),
    Column("created_at_us", BigInteger, nullable=False),
    Column("expires_at_us", BigInteger),               # NULL: never expires
    Column("revoked_at_us", BigInteger),               # NULL: not revoked
    _id("revoked_by"),
    Column("version", BigInteger, nullable=False),
    Index("ix_agent_tokens_agent", "agent_id"),
    sqlite_with_rowid=False,
)

# -- migration 9: one controller leader per world (issue 13) -----------------------------------------------
# The controller's lease: who leads world ``world_id`` until ``expires_at_us``, and under which
# ``generation`` (the fencing token, bumped on every takeover). Coordination, not world state: it is written
# by the gateway's lease statements (``store.gateway.take_lease`` and friends), appends no event and is not
# folded (not a state table); every controller step records the generation it committed under.
controller_leases = Table(
    "controller_leases", metadata,
    _id("world_id", primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("generation", BigInteger, nullable=False),
    Column("acquired_at_us", BigInteger, nullable=False),
    Column("expires_at_us", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    sqlite_with_rowid=False,
)

# -- migration 5: recency indexes for the projection (newest first, LIMIT: no sort of the whole table) --------
# (Attached to their tables, so a new database gets them with migration 1; migration 5 adds them to an
# existing one.)

RECENCY_INDEXES = (
    Index("ix_tasks_updated", tasks.c.updated_at_us),
    Index("ix_state_entries_updated", state_entries.c.updated_at_us),
    Index("ix_memory_updated", memory.c.updated_at_us),
)

# -- migration 8: the events' subject index only where a query reads it ----------------------------------
# The only reads of events by subject are a room's (its discussion, its last activity: subject_kind 'room',
# newest first). Migration 1 indexed every event by (subject_kind, subject_id): one more b-tree written by
# every commit (a state compare-and-set included) for rows no query looks up. Migration 8 replaces it with
# this partial index: room events only, by room and log position (ORDER BY seq DESC walks it). Attached to
# the table, so a new database gets it with migration 1.
SUBJECT_INDEX_BEFORE_8 = "ix_events_subject"
ROOM_EVENTS_INDEX = Index("ix_events_room", events.c.subject_id, events.c.seq,
                          sqlite_where=text("subject_kind = 'room'"), postgresql_where=text("subject_kind = 'room'"))

# -- migration 12: the claim's order over pending wakes ---------------------------------------------------
# The claim leases the most urgent due wake (priority DESC, not_before_us, wake_id). Over (status,
# not_before_us) that meant reading and sorting every pending wake on every claim: 0.15 ms at 200 pending,
# 25 ms at 20,000 (SQLite). Over this partial index a claim walks the pending wakes in claim order and stops at
# the first one due for an agent it serves. Pending wakes only, so an acked wake leaves it (no history in it).
# Attached to the table, so a new database gets it with migration 1.
CLAIM_ORDER_INDEX = Index("ix_wakes_claimable", wakes.c.priority.desc(), wakes.c.not_before_us, wakes.c.wake_id,
                          sqlite_where=text("status = 'pending'"), postgresql_where=text("status = 'pending'"))

# The operations ledger, as a view of the log (each operation appends exactly one event).
OPERATIONS_VIEW = ("CREATE VIEW IF NOT EXISTS operations AS SELECT op_id, command, request_hash, actor_id, "
                   "result, event_id, seq AS event_seq, created_at_us FROM events")

# Projections of the event log, in an order that satisfies foreign keys.
STATE_TABLES: tuple[Table, ...] = (
    agents, sessions, state_entries, tasks, artifacts, artifact_versions, memory, wakes, handoffs,
    receipts, topology_versions, topology_edges, rooms, room_members, provenance_edges, messages,
    deliveries, policy_epochs, policy_activations, approvals, controller_positions, controller_facts, subscriptions,
    room_answers, traces,
)
TABLES: dict[str, Table] = {t.name: t for t in metadata.sorted_tables}


def primary_key(table: Table) -> tuple[str, ...]:
    return tuple(c.name for c in table.primary_key.columns)


__all__ = ["CREDENTIAL_COLUMNS", "STATE_TABLES", "TABLES", "metadata", "primary_key"]

"""The one error tree of PMW.

Every error the runtime raises to a caller descends from :class:`PMWError` and carries a stable
``code`` (a string that never changes meaning; scripts and other processes may rely on it) and the
fields a caller needs to act on it. Lower-layer errors (SQLAlchemy, the DB driver, Cerbos,
durable_rules) are mapped at the boundary with ``raise ... from exc``; they never leak through.

::

    PMWError                         code                     CLI exit
    ├── InvalidInput                 invalid_input            3   (field, reason)
    │   ├── PayloadTooLarge          payload_too_large        3   (field, size, limit)
    │   ├── TargetUnresolved         target_unresolved        3   (target)
    │   ├── PolicyInvalidRequest     policy_invalid_request   3   (the PDP's schemas reject the attributes)
    │   ├── PolicyRejected           policy_rejected          3   (policy_dir, output: file:line of each error)
    │   ├── ContractInvalid          contract_invalid         3   (file, line, field, reason)
    │   ├── BehaviourUnavailable     behaviour_unavailable    3   (path, field: a simulation behaviour's module)
    │   ├── YamlRefused              yaml_refused             3   (file, line, reason: refused before parsing)
    │   └── BehaviourInvalid         behaviour_invalid        3   (path, field: not an adapter or factory)
    ├── NotFound                     not_found                4   (kind, id)
    ├── ConflictError                                         5
    │   ├── VersionConflict          version_conflict         5   (kind, id, expected, current)
    │   ├── AlreadyExists            already_exists           5   (kind, id)
    │   ├── OperationConflict        operation_conflict       5   (op_id, command)
    │   ├── TerminalOwned            terminal_owned           5   (term_key, owner_agent)
    │   ├── PolicyEpochChanged       policy_epoch_changed     5   (decided_under, current)
    │   ├── LeaseHeld                lease_held               5   (wake_id, lease_owner, lease_until_us)
    │   ├── WakeNotLeased            wake_not_leased          5   (wake_id, agent_id, reason)
    │   ├── ServerRunning            server_running           5   (lock_path, pid: another pmw serve owns the world)
    │   ├── ActionSettled            action_settled           5   (idempotency_key, status)
    │   ├── StaleRead                stale_read               5   (changed: each key's read and current version)
    │   └── FencedOut                fenced_out               5   (a lease no longer holds; nothing written)
    │       ├── NotLeader            not_leader               5   (world_id, holder, generation, current_holder)
    │       └── WakeLeaseLost        wake_lease_lost          5   (wake_id, owner, token, reason)
    ├── IllegalTransition            illegal_transition       6   (kind, id, status, action)
    ├── NotPermitted                 not_permitted            6   (actor, action, kind, id, reason)
    │   ├── PolicyDenied             policy_denied            6   (+ policy_epoch)
    │   ├── ApprovalInvalid          approval_invalid         6   (+ approval_id)
    │   └── RoomTaken                room_taken               6   (room_id, opened_by, controller)
    ├── CsrfRefused                  csrf_refused             6   (reason: a console form's CSRF token)
    ├── UndecidedWrite               undecided_write          6   (command, current_epoch)
    ├── ArtifactCorrupted            artifact_corrupted       7   (artifact_id, version, expected, actual)
    ├── StoreUnavailable             store_unavailable        8   (reason)
    │   ├── BackupUnverified         backup_unverified        8   (dest, check, found)
    │   └── ArtifactUnwritable       artifact_unwritable      8   (reason, errno: content not put on disk)
    ├── SchemaTooNew                 schema_too_new           8   (found, supported: migrated by a newer PMW)
    ├── ServerUnreachable            server_unreachable       8   (server, reason)
    ├── PolicyUnavailable            policy_unavailable       9   (reason)
    ├── TooManyOpen                  too_many_open            5   (what, per, limit: open connections of a principal)
    ├── TooManyStreams               too_many_streams         5   (limit, per: open wake streams of a token)
    ├── ReplayTooFar                 replay_too_far           5   (after_seq, position, limit: a stream's resume)
    ├── Closed                       closed                   1   (what: a call after close())
    ├── OptionalDependencyMissing    optional_dependency_missing 3 (package, extra, feature)
    └── Unauthenticated              unauthenticated         10   (reason, token_id: no token proves who calls)

A policy decision that cannot be had (the PDP is down, hung, too slow or answers an error) is
``PolicyUnavailable``: fail closed, nothing is written. ``InvalidInput`` with code
``policy_invalid_request`` reports attributes the PDP's schemas reject (never a silent deny).

A conflict is answered with the current version: re-read, recompute, and only then write again
(never resend the same request with the expected version patched).
"""

from __future__ import annotations

from typing import Any, ClassVar


class PMWError(Exception):
    """Base of every PMW error. ``code`` is stable; ``details()`` is the machine-readable payload."""

    code: ClassVar[str] = "pmw_error"
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def details(self) -> dict[str, Any]:
        """Fields a caller needs, JSON-serialisable (the CLI prints them with ``--json``)."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details()}


class InvalidInput(PMWError):
    """A request failed validation at the boundary; nothing was written."""

    code = "invalid_input"
    exit_code = 3

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"invalid input for {field!r}: {reason}")
        self.field = field
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"field": self.field, "reason": self.reason}


class PayloadTooLarge(InvalidInput):
    """A payload or content field exceeds its size limit (bytes of canonical JSON / UTF-8)."""

    code = "payload_too_large"

    def __init__(self, field: str, size: int, limit: int) -> None:
        super().__init__(field, f"{size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit

    def details(self) -> dict[str, Any]:
        return {**super().details(), "size": self.size, "limit": self.limit}


class TargetUnresolved(InvalidInput):
    """An explicit target (agent_id, term_key or session_id) matched nothing usable."""

    code = "target_unresolved"

    def __init__(self, target: str, reason: str) -> None:
        super().__init__("target", f"{target!r}: {reason}")
        self.target = target

    def details(self) -> dict[str, Any]:
        return {**super().details(), "target": self.target}


class NotFound(PMWError):
    """The named object does not exist."""

    code = "not_found"
    exit_code = 4

    def __init__(self, kind: str, id: str) -> None:
        super().__init__(f"{kind} {id!r} not found")
        self.kind = kind
        self.id = id

    def details(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id}


class ConflictError(PMWError):
    """Base of errors where the world moved on or already holds something else."""

    code = "conflict"
    exit_code = 5


class VersionConflict(ConflictError):
    """Compare-and-set failed: ``current`` is the version now stored. Re-read and recompute."""

    code = "version_conflict"

    def __init__(self, kind: str, id: str, expected: int, current: int) -> None:
        super().__init__(f"{kind} {id!r}: expected version {expected}, current version is {current}")
        self.kind = kind
        self.id = id
        self.expected = expected
        self.current = current

    def details(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "expected": self.expected, "current": self.current}


class AlreadyExists(ConflictError):
    """An object with this identity already exists."""

    code = "already_exists"

    def __init__(self, kind: str, id: str) -> None:
        super().__init__(f"{kind} {id!r} already exists")
        self.kind = kind
        self.id = id

    def details(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id}


class OperationConflict(ConflictError):
    """The operation id was already used for a different request."""

    code = "operation_conflict"

    def __init__(self, op_id: str, command: str) -> None:
        super().__init__(f"operation id {op_id!r} was already used for a different {command} request")
        self.op_id = op_id
        self.command = command

    def details(self) -> dict[str, Any]:
        return {"op_id": self.op_id, "command": self.command}


class TerminalOwned(ConflictError):
    """Another agent is already active on this exclusive terminal context."""

    code = "terminal_owned"

    def __init__(self, term_key: str, owner_agent: str) -> None:
        super().__init__(f"terminal {term_key!r} already has an active agent: {owner_agent!r}")
        self.term_key = term_key
        self.owner_agent = owner_agent

    def details(self) -> dict[str, Any]:
        return {"term_key": self.term_key, "owner_agent": self.owner_agent}


class PolicyEpochChanged(ConflictError):
    """The policy changed between the decision and the commit: decide again under the new epoch."""

    code = "policy_epoch_changed"

    def __init__(self, decided_under: str | None, current: str | None) -> None:
        super().__init__(f"decided under policy epoch {decided_under!r}, but the current epoch is {current!r}")
        self.decided_under = decided_under
        self.current = current

    def details(self) -> dict[str, Any]:
        return {"decided_under": self.decided_under, "current": self.current}


class UndecidedWrite(PMWError):
    """A write that carries no policy decision reached the gateway of a world a policy epoch governs. Only the
    runtime's own bookkeeping (bootstrap, epochs, recorded decisions, controller steps, revocations, denial
    records) may write undecided, and only through the object the runtime keeps."""

    code = "undecided_write"
    exit_code = 6

    def __init__(self, command: str, current_epoch: str | None) -> None:
        super().__init__(f"{command!r} carries no policy decision; the world is governed by epoch "
                         f"{current_epoch!r}: every write must be decided")
        self.command = command
        self.current_epoch = current_epoch

    def details(self) -> dict[str, Any]:
        return {"command": self.command, "current_epoch": self.current_epoch}


class LeaseHeld(ConflictError):
    """The wake is leased to another worker (or the caller's lease expired and was taken)."""

    code = "lease_held"

    def __init__(self, wake_id: str, lease_owner: str | None, lease_until_us: int | None) -> None:
        super().__init__(f"wake {wake_id!r} is leased to {lease_owner!r}")
        self.wake_id = wake_id
        self.lease_owner = lease_owner
        self.lease_until_us = lease_until_us

    def details(self) -> dict[str, Any]:
        return {"wake_id": self.wake_id, "lease_owner": self.lease_owner, "lease_until_us": self.lease_until_us}


class IllegalTransition(PMWError):
    """A lifecycle transition that the object's state machine does not allow."""

    code = "illegal_transition"
    exit_code = 6

    def __init__(self, kind: str, id: str, status: str, action: str) -> None:
        super().__init__(f"{kind} {id!r} in status {status!r} does not allow {action!r}")
        self.kind = kind
        self.id = id
        self.status = status
        self.action = action

    def details(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "status": self.status, "action": self.action}


class NotPermitted(PMWError):
    """The actor may not do this (ownership, scope or, once policy is wired, a PDP deny)."""

    code = "not_permitted"
    exit_code = 6

    def __init__(self, actor: str, action: str, kind: str, id: str, reason: str) -> None:
        super().__init__(f"{actor!r} may not {action} {kind} {id!r}: {reason}")
        self.actor = actor
        self.action = action
        self.kind = kind
        self.id = id
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"actor": self.actor, "action": self.action, "kind": self.kind, "id": self.id,
                "reason": self.reason}


class PolicyDenied(NotPermitted):
    """The policy decision point denied the action (under policy epoch ``policy_epoch``)."""

    code = "policy_denied"

    def __init__(self, actor: str, action: str, kind: str, id: str, policy_epoch: str | None) -> None:
        super().__init__(actor, action, kind, id, f"denied by policy (epoch {policy_epoch})")
        self.policy_epoch = policy_epoch

    def details(self) -> dict[str, Any]:
        return {**super().details(), "policy_epoch": self.policy_epoch}


class ApprovalInvalid(NotPermitted):
    """An S3 action's approval is missing, for another action or payload, expired, spent, or from an
    older policy epoch."""

    code = "approval_invalid"

    def __init__(self, actor: str, approval_id: str | None, reason: str) -> None:
        super().__init__(actor, "use approval", "approval", approval_id or "-", reason)
        self.approval_id = approval_id

    def details(self) -> dict[str, Any]:
        return {**super().details(), "approval_id": self.approval_id}


class PolicyInvalidRequest(InvalidInput):
    """The PDP's schemas reject the principal or resource attributes (a request bug, not a deny)."""

    code = "policy_invalid_request"


class PolicyRejected(InvalidInput):
    """A policy set failed ``cerbos compile`` or its test suites; it was not deployed."""

    code = "policy_rejected"

    def __init__(self, policy_dir: str, output: str) -> None:
        super().__init__("policies", f"{policy_dir} failed validation:\n{output[-4000:]}")
        self.policy_dir = policy_dir
        self.output = output

    def details(self) -> dict[str, Any]:
        return {**super().details(), "policy_dir": self.policy_dir}


class ArtifactCorrupted(PMWError):
    """Artifact content on disk does not match the checksum in the registry."""

    code = "artifact_corrupted"
    exit_code = 7

    def __init__(self, artifact_id: str, version: int, expected: str, actual: str) -> None:
        super().__init__(f"artifact {artifact_id!r} v{version}: checksum {actual} != registered {expected}")
        self.artifact_id = artifact_id
        self.version = version
        self.expected = expected
        self.actual = actual

    def details(self) -> dict[str, Any]:
        return {"artifact_id": self.artifact_id, "version": self.version, "expected": self.expected,
                "actual": self.actual}


class StoreUnavailable(PMWError):
    """The database could not be reached or refused the operation; nothing was committed."""

    code = "store_unavailable"
    exit_code = 8

    def __init__(self, reason: str) -> None:
        super().__init__(f"store unavailable: {reason}")
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason}


class PolicyUnavailable(PMWError):
    """No policy decision could be had: the PDP is down, hung, past its deadline, or answered an error.
    The caller's action was not taken (fail closed)."""

    code = "policy_unavailable"
    exit_code = 9

    def __init__(self, reason: str) -> None:
        super().__init__(f"policy unavailable: {reason}")
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason}


__all__ = [
    "AlreadyExists",
    "ApprovalInvalid",
    "ArtifactCorrupted",
    "ConflictError",
    "IllegalTransition",
    "InvalidInput",
    "LeaseHeld",
    "NotFound",
    "NotPermitted",
    "OperationConflict",
    "PMWError",
    "PayloadTooLarge",
    "PolicyDenied",
    "PolicyEpochChanged",
    "PolicyInvalidRequest",
    "PolicyRejected",
    "PolicyUnavailable",
    "StoreUnavailable",
    "TargetUnresolved",
    "TerminalOwned",
    "UndecidedWrite",
    "VersionConflict",
]


# -- appended: input hardening (docs/input-limits.md) -----------------------------------------------------
#
#     InvalidInput
#     └── YamlRefused                yaml_refused             3   (file, line, reason: not UTF-8, a YAML limit)
#     SchemaTooNew                   schema_too_new           8   (found, supported: upgrade PMW, never retry)
#     Closed                         closed                   1   (what: a call after close())


class YamlRefused(InvalidInput):
    """A YAML file or text was refused before anything used it: not UTF-8, over a size, depth or alias
    expansion limit, a recursive alias, or a scalar that cannot be a value (docs/input-limits.md).
    ``line`` is 1-based (0 when unknown)."""

    code = "yaml_refused"

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(file, reason)
        self.file = file
        self.line = line
        self.message = f"{file}:{line}: {reason}" if line else f"{file}: {reason}"
        self.args = (self.message,)

    def details(self) -> dict[str, Any]:
        return {**super().details(), "file": self.file, "line": self.line}


class SchemaTooNew(PMWError):
    """The database was migrated by a newer PMW than this one. It is not opened (nothing is read or
    written with the wrong schema). Upgrade PMW; retrying does not help."""

    code = "schema_too_new"
    exit_code = 8

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(f"the database has schema version {found}; this PMW supports up to {supported}")
        self.found = found
        self.supported = supported

    def details(self) -> dict[str, Any]:
        return {"found": self.found, "supported": self.supported}


class Closed(PMWError):
    """A call on an object after its ``close()`` (a store, the PDP client): nothing was done; open a new one."""

    code = "closed"
    exit_code = 1

    def __init__(self, what: str) -> None:
        super().__init__(f"the {what} is closed")
        self.what = what

    def details(self) -> dict[str, Any]:
        return {"what": self.what}


__all__ += ["Closed", "SchemaTooNew", "YamlRefused"]


class ArtifactUnwritable(StoreUnavailable):
    """Artifact content could not be put on disk (disk full, a read-only or missing directory, a path that
    is a file): nothing was committed and no partial file is left. ``errno``: the OS error number."""

    code = "artifact_unwritable"

    def __init__(self, reason: str, errno: int | None) -> None:
        super().__init__(f"cannot write artifact content: {reason}")
        self.errno = errno

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason, "errno": self.errno}


__all__ += ["ArtifactUnwritable"]


class RoomTaken(NotPermitted):
    """A room the controller convenes already exists and was opened by someone else (``opened_by``): the
    controller seats no agent in it and does not treat it as its own (its decision records this code)."""

    code = "room_taken"

    def __init__(self, room_id: str, opened_by: str, controller: str) -> None:
        super().__init__(controller, "convene", "room", room_id, f"opened by {opened_by}, not by the controller")
        self.opened_by = opened_by

    def details(self) -> dict[str, Any]:
        return {**super().details(), "opened_by": self.opened_by}


__all__ += ["RoomTaken"]


class WakeNotLeased(ConflictError):
    """An external agent's decision for a wake its pull does not hold: not a wake of ``agent_id`` (or none:
    the two are not told apart), or its lease was lost (expired, claimed by another worker) or the wake
    ended without the decision (``reason`` says which). Nothing was written."""

    code = "wake_not_leased"

    def __init__(self, wake_id: str, agent_id: str, reason: str) -> None:
        super().__init__(f"wake {wake_id!r} is not leased to {agent_id!r}'s pull: {reason}")
        self.wake_id = wake_id
        self.agent_id = agent_id
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"wake_id": self.wake_id, "agent_id": self.agent_id, "reason": self.reason}


__all__ += ["WakeNotLeased"]


class Unauthenticated(PMWError):
    """A token did not prove who its holder is: missing, malformed, unknown or with a wrong secret (one
    reason, ``invalid``, for both: no oracle), expired, revoked, or of an agent that no longer exists.
    ``token_id``: the token's id when the string parsed (``None`` otherwise); never the secret."""

    code = "unauthenticated"
    exit_code = 10

    def __init__(self, reason: str, token_id: str | None = None) -> None:
        named = f" {token_id!r}" if token_id is not None else ""
        super().__init__(f"unauthenticated: token{named} {reason}")
        self.reason = reason
        self.token_id = token_id

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason, "token_id": self.token_id}


__all__ += ["Unauthenticated"]


class ServerRunning(ConflictError):
    """Another ``pmw serve`` owns this world's data directory (its lock file is held): two servers never own
    one world. ``pid`` is the holder's (None if it could not be read)."""

    code = "server_running"

    def __init__(self, lock_path: str, pid: int | None) -> None:
        super().__init__(f"another pmw serve (pid {pid}) owns this world: {lock_path} is locked")
        self.lock_path = lock_path
        self.pid = pid

    def details(self) -> dict[str, Any]:
        return {"lock_path": self.lock_path, "pid": self.pid}


class ServerUnreachable(PMWError):
    """The server ``PMW_SERVER`` (or ``--server``) names did not answer (refused, timed out, not HTTP).
    Nothing is known to have been done; a write with an operation id can be sent again safely."""

    code = "server_unreachable"
    exit_code = 8

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"cannot reach the PMW server at {server}: {reason}")
        self.server = server
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"server": self.server, "reason": self.reason}


__all__ += ["ServerRunning", "ServerUnreachable"]


class BackupUnverified(StoreUnavailable):
    """A backup was copied but its verification failed (``check``: ``integrity_check`` or
    ``schema_version``; ``found``: what it gave): the copy is removed and nothing is left at ``dest``."""

    code = "backup_unverified"

    def __init__(self, dest: str, check: str, found: str) -> None:
        super().__init__(f"the backup at {dest} failed {check}: {found}")
        self.dest = dest
        self.check = check
        self.found = found

    def details(self) -> dict[str, Any]:
        return {"dest": self.dest, "check": self.check, "found": self.found}


__all__ += ["BackupUnverified"]


class TooManyOpen(PMWError):
    """A principal already holds as many open connections of one kind as it may: ``what`` (``mcp_session``,
    ``mcp_listen``), ``per`` (``token`` or ``agent``: whose count is full), ``limit``. Nothing was opened;
    close one (or let an idle one expire) and retry. Another principal is never refused for it."""

    code = "too_many_open"
    exit_code = 5

    def __init__(self, what: str, per: str, limit: int) -> None:
        super().__init__(f"too many open {what}s: at most {limit} per {per}")
        self.what = what
        self.per = per
        self.limit = limit

    def details(self) -> dict[str, Any]:
        return {"what": self.what, "per": self.per, "limit": self.limit}


__all__ += ["TooManyOpen"]


class ReplayTooFar(PMWError):
    """A wake stream was asked to resume after log position ``after_seq``, more than ``limit`` positions
    behind the feed's ``position``: nothing is replayed (a replay reads the log, so its length is bounded).
    Re-sync with a fresh read of the agent's wakes (``World.list_wakes`` / due wakes), then stream from
    ``position``."""

    code = "replay_too_far"
    exit_code = 5

    def __init__(self, after_seq: int, position: int, limit: int) -> None:
        super().__init__(f"cannot resume after log position {after_seq}: {position - after_seq} positions behind "
                         f"(at most {limit}); re-sync with a fresh read, then stream from {position}")
        self.after_seq = after_seq
        self.position = position
        self.limit = limit

    def details(self) -> dict[str, Any]:
        return {"after_seq": self.after_seq, "position": self.position, "limit": self.limit}


__all__ += ["ReplayTooFar"]


class TooManyStreams(PMWError):
    """A token already holds ``limit`` open wake streams (``per``: ``token``): the new one is refused
    (nothing opened; the open ones go on). Close one and retry. Another token, another agent's included,
    is never refused for it."""

    code = "too_many_streams"
    exit_code = 5

    def __init__(self, limit: int, per: str = "token") -> None:
        super().__init__(f"too many open wake streams: at most {limit} per {per}")
        self.limit = limit
        self.per = per

    def details(self) -> dict[str, Any]:
        return {"limit": self.limit, "per": self.per}


__all__ += ["TooManyStreams"]


class ContractInvalid(InvalidInput):
    """An action contract or retention file is refused at load: ``file``, ``line`` (0: unknown), ``field``
    (the dotted path in the document) and ``reason``. Nothing of the directory is used."""

    code = "contract_invalid"

    def __init__(self, file: str, line: int, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.message = f"{file}:{line}: {field}: {reason}"
        self.args = (self.message,)
        self.file = file
        self.line = line

    def details(self) -> dict[str, Any]:
        return {**super().details(), "file": self.file, "line": self.line}


class ActionSettled(ConflictError):
    """The action attempt under ``idempotency_key`` is settled already (``status``: done or failed) and the
    request would settle it otherwise: nothing was written. Read its status; never repeat a done effect."""

    code = "action_settled"

    def __init__(self, idempotency_key: str, status: str) -> None:
        super().__init__(f"action {idempotency_key!r} is settled already: {status}")
        self.idempotency_key = idempotency_key
        self.status = status

    def details(self) -> dict[str, Any]:
        return {"idempotency_key": self.idempotency_key, "status": self.status}


__all__ += ["ActionSettled", "ContractInvalid"]


class CsrfRefused(PMWError):
    """A state-changing console form came without the session's CSRF token, or with another one (``reason``:
    ``missing`` or ``mismatch``): refused before anything is read or written (403)."""

    code = "csrf_refused"
    exit_code = 6

    def __init__(self, reason: str) -> None:
        super().__init__(f"refused: the form's CSRF token is {reason}; reload the page and submit it again")
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"reason": self.reason}


__all__ += ["CsrfRefused"]


class BehaviourUnavailable(InvalidInput):
    """A scenario's own behaviour (``MODULE:ATTR``, the ``pmw worker --agent`` contract) cannot be loaded: the
    module does not import or has no such attribute (``reason`` says which). Nothing was run."""

    code = "behaviour_unavailable"

    def __init__(self, path: str, reason: str, field: str = "behaviour") -> None:
        super().__init__(field, f"cannot load behaviour {path!r}: {reason}")
        self.path = path

    def details(self) -> dict[str, Any]:
        return {**super().details(), "path": self.path}


class BehaviourInvalid(InvalidInput):
    """A scenario's own behaviour loaded, but is not an adapter (an object with ``run``), an adapter factory
    (a class or a zero-argument callable returning one) nor a decision function (one argument: the JSON
    context); ``found`` names what it is. Nothing was run."""

    code = "behaviour_invalid"

    def __init__(self, path: str, found: str, field: str = "behaviour") -> None:
        super().__init__(field, f"{path!r} is {found}: not an adapter, an adapter factory nor a decision function")
        self.path = path
        self.found = found

    def details(self) -> dict[str, Any]:
        return {**super().details(), "path": self.path, "found": self.found}


class OptionalDependencyMissing(PMWError):
    """A feature needs a package that is installed only with an extra (``pip install 'pmw[data]'`` for
    ``pandas``); nothing was read."""

    code = "optional_dependency_missing"
    exit_code = 3

    def __init__(self, package: str, extra: str, feature: str) -> None:
        super().__init__(f"{feature} needs {package!r}: install the {extra!r} extra (pip install 'pmw[{extra}]')")
        self.package = package
        self.extra = extra
        self.feature = feature

    def details(self) -> dict[str, Any]:
        return {"package": self.package, "extra": self.extra, "feature": self.feature}


__all__ += ["BehaviourInvalid", "BehaviourUnavailable", "OptionalDependencyMissing"]


class StaleRead(ConflictError):
    """A write's read set changed since it was read: ``changed`` lists each key with the version it was read
    at (``read_version``; 0: absent) and the version now stored (``current_version``; 0: absent). Nothing
    was written: re-read and recompute, never resend."""

    code = "stale_read"

    def __init__(self, changed: list[dict[str, Any]]) -> None:
        keys = ", ".join(f"{c['key']!r} version {c['read_version']}->{c['current_version']}" for c in changed)
        super().__init__(f"the read set changed since it was read: {keys}")
        self.changed = changed

    def details(self) -> dict[str, Any]:
        return {"changed": self.changed}


class FencedOut(ConflictError):
    """A write made under a lease the writer no longer holds (issue 13): the gateway checked the lease in the
    write's own transaction and refused it; nothing was written. Subclasses say which lease."""

    code = "fenced_out"


class NotLeader(FencedOut):
    """A controller write of ``holder`` under lease generation ``generation`` of world ``world_id`` was
    refused: the world's lease is ``current_holder``'s at ``current_generation`` (``None``: no lease), and
    ``reason`` is ``no_lease``, ``stale_generation`` (another holder took over, or a newer generation) or
    ``expired`` (the lease ran out at the writer's clock). Nothing was written; stop acting as the controller
    and acquire again."""

    code = "not_leader"

    def __init__(self, world_id: str, holder: str, generation: int | None, current_holder: str | None,
                 current_generation: int | None, reason: str) -> None:
        super().__init__(f"{holder!r} does not lead world {world_id!r} (generation {generation}, current "
                         f"{current_holder!r} at {current_generation}): {reason}")
        self.world_id = world_id
        self.holder = holder
        self.generation = generation
        self.current_holder = current_holder
        self.current_generation = current_generation
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"world_id": self.world_id, "holder": self.holder, "generation": self.generation,
                "current_holder": self.current_holder, "current_generation": self.current_generation,
                "reason": self.reason}


class WakeLeaseLost(FencedOut):
    """A worker's commit for wake ``wake_id`` under its claim (``owner``, claim ``token``: the claim's attempt
    number) was refused: the wake is no longer claimed by that claim (``reason``: ``reclaimed``, ``expired``,
    ``finished``, ``not_found``). Nothing of the cycle (effects, receipt, ack) was written; the wake is
    claimed again and runs once."""

    code = "wake_lease_lost"

    def __init__(self, wake_id: str, owner: str, token: int, reason: str) -> None:
        super().__init__(f"wake {wake_id!r}: the claim of {owner!r} (attempt {token}) no longer holds: {reason}")
        self.wake_id = wake_id
        self.owner = owner
        self.token = token
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"wake_id": self.wake_id, "owner": self.owner, "token": self.token, "reason": self.reason}


__all__ += ["FencedOut", "NotLeader", "WakeLeaseLost"]

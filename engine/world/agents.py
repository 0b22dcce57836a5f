"""Identity and presence: register, activate, detach and unregister, always by explicit target."""

from __future__ import annotations

from typing import Any, TypeVar

from engine.commands.agents import (
    ActivateSession,
    DetachSession,
    Grant,
    RegisterAgent,
    RelinquishSession,
    UnregisterAgent,
)
from engine.errors import AlreadyExists, InvalidInput, TargetUnresolved, TerminalOwned
from engine.models.agents import SESSION_LIFECYCLE, Agent, Presence, Registration, Session, Target
from engine.models.common import Model
from engine.policy.enforcement import Check
from engine.validation import build, check_id, parse_enum
from engine.world.core import Cause, Plan, WorldCore
from store import Change, Insert, Update

#: The command of each session transition (the command names the one session its target resolves to).
_SESSION_COMMANDS: dict[str, type[ActivateSession | RelinquishSession | DetachSession]] = {
    "activate": ActivateSession, "relinquish": RelinquishSession, "detach": DetachSession}
_T = TypeVar("_T", bound=ActivateSession | RelinquishSession | DetachSession | UnregisterAgent)


def presence_of(sessions: list[dict[str, Any]]) -> Presence:
    """An agent's presence is the strongest presence among its sessions."""
    statuses = {s["status"] for s in sessions}
    for p in (Presence.ACTIVE, Presence.ATTACHED):
        if p.value in statuses:
            return p
    return Presence.OFFLINE


class AgentCalls(WorldCore):
    def register_agent(self, agent_id: str, display_name: str, role_id: str, term_key: str, *,
                       session_id: str | None = None, model_hint: str | None = None,
                       platform: str | None = None, capability_profile: dict[str, Any] | None = None,
                       permission_profile: dict[str, Any] | None = None, actor: str | None = None,
                       op_id: str | None = None, cause: Cause | None = None) -> Registration:
        """Create the agent if new (else recover it, e.g. after going offline) and attach a new session on
        ``term_key``. The new session is ``attached``; :meth:`activate_session` claims the terminal's active
        role. Profiles given explicitly change the agent's authority (a ``grant``: governors only); left
        out, a known agent keeps what it was granted.

        Roles are granted, never self-taken: the policy lets an agent register itself (``agent:register``)
        only with its current role or one that carries no authority (``privileged_roles`` in
        ``policies/_authority/authority.yaml``: governor, reviewer, moderator); a governor (``actor=``)
        registers anyone with any role. Changing a known agent's ``role_id`` is also a ``grant``. A
        refusal is ``PolicyDenied`` and writes nothing but the denial record.
        """
        req = build(RegisterAgent, agent_id=agent_id, display_name=display_name, role_id=role_id,
                    term_key=term_key, session_id=session_id, model_hint=model_hint, platform=platform,
                    capability_profile=capability_profile, permission_profile=permission_profile)
        return self._write("register_agent", actor or req.agent_id, req, lambda now: self._plan_register(req, now),
                           Registration, op_id=op_id, cause=cause)

    def _plan_register(self, req: RegisterAgent, now: int) -> Plan:
        sid = req.session_id or self.ids.new("ses")
        session = Session(session_id=sid, agent_id=req.agent_id, term_key=req.term_key,
                          status=Presence.ATTACHED, model_hint=req.model_hint, started_at_us=now,
                          updated_at_us=now, version=1)
        existing = self._store.read.get("agents", agent_id=req.agent_id)
        old = existing or {"capability_profile": {}, "permission_profile": {}}
        caps = req.capability_profile if req.capability_profile is not None else old["capability_profile"]
        perms = req.permission_profile if req.permission_profile is not None else old["permission_profile"]
        fields = {"display_name": req.display_name, "role_id": req.role_id, "model_hint": req.model_hint,
                  "platform": req.platform, "capability_profile": caps, "permission_profile": perms}
        changes: list[Change]
        if existing is None:
            agent = Agent(agent_id=req.agent_id, status=Presence.ATTACHED, last_seen_us=now,
                          created_at_us=now, version=1, **fields)
            changes = [Insert("agents", agent.model_dump(mode="json"), "agent", req.agent_id)]
            event = "agent.registered"
        else:
            status = Presence.ACTIVE if existing["status"] == "active" else Presence.ATTACHED
            agent = Agent.model_validate({**existing, **fields, "status": status, "last_seen_us": now,
                                          "version": existing["version"] + 1})
            changes = [Update("agents", {"agent_id": req.agent_id}, existing["version"],
                              {**fields, "status": status.value, "last_seen_us": now}, "agent", req.agent_id)]
            event = "agent.recovered"
        changes.append(Insert("sessions", session.model_dump(mode="json"), "session", sid))
        row = agent.model_dump(mode="json")
        checks = [Check("agent", req.agent_id, "register", row)]  # a (re)registration: decided as attached
        role_changed = existing is not None and existing["role_id"] != req.role_id
        if role_changed or (caps, perms) != (old["capability_profile"], old["permission_profile"]):
            checks.append(Check("agent", req.agent_id, "grant", row))  # authority is granted, never self-taken
        return Plan(event, "agent", req.agent_id, Registration(agent=agent, session=session), changes,
                    payload={"session_id": sid, "term_key": req.term_key},
                    resulting_version=agent.version, checks=checks)

    def grant(self, actor: str, agent_id: str, *, capabilities: list[str] | None = None,
              clearance: int | None = None, op_id: str | None = None, cause: Cause | None = None,
              role_id: str | None = None) -> Agent:
        """Set an agent's maximum capabilities, clearance and/or workspace role (policy action
        ``agent:grant``: governors only). ``role_id`` is how an agent gets a privileged role (governor,
        reviewer, moderator): it can never register itself with one."""
        req = build(Grant, agent_id=agent_id, capabilities=capabilities, clearance=clearance, role_id=role_id)

        def plan(now: int) -> Plan:
            row = self._row("agents", "agent", req.agent_id, agent_id=req.agent_id)
            caps = dict(row["capability_profile"])
            perms = dict(row["permission_profile"])
            if req.capabilities is not None:
                caps["capabilities"] = sorted(set(req.capabilities))
            if req.clearance is not None:
                perms["clearance"] = req.clearance
            values: dict[str, Any] = {"capability_profile": caps, "permission_profile": perms}
            payload: dict[str, Any] = {"capabilities": caps.get("capabilities"), "clearance": perms.get("clearance")}
            if req.role_id is not None:
                values["role_id"] = payload["role_id"] = req.role_id
            agent = Agent.model_validate({**row, **values, "version": row["version"] + 1})
            who = req.agent_id
            return Plan("agent.granted", "agent", who, agent,
                        [Update("agents", {"agent_id": who}, row["version"], values, "agent", who)],
                        payload=payload, base_version=row["version"], resulting_version=agent.version,
                        checks=[Check("agent", who, "grant", agent.model_dump(mode="json"))])
        return self._write("grant", actor, req, plan, Agent, op_id=op_id, cause=cause)

    def resolve_target(self, target: Target | str, *, actor: str | None = None) -> list[Session]:
        """Sessions named by an explicit target: an agent's sessions, a terminal's live sessions, or one
        session. Raises :class:`TargetUnresolved` when it names nothing. A read: with a PDP, ``actor`` is
        required (``InvalidInput``) and sees the sessions of the agents it may read (``agent:read``)."""
        reader = self._reader(actor)
        sessions = self._sessions_of(target)
        if reader is None or not self._policy.external or not sessions:
            return sessions
        agents = self._store.read.rows("agents", {"agent_id": sorted({s.agent_id for s in sessions})})
        readable = {str(a["agent_id"]) for a in self._readable(reader, "agent", agents, "agent_id")}
        return [s for s in sessions if s.agent_id in readable]

    def _sessions_of(self, target: Target | str) -> list[Session]:
        """The sessions ``target`` names, undecided (the calls that act on them decide their writes)."""
        t = self._target(target)
        if t.session_id is not None:
            rows = self._store.read.rows("sessions", {"session_id": t.session_id})
        elif t.term_key is not None:
            rows = self._store.read.rows("sessions", {"term_key": t.term_key,
                                                     "status": ["active", "attached"]})
        else:
            if self._store.read.get("agents", agent_id=t.agent_id) is None:
                raise TargetUnresolved(str(t), "no such agent")
            rows = self._store.read.rows("sessions", {"agent_id": t.agent_id})
        if not rows and t.agent_id is None:
            raise TargetUnresolved(str(t), "no live session matches")
        return [Session.model_validate(r) for r in rows]

    def activate_session(self, target: Target | str, *, actor: str | None = None, op_id: str | None = None,
                         cause: Cause | None = None) -> Session:
        """Make one session the active owner of its terminal (at most one active agent per terminal)."""
        return self._session_transition(target, "activate", actor, op_id, cause)

    def relinquish_session(self, target: Target | str, *, actor: str | None = None, op_id: str | None = None,
                           cause: Cause | None = None) -> Session:
        """Give up active ownership; the session stays attached."""
        return self._session_transition(target, "relinquish", actor, op_id, cause)

    def detach_session(self, target: Target | str, *, actor: str | None = None, op_id: str | None = None,
                       cause: Cause | None = None) -> Session:
        """Mark one session offline. Nothing durable is deleted."""
        return self._session_transition(target, "detach", actor, op_id, cause)

    def _session_transition(self, target: Target | str, action: str, actor: str | None,
                            op_id: str | None, cause: Cause | None) -> Session:
        req, t = self._target_request(_SESSION_COMMANDS[action], target)
        caller = check_id("actor", actor) if actor is not None else ""
        if (done := self._replayed(f"session.{action}", caller, req, Session, op_id)) is not None:
            return done  # a retry: answered before the target (which the first attempt changed) is resolved
        sessions = self._sessions_of(t)
        if len(sessions) != 1:
            raise TargetUnresolved(str(t), f"names {len(sessions)} sessions; {action} needs exactly one")
        s = sessions[0]
        try:
            return self._write(f"session.{action}", actor or s.agent_id, req,
                               lambda now: self._plan_session(s.session_id, action, now), Session,
                               op_id=op_id, cause=cause, caller=caller)
        except AlreadyExists as exc:  # the partial unique index on active terminals
            owner = self._store.read.rows("sessions", {"term_key": s.term_key, "status": "active"})
            raise TerminalOwned(s.term_key, owner[0]["agent_id"] if owner else "?") from exc

    def _plan_session(self, session_id: str, action: str, now: int) -> Plan:
        s = Session.model_validate(self._row("sessions", "session", session_id, session_id=session_id))
        status = SESSION_LIFECYCLE.target(session_id, s.status.value, action)
        if action == "activate":
            owner = self._store.read.rows("sessions", {"term_key": s.term_key, "status": "active"})
            if owner and owner[0]["session_id"] != session_id:
                raise TerminalOwned(s.term_key, owner[0]["agent_id"])
        new = s.model_copy(update={"status": Presence(status), "updated_at_us": now, "version": s.version + 1})
        agent_row = self._row("agents", "agent", s.agent_id, agent_id=s.agent_id)
        # The agent's row first, then its session's: the order a registration takes them in, so on
        # PostgreSQL a transition and a registration of one agent never wait on each other in a cycle.
        changes: list[Change] = [self._agent_presence_change(agent_row, {session_id: status}, now),
                                 Update("sessions", {"session_id": session_id}, s.version,
                                        {"status": status, "updated_at_us": now}, "session", session_id)]
        return Plan(f"session.{action}", "session", session_id, new, changes,
                    payload={"agent_id": s.agent_id, "term_key": s.term_key, "status": status},
                    base_version=s.version, resulting_version=new.version,
                    checks=[Check("agent", s.agent_id, "update", agent_row)])

    def _agent_presence_change(self, agent: dict[str, Any], overrides: dict[str, str], now: int) -> Update:
        """The agent's presence recomputed from its sessions, with ``overrides`` (session id -> status)."""
        agent_id = agent["agent_id"]
        sessions = [{**r, "status": overrides.get(r["session_id"], r["status"])}
                    for r in self._store.read.rows("sessions", {"agent_id": agent_id})]
        return Update("agents", {"agent_id": agent_id}, agent["version"],
                      {"status": presence_of(sessions).value, "last_seen_us": now}, "agent", agent_id)

    def unregister_agent(self, target: Target | str, *, actor: str | None = None, op_id: str | None = None,
                         cause: Cause | None = None) -> list[Session]:
        """Mark every session the target names offline (and its agents' presence). Identity, tasks,
        messages and memory stay."""
        req, t = self._target_request(UnregisterAgent, target)
        caller = check_id("actor", actor) if actor is not None else ""
        if (done := self._replayed("unregister_agent", caller, req, _SessionList, op_id)) is not None:
            return done.sessions  # a retry: answered before the target is resolved again
        sessions = self._sessions_of(t)
        who = actor or (sessions[0].agent_id if sessions else t.agent_id)
        if who is None:
            raise TargetUnresolved(str(t), "names no agent")
        result = self._write("unregister_agent", who, req,
                             lambda now: self._plan_unregister(t, sessions, now), _SessionList,
                             op_id=op_id, cause=cause, caller=caller)
        return result.sessions

    def _plan_unregister(self, t: Target, sessions: list[Session], now: int) -> Plan:
        agent_ids = sorted({s.agent_id for s in sessions} | ({t.agent_id} if t.agent_id else set()))
        offline = {s.session_id: "offline" for s in sessions}
        rows = [self._row("agents", "agent", a, agent_id=a) for a in agent_ids]
        # Agents' rows first (in id order), then their sessions': the order of a registration (see
        # _plan_session), so concurrent writers of one agent never wait on each other in a cycle.
        changes: list[Change] = [self._agent_presence_change(row, offline, now) for row in rows]
        out: list[Session] = []
        for s in sessions:
            if s.status is not Presence.OFFLINE:
                changes.append(Update("sessions", {"session_id": s.session_id}, s.version,
                                      {"status": "offline", "updated_at_us": now}, "session", s.session_id))
                out.append(s.model_copy(update={"status": Presence.OFFLINE, "updated_at_us": now,
                                                "version": s.version + 1}))
        checks = [Check("agent", row["agent_id"], "unregister", row) for row in rows]
        return Plan("agent.unregistered", "target", str(t), _SessionList(sessions=out), changes,
                    payload={"agents": agent_ids, "sessions": [s.session_id for s in sessions]}, checks=checks)

    def get_agent(self, agent_id: str, *, actor: str | None = None) -> Agent:
        check_id("agent_id", agent_id)
        return self._get(Agent, "agents", "agent", agent_id, actor, agent_id=agent_id)

    def list_agents(self, *, status: str | None = None, role_id: str | None = None,
                    actor: str | None = None) -> list[Agent]:
        where: dict[str, Any] = {}
        if status is not None:
            where["status"] = parse_enum("status", Presence, status).value
        if role_id is not None:
            where["role_id"] = check_id("role_id", role_id)
        return self._list(Agent, "agents", "agent", actor, where)

    def _target_request(self, command: type[_T], target: Target | str) -> tuple[_T, Target]:
        """``command`` validated on ``target`` as given, and the target it names; the command returned names
        it canonically (``agent:ID``, ``term:KEY``, ``session:ID``), so one target is one request (one
        operation identity) however it was written."""
        given = build(command, target=str(target) if isinstance(target, Target) else target)
        named = self._target(given.target)
        return command(target=str(named)), named

    @staticmethod
    def _target(target: Target | str) -> Target:
        if isinstance(target, Target):
            return target
        if not isinstance(target, str):
            raise InvalidInput("target", f"must be a target (agent:ID, term:KEY, session:ID), not "
                                         f"{type(target).__name__}")
        try:
            return Target.parse(target)
        except ValueError as exc:
            raise InvalidInput("target", str(exc)) from exc


class _SessionList(Model):
    sessions: list[Session]


__all__ = ["AgentCalls", "RegisterAgent", "presence_of"]

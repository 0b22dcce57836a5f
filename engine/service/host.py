"""``pmw serve``'s process: one long-lived owner of a world.

A :class:`Service` holds, for its lifetime:

- the lock of the world's data directory (``engine.service.lockfile``): two servers never own one world;
- the runtime (``engine.runtime.Runtime``): the store, one supervised PDP serving the world's own policy
  deployment, the runtime's book, the governance calls; the HTTP API serves it (``engine.service.http_app``);
- optionally a runner (``engine.runloop.InProcessRunner``) on a store and book of its own, deciding with the
  same PDP: the controller, and a worker for the in-process agents given by ``--agent``. It follows policy
  reloads (its writes are decided again under the new epoch; it never exits because the epoch moved) and
  waits, failing closed, while the PDP is down;
- external agents' pulls (``engine.protocol.pull``), served through the API for the token's agent;
- the wake feed (``engine.service.wake_feed``, :attr:`Service.wake_feed`): one thread tailing the log for
  queued wakes, which the SSE streams and MCP notifications push. Started with the service, stopped (its
  subscriptions ended) before the runtimes close.

Roles (``pmw serve --role``), for one deployment of several processes on one store (PostgreSQL across hosts):

- ``all`` (default): everything above, the data directory's lock held (today's one owner of a world);
- ``api``: the HTTP API, pulls and the wake feed; no runner;
- ``worker``: the API (health, pulls) and a runner for the ``--agent``'s wakes; no controller;
- ``controller``: the API and the controller, run only while this process is the world's elected leader
  (``engine.controller.leadership``: a lease with a fencing token; a standby waits and takes over when the
  leader's lease runs out; every step is committed inside the lease's fence).

Only ``all`` takes the data directory's lock: the other roles are meant to run side by side.

:meth:`stop` (SIGTERM or SIGINT in ``pmw serve``) stops the runner between cycles (no lease is left held
by it; every transaction is whole or absent), closes both runtimes (the PDP stopped by its PID, its
working directory removed) and releases the lock. Nothing is written to the system temp directory.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import threading
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field

from engine.controller.leadership import ControllerLeadership
from engine.errors import InvalidInput, NotLeader, PolicyEpochChanged, PolicyUnavailable, StoreUnavailable
from engine.models.common import Model
from engine.models.receipts import Receipt
from engine.models.tokens import TokenPrincipal
from engine.policy.pdp_replicas import ReplicaStatus
from engine.policy.supervisor import PdpHealth
from engine.protocol.adapters import AgentAdapter
from engine.protocol.pull import ExternalAgents, Pulled
from engine.runloop import DEFAULT_RULES, ControllerLoop, InProcessRunner, RunStats, ensure_controller_agent
from engine.runtime import Runtime
from engine.service.calls import CallSpec
from engine.service.dispatch import Dispatcher
from engine.service.governance import GovernanceCalls
from engine.service.lockfile import ServeLock
from engine.service.wake_feed import WakeFeed
from engine.settings import Settings

#: The governance calls that change what is in force (a read-scoped token may not make them).
GOVERNANCE_WRITES = frozenset({"reload"})
RUNNER_STOP_S = 30.0
Role = Literal["api", "worker", "controller", "all"]
ROLES: tuple[str, ...] = get_args(Role)
LeaderState = Literal["leader", "standby", "none"]


class HealthReport(Model):
    """What ``GET /v1/health`` answers: ``ok`` when the PDP answers (or is external), else ``degraded``."""

    status: Literal["ok", "degraded"]
    pid: int
    started_at_us: int
    policy_epoch: str | None
    pdp: PdpHealth | None
    runner: Literal["running", "stopped", "none"]
    runner_error: str | None = None
    role: Role = "all"
    pdp_replicas: list[ReplicaStatus] = Field(default_factory=list)
    leader: LeaderState = "none"
    leader_generation: int | None = None


def governance_specs() -> dict[str, CallSpec]:
    """Every public method of :class:`GovernanceCalls`, its principal the ``actor`` parameter."""
    return {name: CallSpec(name, name in GOVERNANCE_WRITES, ("actor",)) for name in dir(GovernanceCalls)
            if not name.startswith("_") and callable(getattr(GovernanceCalls, name))}


class Service:
    """One world served: open with :meth:`start`, end with :meth:`stop` (idempotent)."""

    def __init__(self, settings: Settings, *, adapters: dict[str, AgentAdapter] | None = None,
                 controller: bool = True, rules: Path = DEFAULT_RULES, governor: str | None = None,
                 worker_id: str = "serve-worker", lease_seconds: float = 30.0, poll_s: float = 0.5,
                 role: Role = "all", leader_lease_s: float = 5.0) -> None:
        """``role``: see the module docstring; ``api`` takes no ``adapters`` and runs no controller,
        ``worker`` runs no controller, ``controller`` takes no ``adapters`` (else ``InvalidInput``).
        ``leader_lease_s``: the controller leader's lease (a standby takes over within about that long)."""
        if role not in ROLES:
            raise InvalidInput("--role", f"{role!r} is not one of {', '.join(ROLES)}")
        if role in ("api", "controller") and adapters:
            raise InvalidInput("--agent", f"the {role} role runs no agents: give --agent to a worker")
        if role == "worker" and not adapters:
            raise InvalidInput("--agent", "the worker role needs at least one --agent to run")
        self.role: Role = role
        self.leader_lease_s = leader_lease_s
        controller = controller if role == "all" else role == "controller"
        self.settings = settings
        self.adapters = dict(adapters or {})
        self.controller = controller
        self.rules = rules
        self.governor = governor
        self.worker_id = worker_id
        self.lease_seconds = lease_seconds
        self.poll_s = poll_s
        self.started_at_us = 0
        self.governance_calls = governance_specs()
        #: the Host names a request may carry (DNS-rebinding protection); ``pmw serve`` adds its own address
        self.allowed_hosts: set[str] = {"127.0.0.1", "localhost", "[::1]", "::1"}
        self._lock: ServeLock | None = None
        self._runtime: Runtime | None = None
        self._runner_runtime: Runtime | None = None
        self._runner: InProcessRunner | None = None
        self._runner_thread: threading.Thread | None = None
        self._runner_error: str | None = None
        self._runner_stats = RunStats()
        self._stop = threading.Event()
        self._external: ExternalAgents | None = None
        self._governance: GovernanceCalls | None = None
        self._dispatch: Dispatcher | None = None
        self._wake_feed: WakeFeed | None = None
        self._leadership: ControllerLeadership | None = None
        self._leader_state: LeaderState = "none"
        #: how many times this process took over as the controller leader (a rebuild from SQL each time)
        self.takeovers = 0

    # -- what the API serves ---------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            raise RuntimeError("the service is not started")
        return self._runtime

    @property
    def dispatch(self) -> Dispatcher:
        """The one door of every transport's calls (``engine.service.dispatch``)."""
        if self._dispatch is None:
            raise RuntimeError("the service is not started")
        return self._dispatch

    @property
    def wake_feed(self) -> WakeFeed:
        """The feed of queued wakes (``engine.service.wake_feed``): what the transports push."""
        if self._wake_feed is None:
            raise RuntimeError("the service is not started")
        return self._wake_feed

    @property
    def governance(self) -> GovernanceCalls:
        if self._governance is None:
            raise RuntimeError("the service is not started")
        return self._governance

    def pull(self, principal: TokenPrincipal, arguments: dict[str, Any]) -> Pulled | None:
        """The token's agent's most urgent due wake, leased to its pull, with its projection."""
        unknown = set(arguments) - {"lease_seconds"}
        if unknown:
            raise InvalidInput(sorted(unknown)[0][:100], "pull takes only lease_seconds")
        assert self._external is not None
        lease = arguments.get("lease_seconds", self.lease_seconds)
        if isinstance(lease, bool) or not isinstance(lease, int | float):
            raise InvalidInput("lease_seconds", "must be a number of seconds")
        return self._external.pull(principal.agent_id, lease_seconds=float(lease))

    def decide(self, principal: TokenPrincipal, wake_id: str, arguments: dict[str, Any]) -> Receipt:
        """Carry out the token's agent's decision (a decision envelope, or today's AgentDecision) for a wake it
        pulled, as the run loop's worker carries it out; the wake's receipt (``engine.protocol.pull``)."""
        unknown = set(arguments) - {"decision"}
        if unknown or "decision" not in arguments:
            raise InvalidInput("decision", "send {\"arguments\": {\"decision\": {...}}} and nothing else")
        decision = arguments["decision"]
        if not isinstance(decision, dict):
            raise InvalidInput("decision", "must be a JSON object (a decision envelope, or an AgentDecision)")
        assert self._external is not None
        return self._external.decide(principal.agent_id, wake_id, decision)

    def end_streams(self) -> None:
        """End every pushed stream (the wake feed stopped: each subscription ends with ``feed_stopped``), so a
        stopping server's open streams finish at once instead of holding its graceful stop to the end of
        its timeout. Idempotent; :meth:`stop` calls it too."""
        if self._wake_feed is not None:
            self._wake_feed.stop()

    def health(self) -> HealthReport:
        runtime = self.runtime
        pdp = runtime.pdp_health()
        current = runtime.book.current_policy_epoch()
        thread = self._runner_thread
        runner: Literal["running", "stopped", "none"] = (
            "none" if thread is None else "running" if thread.is_alive() else "stopped")
        replicas = runtime.pdp_replicas()
        ok = (pdp is None or pdp.state == "up") and runner != "stopped" and all(r.state == "up" for r in replicas)
        lead = self._leadership
        return HealthReport(status="ok" if ok else "degraded", pid=os.getpid(), started_at_us=self.started_at_us,
                            policy_epoch=current.epoch if current else None, pdp=pdp, runner=runner,
                            runner_error=self._runner_error, role=self.role, pdp_replicas=replicas,
                            leader=self._leader_state, leader_generation=lead.fencing_token if lead else None)

    # -- lifecycle ------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Take the world's lock, open the runtime (its PDP supervised), then start the runner (if there is
        anything for it to run). A failure closes whatever was opened and releases the lock."""
        if self.role == "all":
            self._lock = ServeLock.acquire(self.settings.resolved_data_dir())
        try:
            self._runtime = Runtime.open(self.settings, supervise=True)
            self.started_at_us = self._runtime.book.clock.now_us()
            self._governance = GovernanceCalls(self._runtime)
            self._dispatch = Dispatcher(self._runtime)
            self._external = ExternalAgents(self._runtime.book)
            self._wake_feed = WakeFeed(self._runtime.store.read)
            self._runtime.store.on_commit(self._wake_feed.commit_hook)  # pushed at once, not at the next poll
            self._wake_feed.start()
            if self.role == "controller":
                self._start_leader()
            elif self.controller or self.adapters:
                self._start_runner()
        except BaseException:
            self.stop()
            raise

    def announce(self, url: str) -> dict[str, Any]:
        """Record the server's address in the lock file; what ``pmw serve`` prints once it listens."""
        info = {"pid": os.getpid(), "url": url, "started_at_us": self.started_at_us,
                "policy_epoch": self.health().policy_epoch}
        if self._lock is not None:
            self._lock.write(info)
        return info

    def _open_runner_runtime(self) -> Runtime:
        """A runtime on a store of its own deciding with the service's PDP replicas (never PDPs of its own)."""
        grpc = [a.grpc for a in self.runtime.pdp.addresses]
        runner_settings = self.settings.model_copy(update={
            "pdp_address": grpc[0], "pdp_addresses": ",".join(grpc), "pdp_admin_user": None,
            "pdp_admin_password": None})
        self._runner_runtime = Runtime.open(runner_settings, supervise=False)
        if self._dispatch is not None:  # a token revoked by the runner's agents is out of the gate's cache at once
            self._runner_runtime.store.on_commit(self._dispatch.proofs.commit_hook)
        return self._runner_runtime

    def _start_leader(self) -> None:
        """The controller as a candidate for the world's leadership, on a thread of its own (the fence is
        the thread's): it leads only while it holds the lease (see :meth:`_lead`)."""
        runtime = self._open_runner_runtime()
        holder = f"{socket.gethostname()[:100]}:{os.getpid()}:{secrets.token_hex(4)}"
        lead = ControllerLeadership(runtime.store, "main", holder, self.leader_lease_s, clock=runtime.book.clock)
        loop = ControllerLoop(runtime.book, self.rules, leadership=lead)
        loop.load()  # a bad rule directory fails here, before anything is written
        if self.governor:
            ensure_controller_agent(runtime.book, self.governor)
        self._leadership = lead
        self._runner_thread = threading.Thread(target=self._lead, args=(lead, loop, runtime),
                                               name="pmw-serve-leader", daemon=True)
        self._runner_thread.start()

    def _lead(self, lead: ControllerLeadership, loop: ControllerLoop, runtime: Runtime) -> None:
        """Until stopped: stand by while another holds the lease; on taking it over, rebuild the controller
        from SQL and drain the log under the fence, renewing every third of the lease; on a lost lease
        (``NotLeader`` from a fenced step, or a failed renewal) stand by again at once. Releases the lease
        on stop, so a standby takes over without waiting for it to run out."""
        wait_s = min(self.poll_s, self.leader_lease_s / 3)
        try:
            while not self._stop.is_set():
                try:
                    if not lead.acquire():
                        self._leader_state = "standby"
                        self._stop.wait(self.leader_lease_s / 3)
                        continue
                    if self._leader_state != "leader":
                        loop.start()
                        self.takeovers += 1
                        self._leader_state = "leader"
                    loop.drain()
                    self._runner_error = None
                except NotLeader:
                    lead.lost()
                    self._leader_state = "standby"
                    continue
                except PolicyEpochChanged:
                    runtime.follow_policy()
                    continue
                except (PolicyUnavailable, StoreUnavailable) as exc:
                    self._runner_error = f"waiting: {exc.message}"[:500]
                self._stop.wait(wait_s)
        except Exception as exc:  # reported on /v1/health as a stopped runner; the API keeps serving
            self._runner_error = f"{type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            self._leader_state = "none"
            with contextlib.suppress(StoreUnavailable):  # else the lease runs out by itself
                lead.release()
            loop.close()

    def _start_runner(self) -> None:
        """The runner decides with the runtime's PDP replicas (never a PDP of its own) on a store of its own."""
        self._open_runner_runtime()
        assert self._runner_runtime is not None
        if self._wake_feed is not None:
            self._runner_runtime.store.on_commit(self._wake_feed.commit_hook)
        runner = InProcessRunner(
            self._runner_runtime.book, adapters=self.adapters, rule_dir=self.rules,
            governor=self.governor or "", worker_id=self.worker_id, lease_seconds=self.lease_seconds,
            controller=self.controller, follow_policy=self._runner_runtime.follow_policy)
        self._runner = runner
        runner.start()
        self._runner_thread = threading.Thread(target=self._run, name="pmw-serve-runner", daemon=True)
        self._runner_thread.start()

    def _run(self) -> None:
        """Rounds until stopped. While no decision can be had (the PDP down and being restarted, the store
        unreachable) the runner waits and tries again: work waits, nothing is decided meanwhile."""
        assert self._runner is not None
        while not self._stop.is_set():
            try:
                self._runner_stats.add(self._runner.serve(self._stop, poll_s=self.poll_s))
            except (PolicyUnavailable, StoreUnavailable) as exc:
                self._runner_error = f"waiting: {exc.message}"[:500]
                self._stop.wait(self.poll_s)
                continue
            except Exception as exc:  # reported on /v1/health as a stopped runner; the API keeps serving
                self._runner_error = f"{type(exc).__name__}: {exc}"[:500]
                raise
            self._runner_error = None

    def stop(self) -> None:
        """Stop the wake feed (its subscriptions end) and the runner between cycles, close both runtimes,
        release the lock. Idempotent."""
        self._stop.set()
        feed, self._wake_feed = self._wake_feed, None
        if feed is not None:
            feed.stop()
        thread, self._runner_thread = self._runner_thread, None
        if thread is not None:
            thread.join(RUNNER_STOP_S)
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()
        for name in ("_runner_runtime", "_runtime"):
            runtime = getattr(self, name)
            setattr(self, name, None)
            if runtime is not None:
                runtime.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


__all__ = ["GOVERNANCE_WRITES", "HealthReport", "Service", "governance_specs"]

"""Keeps the runtime's own PDP running: notices that it died (or stopped answering) and restarts it.

:class:`PdpSupervisor` watches one :class:`~engine.policy.pdp_process.ManagedPdp` from a daemon thread. A
server that exited, or whose health endpoint failed ``unhealthy_after`` checks in a row (it is then killed by
its PID), is restarted on the same loopback ports, so clients keep their addresses. While it is down every
decision raises :class:`~engine.errors.PolicyUnavailable` in the client (fail closed): nothing is decided
and nothing written until it is back. Restarts back off: a server that dies within ``stable_s`` of its
start, or a start that fails, doubles the wait before the next attempt (``interval_s`` up to
``max_backoff_s``); after a stable period the next restart is immediate. Each death and each restart is one
line on the ``pmw.pdp`` logger (PIDs, exit codes, counts; never the admin password or the config).
:meth:`PdpSupervisor.status` is what a health endpoint shows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from typing import Literal

from engine.errors import Closed, InvalidInput, PolicyUnavailable
from engine.models.common import Model
from engine.policy.pdp_process import ManagedPdp, pdp_healthy
from engine.sources import Clock, SystemClock

log = logging.getLogger("pmw.pdp")

PdpState = Literal["up", "down", "restarting", "stopped"]
_MAX_ERROR_CHARS = 300


class PdpHealth(Model):
    """The supervised PDP as a health endpoint shows it.

    ``state``: ``up`` (running and answering), ``down`` (dead, waiting for the next restart attempt),
    ``restarting`` (a start in progress), ``stopped`` (not supervised: before :meth:`PdpSupervisor.start`,
    after :meth:`PdpSupervisor.stop`, or its owner stopped the PDP). ``pid`` is the running server's
    (None unless up or restarting); ``restarts`` counts successful restarts; ``last_exit_code`` is the
    last death's (negative: killed by that signal); ``last_error`` the last failed start's reason (first
    line, cut); ``since_us`` when the state last changed (µs since the epoch)."""

    state: PdpState
    pid: int | None
    restarts: int
    last_exit_code: int | None
    last_error: str | None
    since_us: int


def _one_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:_MAX_ERROR_CHARS]


class PdpSupervisor:
    """Restarts ``managed`` whenever it dies, until :meth:`stop`. Thread-safe.

    Start the PDP first (``managed.start()``: the caller gets its address and a start error), then
    :meth:`start` the supervisor; :meth:`stop` ends the watching, then stops the PDP (and removes its
    working directory). ``unhealthy_after`` consecutive failed health checks (each bounded by
    ``health_timeout_s``) of a running server count as a death (0: only process exits count)."""

    def __init__(self, managed: ManagedPdp, *, interval_s: float = 0.2, max_backoff_s: float = 2.0,
                 stable_s: float = 10.0, unhealthy_after: int = 5, health_timeout_s: float = 1.0,
                 start_timeout_s: float = 20.0, clock: Clock | None = None) -> None:
        if not interval_s > 0:
            raise InvalidInput("interval_s", "must be > 0")
        if not max_backoff_s >= interval_s:
            raise InvalidInput("max_backoff_s", "must be >= interval_s")
        if unhealthy_after < 0:
            raise InvalidInput("unhealthy_after", "must be >= 0 (0: only a process exit counts)")
        self.managed = managed
        self.interval_s = interval_s
        self.max_backoff_s = max_backoff_s
        self.stable_s = stable_s
        self.unhealthy_after = unhealthy_after
        self.health_timeout_s = health_timeout_s
        self.start_timeout_s = start_timeout_s
        self._clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._state: PdpState = "stopped"
        self._since_us = self._clock.now_us()
        self._restarts = 0
        self._last_exit: int | None = None
        self._last_error: str | None = None
        self._failures = 0  # consecutive quick deaths and failed starts: the backoff's exponent
        self._up_at = time.monotonic()

    # -- public ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin watching (idempotent). A stopped supervisor does not start again (:class:`Closed`): make
        a new one."""
        with self._lock:
            if self._stopping.is_set():
                raise Closed("PDP supervisor")
            if self._thread is not None:
                return
            self._up_at = time.monotonic()
            self._thread = threading.Thread(target=self._run, name="pmw-pdp-supervisor", daemon=True)
            self._set_state_locked(self._observed_state())
            self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop watching first, then stop the PDP (by its PID; its working directory removed). Idempotent
        and safe against a concurrent stop or a restart in progress (which is cancelled, never left
        running). The join is bounded by ``timeout_s``."""
        self._stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self.managed.stop()
        with self._lock:
            self._set_state_locked("stopped")

    def status(self) -> PdpHealth:
        """The current :class:`PdpHealth` (a snapshot; never blocks on the PDP)."""
        with self._lock:
            state = self._state
            proc = self.managed.proc
            if state == "up" and (proc is None or proc.poll() is not None):
                state = "down"  # died since the watcher last looked: say so at once
            pid = proc.pid if proc is not None and state in ("up", "restarting") else None
            return PdpHealth(state=state, pid=pid, restarts=self._restarts, last_exit_code=self._last_exit,
                             last_error=self._last_error, since_us=self._since_us)

    def __enter__(self) -> PdpSupervisor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the watching thread -----------------------------------------------------------------------

    def _observed_state(self) -> PdpState:
        if self.managed.stopped:
            return "stopped"
        proc = self.managed.proc
        return "up" if proc is not None and proc.poll() is None else "down"

    def _set_state_locked(self, state: PdpState) -> None:
        if state != self._state:
            self._state = state
            self._since_us = self._clock.now_us()

    def _set_state(self, state: PdpState) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self._set_state_locked(state)

    def _run(self) -> None:
        misses = 0
        while not self._stopping.is_set():
            if self.managed.stopped:  # its owner stopped it: nothing to restart
                self._set_state("stopped")
                self._stopping.wait(self.interval_s)
                continue
            proc = self.managed.proc
            if proc is None or proc.poll() is not None:
                self._died(proc.pid if proc is not None else None, proc.returncode if proc is not None else None)
                self._restart_until_up()
                misses = 0
                continue
            self._set_state("up")
            if self.unhealthy_after > 0 and self.managed.address is not None:
                if pdp_healthy(self.managed.address, timeout_s=self.health_timeout_s):
                    misses = 0
                else:
                    misses += 1
                    if misses >= self.unhealthy_after and not self._stopping.is_set():
                        log.warning("pdp pid %d failed %d health checks in a row; killing it", proc.pid, misses)
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(proc.pid, signal.SIGKILL)
                        proc.wait(5)  # SIGKILL cannot be ignored; reaped here, restarted on the next turn
                        continue
            self._stopping.wait(self.interval_s)

    def _died(self, pid: int | None, code: int | None) -> None:
        if time.monotonic() - self._up_at >= self.stable_s:
            self._failures = 0
        with self._lock:
            if self._stopping.is_set():
                return
            self._last_exit = code
            self._set_state_locked("down")
        log.warning("pdp pid %s exited with %s; restarting (restart %d)", pid, code, self._restarts + 1)

    def _backoff(self) -> float:
        if self._failures == 0:
            return 0.0
        return float(min(self.max_backoff_s, self.interval_s * 2 ** (self._failures - 1)))

    def _restart_until_up(self) -> None:
        while not self._stopping.is_set():
            if self._stopping.wait(self._backoff()):
                return
            self._set_state("restarting")
            try:
                self.managed.start(self.start_timeout_s, cancel=self._stopping, revive=True)
            except PolicyUnavailable as exc:
                if self._stopping.is_set() or self.managed.stopped:
                    return
                self._failures += 1
                with self._lock:
                    self._last_error = _one_line(exc)
                    self._set_state_locked("down")
                log.error("pdp restart failed (%s); next attempt in %.1f s", _one_line(exc), self._backoff())
                continue
            self._failures += 1  # a quick death after this start backs off; a stable period resets it
            self._up_at = time.monotonic()
            with self._lock:
                if self._stopping.is_set():
                    return
                self._restarts += 1
                self._set_state_locked("up")
            log.warning("pdp restarted: pid %s on the same ports (restarts: %d)", self.managed.pid, self._restarts)
            return


__all__ = ["PdpHealth", "PdpState", "PdpSupervisor"]
